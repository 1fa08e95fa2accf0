package router

import (
	"context"
	"testing"

	"github.com/shardwise/shardwise/clock"
)

// The hot-path claim as a count, not a timing: in steady state Execute and
// Route allocate nothing beyond what fn does.
func TestExecuteAndRouteAllocateNothing(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	addNodes(t, r, node(1), node(2), node(3))
	ctx := context.Background()
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		i++
		if err := r.Execute(ctx, benchKeys[i&1023], noop); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Execute: %v allocations per call", n)
	}
	// The usual call shape: a closure that captures a result variable. fn
	// does not escape Execute, so the closure stays on the caller's stack.
	if n := testing.AllocsPerRun(1000, func() {
		i++
		var got int
		if err := r.Execute(ctx, benchKeys[i&1023], func(_ context.Context, c *client, _ Node) error {
			got = c.gen
			return nil
		}); err != nil || got == 0 {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Execute with a capturing closure: %v allocations per call", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		i++
		if _, err := r.Route(benchKeys[i&1023]); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Route: %v allocations per call", n)
	}
}
