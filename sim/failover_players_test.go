package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// Players across a zone node's failover (issue 30): the node that
// simulates a player's master and pet dies; its standby adopts them from
// its checkpoints under the same ids. A player whose gateway lives keeps
// its socket and plays on; a player whose gateway died with the node
// resumes on another gateway, before or after the adoption, and finds the
// adopted master. Never two masters of one account at any step.

// failNode kills node i (its gateway without a word, its lease gone) and
// applies the table the failover controller would write (PlanFailover).
// With adopt false it only kills, and returns the table to apply later.
func (rc *resumeCluster) failNode(t *testing.T, ctx context.Context, i int) func() {
	t.Helper()
	rc.killGateway(t, ctx, i, true)
	dead := rc.c.Nodes[i].Name
	var live []string
	for _, n := range rc.c.Nodes {
		if n.Name != dead {
			live = append(live, n.Name)
		}
	}
	return func() {
		t.Helper()
		next, _, err := zone.PlanFailover(rc.rts[(i+1)%len(rc.rts)].Table(), live, []string{dead})
		if err != nil || next == nil {
			t.Fatalf("the failover table: %v (%v)", next, err)
		}
		// Apply waits for every node's lease; the dead one's is gone.
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := rc.c.Admin.ApplyRegions(actx, next, coord.ApplyOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		for j, n := range rc.c.Nodes {
			if j != i {
				if err := n.Ownership.WaitVersion(actx, next.Version()); err != nil {
					t.Fatalf("%s waits for table v%d: %v", n.Name, next.Version(), err)
				}
			}
		}
	}
}

// simulatedOn names the live node that simulates id ("" none).
func (rc *resumeCluster) simulatedOn(id uint64, dead int) string {
	for i, rt := range rc.rts {
		if i == dead {
			continue
		}
		ch := make(chan bool, 1)
		rt.Post(func() { ch <- rt.Simulated(ecs.ID(id)) })
		if <-ch {
			return rt.Name()
		}
	}
	return ""
}

// standInRegionOf returns a point of a region owner owns.
func standInRegionOf(rt *zone.Runtime, owner string) torus.Pos {
	for y := 0.0; ; y += 256 {
		if at := (torus.Pos{X: 1000, Y: y}); rt.Table().OwnerOf(at) == owner {
			return at
		}
	}
}

// The gateway lives (zone-0), the master's node (zone-1) dies: the master
// and pet come back on the standby under the same ids, where they stood
// at the last checkpoint, the socket stays open, the client's inputs reach
// the adopted master and its view follows it.
func TestAPlayerKeepsItsSocketAcrossItsNodesFailover(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rc := startResumeCluster(t, 3, 37)
	geo := rc.rts[0].Geometry()
	at := standInRegionOf(rc.rts[0], "zone-1")
	const a = account.ID(3701)
	rc.w.save(a, at)
	c := login(t, ctx, rc.urls[0], rc.w.token(a))
	master, pet := you(c)
	dest := geo.Translate(at, torus.Pos{X: 12})
	walkTo(t, ctx, c, geo, master, dest, false)
	rc.watch.waitSteps(t, 60) // three checkpoints of it standing there
	apply := rc.failNode(t, ctx, 1)
	rc.watch.waitSteps(t, 20)
	apply()
	if !zonetest.Poll(20*time.Second, func() bool {
		return rc.simulatedOn(master, 1) != "" && rc.simulatedOn(pet, 1) != ""
	}) {
		t.Fatalf("the master %d and pet %d never came back on a live node", master, pet)
	}
	on := rc.simulatedOn(master, 1)
	t.Logf("master %d and pet %d adopted on %s", master, pet, on)
	rc.watch.waitSteps(t, 20)
	rc.watch.check(t)
	live := []*zone.Runtime{rc.rts[0], rc.rts[2]} // a dead node's world runs nothing posted to it
	if n := simulatedOwned(live, func(o account.ID) bool { return o == a }); n != 2 {
		t.Fatalf("%d entities of the account simulated, want its master and pet", n)
	}
	select {
	case <-c.Done():
		code, reason, _ := c.Closed()
		t.Fatalf("the socket closed (%d %s)", code, reason)
	default:
	}
	wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
	defer wcancel()
	if err := c.Wait(wctx, func(v *sim.View) bool {
		p, ok := v.Position(master)
		return ok && near(geo, p, dest, 0.5)
	}); err != nil {
		t.Fatalf("the client does not see its master where it stood: %v", err)
	}
	back := geo.Translate(dest, torus.Pos{X: -6})
	if _, err := c.Move(ctx, master, back.X, back.Y); err != nil {
		t.Fatal(err)
	}
	wctx2, wcancel2 := context.WithTimeout(ctx, 15*time.Second)
	defer wcancel2()
	if err := c.Wait(wctx2, func(v *sim.View) bool {
		p, ok := v.Position(master)
		return ok && near(geo, p, back, 0.5)
	}); err != nil {
		t.Fatalf("the client's inputs do not reach the adopted master on %s: %v", on, err)
	}
	select {
	case <-c.Done():
		code, reason, _ := c.Closed()
		t.Fatalf("the socket closed (%d %s)", code, reason)
	default:
	}
	rc.watch.waitSteps(t, 20)
	rc.watch.check(t)
	if n := simulatedOwned(live, func(o account.ID) bool { return o == a }); n != 2 {
		t.Fatalf("%d entities of the account simulated, want its master and pet", n)
	}
}

// The gateway and the master's node are one (zone-0) and die together:
// the client resumes on another gateway before the failover table is
// written (the standby holds the master only as checkpoint records, and
// nobody answers Taken yet) or after the adoption. Either way it gets the
// adopted master where it stood, and no second master is ever made from
// the store's older record.
func TestAPlayerResumesAcrossItsNodesFailover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		on     int
		before bool // resume before the failover table
	}{
		{"resume on zone-1 before the adoption", 1, true},
		{"resume on zone-2 before the adoption", 2, true},
		{"resume on zone-1 after the adoption", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) { resumeAcrossFailover(t, tc.on, tc.before) })
	}
}

