package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// TestBreakerLoginWhileTheMastersNodeIsDead: a player plays on zone-0's
// gateway with its master on zone-1; zone-1 dies (halted, its lease
// held until it runs out); a second login of the account arrives on
// zone-2's gateway at a moment of the failover: before the lease ends,
// right after the failover table, or a few steps into the adoption.
// Exactly one master and one pet of the account at every step, and the
// survivor plays a master.
func TestBreakerLoginWhileTheMastersNodeIsDead(t *testing.T) {
	t.Parallel()
	for _, when := range []string{"dead", "table", "adopting"} {
		t.Run(when, func(t *testing.T) { breakerLoginAtFence(t, when) })
	}
}

func breakerLoginAtFence(t *testing.T, when string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rc := startResumeClusterWith(t, 3, 42, noPeriodicSaves)
	geo := rc.rts[0].Geometry()
	at := standInRegionWithStandby(t, rc.rts[0], "zone-1", "zone-2", []string{"zone-0", "zone-1", "zone-2"})
	const a = account.ID(4301)
	rc.w.save(a, at)
	c := login(t, ctx, rc.urls[0], rc.w.token(a))
	master, _ := you(c)
	if on := rc.simulatedOn(master, -1); on != "zone-1" {
		t.Fatalf("the master is simulated on %q, want zone-1", on)
	}
	dest := geo.Translate(at, torus.Pos{X: 12})
	if _, err := c.Move(ctx, master, dest.X, dest.Y); err != nil {
		t.Fatal(err)
	}
	rc.watch.waitSteps(t, 60)
	halted := make(chan struct{})
	rc.rts[1].Post(func() {
		rc.c.Halt("zone-1")
		close(halted)
	})
	<-halted
	type res struct{ m uint64 }
	second := make(chan res, 1)
	relogin := func() {
		go func() {
			c2 := login(t, ctx, rc.urls[2], rc.w.token(a))
			m, _ := you(c2)
			second <- res{m: m}
		}()
	}
	if when == "dead" {
		relogin()
	}
	rc.watch.waitSteps(t, 5)
	apply := rc.failNode(t, ctx, 1)
	rc.watch.waitSteps(t, 20)
	apply()
	switch when {
	case "table":
		relogin()
	case "adopting":
		rc.watch.waitSteps(t, 3)
		relogin()
	}
	var got res
	select {
	case got = <-second:
	case <-ctx.Done():
		t.Fatal("the second login never completed")
	}
	live := []*zone.Runtime{rc.rts[0], rc.rts[2]}
	if !zonetest.Poll(20*time.Second, func() bool {
		return simulatedOwned(live, func(o account.ID) bool { return o == a }) == 2 && rc.simulatedOn(got.m, 1) != ""
	}) {
		t.Fatalf("%s: %d entities of the account simulated, the second login's master %d on %q; want its master and pet",
			when, simulatedOwned(live, func(o account.ID) bool { return o == a }), got.m, rc.simulatedOn(got.m, 1))
	}
	rc.watch.waitSteps(t, 40)
	rc.watch.check(t)
	t.Logf("%s: second login's master %d (first %d) on %s", when, got.m, master, rc.simulatedOn(got.m, 1))
}
