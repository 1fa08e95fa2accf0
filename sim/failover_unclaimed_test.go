package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// A player whose session ends while its master's node is dead (issue 30):
// the gateway's leave goes to the dead node and is lost. Once the standby
// adopts the master, no session claims it: within Config.Timers.Unclaimed
// it is saved and taken out with its pet, as a logout does, and the next
// login loads exactly that state.

// masterState is what a node holds of a master: its position and the
// session it answers to.
type masterState struct {
	on      string
	pos     torus.Pos
	session uint64
}

// masterOn reads id on the live nodes (all but dead): where it is
// simulated, its position and session; on is "" if none simulates it.
func (rc *resumeCluster) masterOn(id uint64, dead int) masterState {
	for i, rt := range rc.rts {
		if i == dead {
			continue
		}
		ch := make(chan masterState, 1)
		rt.Post(func() {
			var s masterState
			if rt.Simulated(ecs.ID(id)) {
				s.on = rt.Name()
				if p, ok := rt.Positions().Get(ecs.ID(id)); ok {
					s.pos = p.Pos
				}
				if o, ok := rt.Owners().Get(ecs.ID(id)); ok {
					s.session = o.Session
				}
			}
			ch <- s
		})
		if s := <-ch; s.on != "" {
			return s
		}
	}
	return masterState{}
}

// standInRegionWithStandby returns a point of a region owner owns whose
// standby among live is standby.
func standInRegionWithStandby(t *testing.T, rt *zone.Runtime, owner, standby string, live []string) torus.Pos {
	t.Helper()
	table := rt.Table()
	for y := 1024.0; y < table.Grid().World().Height(); y += 2048 {
		for x := 1000.0; x < table.Grid().World().Width(); x += 2048 {
			at := torus.Pos{X: x, Y: y}
			if table.OwnerOf(at) == owner && zone.Standby(table.Grid().RegionOf(at), owner, live) == standby {
				return at
			}
		}
	}
	t.Fatalf("no region of %s has %s for its standby", owner, standby)
	return torus.Pos{}
}

// noPeriodicSaves leaves a player's record in the store as its login
// found it until something saves it on purpose (a logout, or the end of
// an adopted master's wait).
func noPeriodicSaves(c *zonetest.Config) {
	prev := c.Runtime
	c.Runtime = func(i int, rc *zone.Config) {
		prev(i, rc)
		rc.SaveEvery = time.Hour
	}
}

func TestAnAdoptedPlayerWithNoSessionIsSavedAndTakenOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		standby string
		logout  bool // the client logs out; else its socket drops
	}{
		{"logout, adopted by a third node", "zone-2", true},
		{"socket drop, adopted by the gateway's node", "zone-0", false},
	} {
		t.Run(tc.name, func(t *testing.T) { unclaimedAfterFailover(t, tc.standby, tc.logout) })
	}
}

