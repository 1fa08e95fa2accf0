package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// A player that logs out after its master's node last checkpointed it
// (issue 30), through a real gateway: the logout's save is its session's
// final record; the node dies, and its standby, holding the master as it
// stood before the logout, adopts it, finds the session ended and takes
// it out unsaved. The next login comes back where the logout left it,
// never where the checkpoint had it.
func TestALogoutAfterTheLastCheckpointComesBackAsSaved(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rc := startResumeClusterWith(t, 3, 44, noPeriodicSaves)
	geo := rc.rts[0].Geometry()
	at := standInRegionWithStandby(t, rc.rts[0], "zone-1", "zone-2", []string{"zone-0", "zone-1", "zone-2"})
	const a = account.ID(4401)
	rc.w.save(a, at)
	c := login(t, ctx, rc.urls[0], rc.w.token(a))
	master, pet := you(c)
	rc.watch.waitSteps(t, 60) // checkpoints of it standing at its start

	// zone-1's checkpoints stop reaching its standby: what zone-2 holds of
	// the player is older than all that follows. It walks, and logs out.
	rc.c.CutPeers("zone-1", "zone-2")
	dest := geo.Translate(at, torus.Pos{X: 12})
	walkTo(t, ctx, c, geo, master, dest, false)
	if err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	var rec worldstore.Player
	if !zonetest.Poll(20*time.Second, func() bool {
		var err error
		rec, err = rc.w.store.LoadPlayer(ctx, a)
		return err == nil && rec.Final
	}) {
		t.Fatalf("the store holds %+v, want the logout's final record", rec)
	}
	if !near(geo, rec.Pos, dest, 0.5) {
		t.Fatalf("the logout saved the player at %v, want where it walked to, %v", rec.Pos, dest)
	}
	logout := rec

	apply := rc.failNode(t, ctx, 1)
	rc.watch.waitSteps(t, 20)
	apply()
	if !zonetest.Poll(20*time.Second, func() bool { return stats(rc.rts[2]).Ended == 1 }) {
		t.Fatalf("zone-2 never took out the adopted master of the ended session (stats %+v)", stats(rc.rts[2]))
	}
	if on := rc.simulatedOn(master, 1); on != "" || rc.simulatedOn(pet, 1) != "" {
		t.Fatalf("the master %d (or its pet %d) of a player that logged out is simulated on %q", master, pet, on)
	}
	rc.watch.waitSteps(t, 20)
	rc.watch.check(t)

	// The next login loads the logout's record.
	next := login(t, ctx, rc.urls[2], rc.w.token(a))
	m2, _ := you(next)
	var p2 torus.Pos
	next.Look(func(v *sim.View) { p2, _ = v.Position(m2) })
	if !near(geo, p2, logout.Pos, 0.01) {
		t.Fatalf("the next login has its master at %v, want the logout's %v (the checkpoint had %v)", p2, logout.Pos, at)
	}
	if got, err := rc.w.store.LoadPlayer(ctx, a); err != nil || got.Epoch < logout.Epoch || got.Epoch == logout.Epoch && got.Pos != logout.Pos {
		t.Fatalf("the store holds %+v (%v), want the logout's record or a newer session's", got, err)
	}
	rc.watch.check(t)
}
