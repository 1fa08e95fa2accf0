package router_test

import (
	"context"
	"fmt"

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
