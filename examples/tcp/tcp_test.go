package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/shardwise/shardwise/router"
)

func TestRunAgainstInProcessServers(t *testing.T) {
	if err := run(t.Context(), "", 200); err != nil {
		t.Fatal(err)
	}
}

// Real sockets: one server dies (listener and connections closed), reads
// keep succeeding from the replicas, and a missing key is an answer that
// marks nothing down.
func TestServerDeathFailsOverOnRawTCP(t *testing.T) {
	var servers []*lineServer
	var nodes []router.Node
	for range 3 {
		s, err := startLineServer("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		servers = append(servers, s)
		nodes = append(nodes, router.Node{Host: "127.0.0.1", Port: s.Addr().Port})
	}
	r, err := newRouter(2, time.Hour) // probes out of the way: calls detect the death
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := t.Context()
	for _, n := range nodes {
		if err := r.AddNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	set := func(ctx context.Context, k, v string) error {
		_, err := r.ExecuteAll(ctx, k, func(ctx context.Context, c *lineClient, _ router.Node) error {
			_, err := c.do(ctx, "SET "+k+" "+v)
			return err
		})
		return err
	}
	get := func(ctx context.Context, k string) (string, error) {
		var got string
		err := r.Execute(ctx, k, func(ctx context.Context, c *lineClient, _ router.Node) error {
			v, err := c.do(ctx, "GET "+k)
			got = v
			return err
		})
		return got, err
	}
	const keys = 500
	for i := range keys {
		if err := set(ctx, fmt.Sprint(i), strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := get(ctx, "absent"); !errors.Is(err, errNotFound) {
		t.Fatalf("GET absent = %v", err)
	}
	if len(r.LiveNodes()) != 3 {
		t.Fatal("a missing key marked a node down")
	}

	servers[0].Close()
	for i := range keys {
		if v, err := get(ctx, fmt.Sprint(i)); err != nil || v != strconv.Itoa(i) {
			t.Fatalf("read %d after a server died: %q, %v", i, v, err)
		}
	}
	for _, n := range r.LiveNodes() {
		if n == nodes[0] {
			t.Fatal("the dead server is still on the ring")
		}
	}
}