func unclaimedAfterFailover(t *testing.T, standby string, logout bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rc := startResumeClusterWith(t, 3, 42, noPeriodicSaves)
	geo := rc.rts[0].Geometry()
	at := standInRegionWithStandby(t, rc.rts[0], "zone-1", standby, []string{"zone-0", "zone-1", "zone-2"})
	const a = account.ID(4201)
	rc.w.save(a, at)
	c := login(t, ctx, rc.urls[0], rc.w.token(a))
	master, pet := you(c)
	if on := rc.simulatedOn(master, -1); on != "zone-1" {
		t.Fatalf("the master is simulated on %q, want zone-1", on)
	}
	// It walks away from its stored record, and stands there for three
	// checkpoints.
	dest := geo.Translate(at, torus.Pos{X: 12})
	walkTo(t, ctx, c, geo, master, dest, false)
	rc.watch.waitSteps(t, 60)
	before := rc.masterOn(master, -1)

	// zone-1 dies as a process does: it stops at once, its lease held
	// until it runs out (halted from the goroutine that steps the
	// cluster). The session ends while it is dead: the leave goes to it.
	halted := make(chan struct{})
	rc.rts[1].Post(func() {
		rc.c.Halt("zone-1")
		close(halted)
	})
	<-halted
	if logout {
		if err := c.Logout(ctx); err != nil {
			t.Fatal(err)
		}
		<-c.Done()
	} else {
		_ = c.Close()
	}
	rc.watch.waitSteps(t, 20) // zone-0's world has the leave
	apply := rc.failNode(t, ctx, 1)
	rc.watch.waitSteps(t, 20)
	apply()

	var adopted masterState
	if !zonetest.Poll(20*time.Second, func() bool {
		adopted = rc.masterOn(master, 1)
		return adopted.on != ""
	}) {
		t.Fatalf("the master %d was never adopted", master)
	}
	since := rc.watch.steps.Load()
	if adopted.on != standby {
		t.Fatalf("the master was adopted by %s, want the standby %s", adopted.on, standby)
	}
	if !near(geo, adopted.pos, dest, 0.5) || adopted.session != before.session {
		t.Fatalf("adopted at %v under session %d, want where it stood (%v) under %d", adopted.pos, adopted.session, dest, before.session)
	}
	t.Logf("master %d adopted on %s at %v", master, adopted.on, adopted.pos)
	if rec, err := rc.w.store.LoadPlayer(ctx, a); err != nil || rec.Pos != at {
		t.Fatalf("the store holds %+v (%v) before the wait ends, want the record the login found, at %v", rec, err, at)
	}

	// Nobody plays it: it is saved and taken out with its pet.
	bound := uint64(zone.DefaultTimers().Unclaimed)
	if !zonetest.Poll(20*time.Second, func() bool {
		if s := rc.masterOn(master, 1); s.on != "" {
			adopted = s
			return false
		}
		return rc.simulatedOn(pet, 1) == ""
	}) {
		t.Fatalf("the adopted master %d (or its pet %d) stays in the world with no session", master, pet)
	}
	took := rc.watch.steps.Load() - since
	t.Logf("taken out %d steps after its adoption (Config.Timers.Unclaimed %d)", took, bound)
	if took > bound+40 {
		t.Fatalf("taken out %d steps after its adoption, want within %d", took, bound)
	}
	var rec worldstore.Player
	if !zonetest.Poll(20*time.Second, func() bool {
		var err error
		rec, err = rc.w.store.LoadPlayer(ctx, a)
		return err == nil && rec.Epoch == adopted.session
	}) {
		t.Fatalf("the store holds %+v, want the adopted master's save under session %d", rec, adopted.session)
	}
	if rec.Pos != adopted.pos || len(rec.State) == 0 {
		t.Fatalf("the store holds %v (state %x), want the adopted master where it stood, %v", rec.Pos, rec.State, adopted.pos)
	}
	if s := stats(rc.rts[indexOf(rc, standby)]); s.Unclaimed != 1 {
		t.Fatalf("%s counted %d unclaimed players, want 1", standby, s.Unclaimed)
	}

	// The next login loads exactly that state: where it stood, under new
	// ids, one master and one pet.
	next := login(t, ctx, rc.urls[2], rc.w.token(a))
	m2, _ := you(next)
	var p2 torus.Pos
	next.Look(func(v *sim.View) { p2, _ = v.Position(m2) })
	if m2 == master || !near(geo, p2, rec.Pos, 0.01) {
		t.Fatalf("the next login has master %d at %v, want a new master at the saved %v", m2, p2, rec.Pos)
	}
	rc.watch.waitSteps(t, 20)
	rc.watch.check(t)
	live := []*zone.Runtime{rc.rts[0], rc.rts[2]}
	if n := simulatedOwned(live, func(o account.ID) bool { return o == a }); n != 2 {
		t.Fatalf("%d entities of the account simulated, want its master and pet", n)
	}
}

func indexOf(rc *resumeCluster, name string) int {
	for i, rt := range rc.rts {
		if rt.Name() == name {
			return i
		}
	}
	return -1
}

