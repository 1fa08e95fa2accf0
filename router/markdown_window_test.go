package router

import (
	"context"
	"testing"

	"github.com/shardwise/shardwise/clock"
)

// With Replicas = 1, between a failed call flagging the leader down and the
// worker publishing the placement without it, Route (and Execute) answer
// ErrNoNodes although other nodes are live: the fallback walks only
// Owners(key, Replicas), which is the leader alone. The window lasts as
// long as the membership lock is held (a slow membership change).
func TestRouteDuringMarkDownWindowReplicas1(t *testing.T) {
	c := newCluster()
	opts := baseOptions(c, clock.NewFake(epoch))
	opts.Replicas = 1
	r := newRouter(t, c, opts)
	addNodes(t, r, node(1), node(2), node(3))
	lead, _ := r.Route("user:1")
	r.mu.Lock() // a membership change in progress
	_ = r.Execute(t.Context(), "user:1", func(_ context.Context, _ *client, n Node) error {
		if n == lead.Node {
			return errRefused
		}
		return nil
	})
	_, err := r.Route("user:1")
	err2 := r.Execute(t.Context(), "user:1", func(context.Context, *client, Node) error { return nil })
	r.mu.Unlock()
	if err != nil || err2 != nil {
		t.Fatalf("with 2 live nodes: Route = %v, Execute = %v", err, err2)
	}
}
