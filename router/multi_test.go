package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
)

func multiKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	return keys
}

// calls records what each node was asked in a multi-key call.
type calls struct {
	mu  sync.Mutex
	got map[Node][][]string
}

func (c *calls) add(n Node, keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.got == nil {
		c.got = map[Node][][]string{}
	}
	c.got[n] = append(c.got[n], slices.Clone(keys))
}

func TestExecuteMultiGroupsByLeader(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	addNodes(t, r, node(1), node(2), node(3), node(4))
	keys := append(multiKeys(80), "user:7") // a duplicate is sent twice
	var rec calls
	vals, err := ExecuteMulti(t.Context(), r, keys, func(_ context.Context, cl *client, n Node, ks []string, vs []string) error {
		rec.add(n, ks)
		if len(vs) != len(ks) {
			t.Errorf("%d values for %d keys", len(vs), len(ks))
		}
		for j, k := range ks {
			vs[j] = k + "@" + cl.node.ID()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	for n, batches := range rec.got {
		if len(batches) != 1 {
			t.Errorf("node %s called %d times, want once", n.ID(), len(batches))
		}
		for _, k := range batches[0] {
			if lead, _ := r.Route(k); lead.Node != n {
				t.Errorf("key %s sent to %s, its leader is %s", k, n.ID(), lead.Node.ID())
			}
		}
		sent += len(batches[0])
	}
	if sent != len(keys) || len(rec.got) != 4 {
		t.Fatalf("%d keys sent to %d nodes, want %d to 4", sent, len(rec.got), len(keys))
	}
	for i, k := range keys {
		lead, _ := r.Route(k)
		if want := k + "@" + lead.Node.ID(); vals[i] != want {
			t.Fatalf("vals[%d] = %q, want %q", i, vals[i], want)
		}
	}
}

// A failed node's keys go to each key's own next replica, not to one node
// chosen for the whole group.
func TestExecuteMultiFailsOverPerKey(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	addNodes(t, r, node(1), node(2), node(3), node(4), node(5))
	keys := multiKeys(200)
	dead, _ := r.Route(keys[0])
	want := make([]Node, len(keys)) // who should answer each key
	for i, k := range keys {
		owners, _ := r.RouteAll(k, 2)
		want[i] = owners[0].Node
		if owners[0].Node == dead.Node {
			want[i] = owners[1].Node
		}
	}
	vals, err := ExecuteMulti(t.Context(), r, keys, func(_ context.Context, _ *client, n Node, ks []string, vs []Node) error {
		if n == dead.Node {
			return errRefused
		}
		for j := range ks {
			vs[j] = n
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(vals, want) {
		t.Fatalf("answers %v, want %v", vals, want)
	}
	waitFor(t, "the failed node to leave the ring", func() bool { return !isLive(r, dead.Node) })
}

// An error that is not the node's fault fails that node's keys at once: no
// replica is asked and the node stays.
func TestExecuteMultiNotTheNodesFault(t *testing.T) {
	errBusy := errors.New("busy")
	c := newCluster()
	opts := baseOptions(c, clock.NewFake(epoch))
	opts.ShouldMarkDown = func(err error, _ Node) bool { return !errors.Is(err, errBusy) }
	r := newRouter(t, c, opts)
	addNodes(t, r, node(1), node(2), node(3))
	keys := multiKeys(60)
	busy, _ := r.Route(keys[0])
	asked := map[Node]int{}
	var mu sync.Mutex
	vals, err := ExecuteMulti(t.Context(), r, keys, func(_ context.Context, _ *client, n Node, ks []string, vs []int) error {
		mu.Lock()
		asked[n]++
		mu.Unlock()
		if n == busy.Node {
			return errBusy
		}
		for j := range vs {
			vs[j] = 1
		}
		return nil
	})
	var me *MultiError
	if !errors.As(err, &me) || !errors.Is(err, ErrSomeKeysFailed) || !errors.Is(err, errBusy) || errcode.Of(err) != "ROUTER.SOME_KEYS_FAILED" {
		t.Fatalf("err = %v, want a MultiError wrapping errBusy", err)
	}
	for i, k := range keys {
		lead, _ := r.Route(k)
		onBusy := lead.Node == busy.Node
		if onBusy != errors.Is(me.Errs[i], errBusy) || onBusy != (vals[i] == 0) {
			t.Fatalf("key %s (on busy node: %v): err %v, value %d", k, onBusy, me.Errs[i], vals[i])
		}
	}
	for n, k := range asked {
		if k != 1 {
			t.Errorf("node %s asked %d times", n.ID(), k)
		}
	}
	if !isLive(r, busy.Node) {
		t.Fatal("busy node marked down")
	}
}

func TestExecuteMultiEveryReplicaFails(t *testing.T) {
	c := newCluster()
	opts := baseOptions(c, clock.NewFake(epoch))
	opts.Replicas = 2
	r := newRouter(t, c, opts)
	addNodes(t, r, node(1), node(2), node(3))
	keys := multiKeys(30)
	leaders := make([]Node, len(keys))
	for i, k := range keys {
		lead, _ := r.Route(k)
		leaders[i] = lead.Node
	}
	_, err := ExecuteMulti(t.Context(), r, keys, func(context.Context, *client, Node, []string, []int) error { return errRefused })
	var me *MultiError
	if !errors.As(err, &me) || me.Failed != len(keys) || !errors.Is(err, ErrAllReplicasFailed) {
		t.Fatalf("err = %v", err)
	}
	// Each key lists the replicas it was tried on: its leader, and its
	// second owner unless that node had already failed (and so was
	// skipped) in this call.
	for i, e := range me.Errs {
		var ee *ExecuteError
		if !errors.As(e, &ee) || ee.Key != keys[i] || len(ee.Failures) == 0 || len(ee.Failures) > 2 {
			t.Fatalf("key %d: %v, want an ExecuteError over its replicas", i, e)
		}
		if ee.Failures[0].Node != leaders[i] {
			t.Fatalf("key %d: first failure on %s, leader is %s", i, ee.Failures[0].Node.ID(), leaders[i].ID())
		}
	}
}

func TestExecuteMultiEdges(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	fn := func(context.Context, *client, Node, []string, []int) error { return nil }
	if _, err := ExecuteMulti(t.Context(), r, []string{"a"}, fn); !errors.Is(err, ErrNoNodes) {
		t.Fatalf("no nodes: %v", err)
	}
	addNodes(t, r, node(1))
	if vals, err := ExecuteMulti(t.Context(), r, nil, fn); err != nil || len(vals) != 0 {
		t.Fatalf("no keys: %v %v", vals, err)
	}
	if _, err := ExecuteAllMulti(t.Context(), r, nil, func(context.Context, *client, Node, []string) error { return nil }); err != nil {
		t.Fatalf("no keys: %v", err)
	}
	r.Close()
	if _, err := ExecuteMulti(t.Context(), r, []string{"a"}, fn); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	if _, err := ExecuteAllMulti(t.Context(), r, []string{"a"}, func(context.Context, *client, Node, []string) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// Each node gets one call with every key it holds as leader or replica.
func TestExecuteAllMultiOneCallPerNode(t *testing.T) {
	c := newCluster()
	opts := baseOptions(c, clock.NewFake(epoch))
	opts.Replicas = 2
	r := newRouter(t, c, opts)
	addNodes(t, r, node(1), node(2), node(3), node(4))
	keys := multiKeys(100)
	var rec calls
	acked, err := ExecuteAllMulti(t.Context(), r, keys, func(_ context.Context, _ *client, n Node, ks []string) error {
		rec.add(n, ks)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for n, batches := range rec.got {
		if len(batches) != 1 {
			t.Fatalf("node %s called %d times", n.ID(), len(batches))
		}
		var want []string
		for _, k := range keys {
			owners, _ := r.RouteAll(k, 2)
			if owners[0].Node == n || owners[1].Node == n {
				want = append(want, k)
			}
		}
		if !slices.Equal(batches[0], want) {
			t.Fatalf("node %s got %v, holds %v", n.ID(), batches[0], want)
		}
	}
	for i, a := range acked {
		if a != 2 {
			t.Fatalf("key %d acked by %d nodes, want 2", i, a)
		}
	}

	// One node failing lowers the count of its keys; nothing fails.
	dead, _ := r.Route(keys[0])
	acked, err = ExecuteAllMulti(t.Context(), r, keys, func(_ context.Context, _ *client, n Node, ks []string) error {
		if n == dead.Node {
			return errRefused
		}
		return nil
	})
	if err != nil || acked[0] != 1 {
		t.Fatalf("with one node failing: acked[0] = %d, err %v", acked[0], err)
	}
	waitFor(t, "the failed node to leave the ring", func() bool { return !isLive(r, dead.Node) })

	// Every node failing fails every key.
	_, err = ExecuteAllMulti(t.Context(), r, keys, func(context.Context, *client, Node, []string) error { return errRefused })
	var me *MultiError
	if !errors.As(err, &me) || me.Failed != len(keys) || !errors.Is(err, ErrAllReplicasFailed) {
		t.Fatalf("all failing: %v", err)
	}
}

func TestExecuteAllValuesReturnsTheSuccesses(t *testing.T) {
	c := newCluster()
	opts := baseOptions(c, clock.NewFake(epoch))
	opts.Replicas = 3
	r := newRouter(t, c, opts)
	addNodes(t, r, node(1), node(2), node(3))
	owners, _ := r.RouteAll("k", 3)
	replies, err := ExecuteAllValues(t.Context(), r, "k", func(_ context.Context, cl *client, n Node) (string, error) {
		if n == owners[1].Node {
			return "", errRefused
		}
		return cl.node.ID(), nil
	})
	if err != nil || len(replies) != 2 {
		t.Fatalf("replies %v, err %v", replies, err)
	}
	for i, want := range []Node{owners[0].Node, owners[2].Node} {
		if replies[i].Node != want || replies[i].Value != want.ID() {
			t.Fatalf("reply %d = %+v, want %s", i, replies[i], want.ID())
		}
	}
}