// A session that lives keeps its adopted master past the wait: its
// gateway (zone-0) asks where the master went once zone-1's lease has
// ended, the standby answers Taken, and the player plays on.
func TestALiveSessionKeepsItsAdoptedMasterPastTheWait(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rc := startResumeCluster(t, 3, 43)
	geo := rc.rts[0].Geometry()
	at := standInRegionWithStandby(t, rc.rts[0], "zone-1", "zone-2", []string{"zone-0", "zone-1", "zone-2"})
	const a = account.ID(4301)
	rc.w.save(a, at)
	c := login(t, ctx, rc.urls[0], rc.w.token(a))
	master, pet := you(c)
	rc.watch.waitSteps(t, 40) // two checkpoints
	apply := rc.failNode(t, ctx, 1)
	rc.watch.waitSteps(t, 20)
	apply()
	if !zonetest.Poll(20*time.Second, func() bool { return rc.simulatedOn(master, 1) != "" }) {
		t.Fatalf("the master %d was never adopted", master)
	}
	rc.watch.waitSteps(t, uint64(zone.DefaultTimers().Unclaimed)+60)
	if on := rc.simulatedOn(master, 1); on != "zone-2" || rc.simulatedOn(pet, 1) == "" {
		t.Fatalf("the master %d of a live session is simulated on %q past the wait, want zone-2 with its pet", master, on)
	}
	if s := stats(rc.rts[2]); s.Unclaimed != 0 {
		t.Fatalf("zone-2 took out %d players of live sessions", s.Unclaimed)
	}
	dest := geo.Translate(at, torus.Pos{X: 8})
	if _, err := c.Move(ctx, master, dest.X, dest.Y); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx, func(v *sim.View) bool {
		p, ok := v.Position(master)
		return ok && near(geo, p, dest, 0.5)
	}); err != nil {
		t.Fatalf("the session cannot walk its adopted master: %v", err)
	}
	rc.watch.check(t)
}

// The gateway and the master's node are one (zone-0) and die together;
// the client resumes on zone-1 around the end of the adopted master's
// wait. Whichever comes first, the resume takes the adopted master over,
// or the master is saved and taken out and the resume loads that save:
// either way the player stands where it stood, and never twice.
func TestAResumeRacingTheUnclaimedWaitFindsThePlayerOnce(t *testing.T) {
	t.Parallel()
	bound := uint64(zone.DefaultTimers().Unclaimed)
	for _, tc := range []struct {
		name  string
		after uint64 // steps after the adoption
	}{
		{"just before the wait ends", bound - 5},
		{"as the wait ends", bound},
		{"after the master was taken out", bound + 60},
	} {
		t.Run(tc.name, func(t *testing.T) { resumeRacingUnclaimed(t, tc.after) })
	}
}

func resumeRacingUnclaimed(t *testing.T, after uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rc := startResumeClusterWith(t, 3, 44, noPeriodicSaves)
	geo := rc.rts[0].Geometry()
	at := standInRegionWithStandby(t, rc.rts[0], "zone-0", "zone-2", []string{"zone-0", "zone-1", "zone-2"})
	const a = account.ID(4401)
	rc.w.save(a, at)
	first := login(t, ctx, rc.urls[0], rc.w.token(a))
	master, _ := you(first)
	dest := geo.Translate(at, torus.Pos{X: 12})
	walkTo(t, ctx, first, geo, master, dest, true)
	cred := first.Credential()
	rc.watch.waitSteps(t, 60) // three checkpoints of it standing there
	apply := rc.failNode(t, ctx, 0)
	<-first.Done()
	rc.watch.waitSteps(t, 20)
	apply()
	if !zonetest.Poll(20*time.Second, func() bool { return rc.simulatedOn(master, 0) != "" }) {
		t.Fatalf("the master %d was never adopted", master)
	}
	rc.watch.waitSteps(t, after)
	next, err := resumeOn(t, ctx, rc.urls[1], cred)
	if err != nil {
		t.Fatal(err)
	}
	var m2 uint64
	if err := next.Wait(ctx, func(v *sim.View) bool {
		m, _ := v.You()
		p, ok := v.Position(m)
		m2 = m
		return m != 0 && ok && near(geo, p, dest, 0.5)
	}); err != nil {
		t.Fatalf("the resumed session has no master where the player stood (%v): %v", dest, err)
	}
	taken := stats(rc.rts[2]).Unclaimed
	t.Logf("resumed %d steps after the adoption: master %d (adopted %d), %d taken out", after, m2, master, taken)
	if (m2 == master) != (taken == 0) {
		t.Fatalf("the resume has master %d (adopted %d) with %d taken out: want the adopted one, or a new one after it was taken out", m2, master, taken)
	}
	rc.watch.waitSteps(t, 20)
	rc.watch.check(t)
	if n := simulatedOwned(rc.rts[1:], func(o account.ID) bool { return o == a }); n != 2 {
		t.Fatalf("%d entities of the account simulated, want its master and pet", n)
	}
}
