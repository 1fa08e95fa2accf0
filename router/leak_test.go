package router

import (
	"bytes"
	"context"
	"runtime"
	"testing"

	"github.com/shardwise/shardwise/clock"
)

// Close must stop every goroutine the router started: probers, probe
// calls, reconnect loops and disconnects. The test runs a busy life (health
// probes in flight, a node reconnecting, a removal, failovers) and then
// checks that the goroutine count returns to where it was.
func TestCloseLeaksNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()

	c := newCluster()
	clk := clock.NewFake(epoch)
	p := newProber()
	opts := healthOptions(c, clk, p, 2)
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	addNodes(t, r, node(1), node(2), node(3), node(4))
	if _, err := r.ExecuteAll(t.Context(), "k", func(context.Context, *client, Node) error { return nil }); err != nil {
		t.Fatal(err)
	}
	c.setRefuse(node(1).ID(), -1)
	r.MarkDown(node(1)) // reconnecting, and failing
	if err := r.RemoveNode(t.Context(), node(2)); err != nil {
		t.Fatal(err)
	}
	_ = r.Execute(t.Context(), "k", func(_ context.Context, _ *client, n Node) error {
		if n == node(3) {
			return errRefused
		}
		return nil
	})
	blockUntil(t, clk, 1)
	clk.Advance(probeInterval) // probes start and wait on their contexts
	<-p.started
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if c.openCount() != 0 {
		t.Fatalf("%d clients open", c.openCount())
	}

	// By name, not only by count: a count alone passes when goroutines
	// left by an earlier test happen to exit while this one runs.
	waitFor(t, "no goroutine started by a router is left", func() bool {
		stacks := make([]byte, 1<<20)
		stacks = stacks[:runtime.Stack(stacks, true)]
		return !bytes.Contains(stacks, []byte("shardwise/router.(*Router["))
	})
	waitFor(t, "goroutines to return to the count before the router", func() bool {
		return runtime.NumGoroutine() <= before
	})
}