func resumeAcrossFailover(t *testing.T, on int, before bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rc := startResumeCluster(t, 3, 38)
	geo := rc.rts[0].Geometry()
	at := standInRegionOf(rc.rts[0], "zone-0")
	const a = account.ID(3801)
	rc.w.save(a, at)
	first := login(t, ctx, rc.urls[0], rc.w.token(a))
	master, pet := you(first)
	dest := geo.Translate(at, torus.Pos{X: 12})
	walkTo(t, ctx, first, geo, master, dest, true)
	cred := first.Credential()
	rc.watch.waitSteps(t, 60) // three checkpoints of it standing there
	apply := rc.failNode(t, ctx, 0)
	<-first.Done()
	var next *sim.Client
	resume := func() {
		var err error
		if next, err = resumeOn(t, ctx, rc.urls[on], cred); err != nil {
			t.Fatalf("resume on %s: %v", rc.urls[on], err)
		}
	}
	if before {
		resume()
		// Longer than a takeover waits for answers before it loads the
		// player from the store (40 ticks).
		rc.watch.waitSteps(t, 80)
		rc.watch.check(t)
		apply()
		// The adoption, then a second master if the login made one.
		if !zonetest.Poll(20*time.Second, func() bool { return rc.simulatedOn(master, 0) != "" }) {
			t.Fatalf("the master %d never came back on a live node", master)
		}
		rc.watch.waitSteps(t, 20)
		rc.watch.check(t)
	} else {
		apply()
		if !zonetest.Poll(20*time.Second, func() bool { return rc.simulatedOn(master, 0) != "" }) {
			t.Fatalf("the master %d never came back on a live node", master)
		}
		resume()
	}
	if err := next.Wait(ctx, func(v *sim.View) bool {
		m, p := v.You()
		return m == master && p == pet
	}); err != nil {
		m, p := you(next)
		t.Fatalf("the resumed session has %d/%d, want the adopted %d/%d: %v", m, p, master, pet, err)
	}
	if err := next.Wait(ctx, func(v *sim.View) bool {
		m, p := v.You()
		pos, ok := v.Position(m)
		return m == master && p == pet && ok && near(geo, pos, dest, 0.5)
	}); err != nil {
		m, p := you(next)
		t.Fatalf("the resumed session has %d/%d, want the adopted %d/%d standing at %v: %v", m, p, master, pet, dest, err)
	}
	rc.watch.waitSteps(t, 20)
	rc.watch.check(t)
	back := geo.Translate(dest, torus.Pos{X: -6})
	if _, err := next.Move(ctx, master, back.X, back.Y); err != nil {
		t.Fatal(err)
	}
	if err := next.Wait(ctx, func(v *sim.View) bool {
		p, ok := v.Position(master)
		return ok && near(geo, p, back, 0.5)
	}); err != nil {
		t.Fatalf("the resumed session cannot walk the adopted master: %v", err)
	}
	rc.watch.waitSteps(t, 20)
	rc.watch.check(t)
	if n := simulatedOwned(rc.rts[1:], func(o account.ID) bool { return o == a }); n != 2 {
		t.Fatalf("%d entities of the account simulated, want its master and pet", n)
	}
}
