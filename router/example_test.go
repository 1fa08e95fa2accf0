package router_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/shardwise/shardwise/router"
)

// A store is any client type; here a map stands in for a cache server.
type store map[string]string

func Example() {
	servers := map[string]store{}
	r, err := router.New(router.Options[store]{
		Connect: func(_ context.Context, n router.Node) (store, error) {
			s := store{}
			servers[n.ID()] = s
			return s, nil
		},
		Replicas: 2,
	})
	if err != nil {
		panic(err)
	}
	defer r.Close()

	ctx := context.Background()
	for _, n := range []router.Node{
		{Host: "10.0.0.1", Port: 6379},
		{Host: "10.0.0.2", Port: 6379},
		{Host: "10.0.0.3", Port: 6379, Vnodes: 200}, // a bigger box
	} {
		if err := r.AddNode(ctx, n); err != nil {
			panic(err)
		}
	}

	// Write to the leader and its replica, read from the leader.
	written, _ := r.ExecuteAll(ctx, "user:1", func(_ context.Context, s store, _ router.Node) error {
		s["user:1"] = "ada"
		return nil
	})
	var name string
	_ = r.Execute(ctx, "user:1", func(_ context.Context, s store, _ router.Node) error {
		name = s["user:1"]
		return nil
	})
	fmt.Println(len(written), "copies; read", name)
	// Output: 2 copies; read ada
}

// ExecuteAllMulti writes a batch with one call per node (an MSET, say), and
// ExecuteMulti reads it back with one call per leader (an MGET). A node
// that fails during the read hands its keys on to their replicas.
func ExampleExecuteMulti() {
	servers := map[string]store{}
	r, err := router.New(router.Options[store]{
		Connect: func(_ context.Context, n router.Node) (store, error) {
			s := store{}
			servers[n.ID()] = s
			return s, nil
		},
		Replicas: 2,
	})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	ctx := context.Background()
	for i := 1; i <= 4; i++ {
		if err := r.AddNode(ctx, router.Node{Host: fmt.Sprintf("10.0.0.%d", i), Port: 6379}); err != nil {
			panic(err)
		}
	}
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}

	// fn runs on all nodes in parallel: count calls atomically.
	var calls atomic.Int32
	acked, err := router.ExecuteAllMulti(ctx, r, keys, func(_ context.Context, s store, _ router.Node, keys []string) error {
		calls.Add(1) // one "MSET" per node, with every key the node holds
		for _, k := range keys {
			s[k] = "v-" + k
		}
		return nil
	})
	fmt.Println("write:", calls.Load(), "calls, key 0 on", acked[0], "nodes, err", err)

	// user:0's leader fails; its keys move on to their replicas.
	lead, _ := r.Route("user:0")
	calls.Store(0)
	vals, err := router.ExecuteMulti(ctx, r, keys, func(_ context.Context, s store, n router.Node, keys []string, vals []string) error {
		calls.Add(1)
		if n == lead.Node {
			return fmt.Errorf("%s: connection reset", n.ID())
		}
		for j, k := range keys {
			vals[j] = s[k]
		}
		return nil
	})
	fmt.Println("read:", vals[0], vals[99], "err", err, "calls:", calls.Load())
	// Output:
	// write: 4 calls, key 0 on 2 nodes, err <nil>
	// read: v-user:0 v-user:99 err <nil> calls: 7
}
