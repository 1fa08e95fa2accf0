package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/router"
)

// Many keys through the multi-key calls on three real redis-servers: one
// pipelined write per node puts every key on exactly its two owners, one
// MGET per leader reads them all back, and after one server is SIGKILLed
// the same MGET still returns every value, served by the replicas.
func TestManyKeysOverRealRedis(t *testing.T) {
	servers := []*testenv.RedisServer{testenv.StartRedis(t), testenv.StartRedis(t), testenv.StartRedis(t)}
	r, err := newRouter(config{Replicas: 2, ProbeInterval: time.Hour, CommandTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := t.Context()
	direct := map[router.Node]*redis.Client{}
	for _, s := range servers {
		n := router.Node{Host: "127.0.0.1", Port: s.Port}
		if err := r.AddNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(&redis.Options{Addr: n.ID()})
		defer c.Close()
		direct[n] = c
	}

	values := map[string]string{}
	var keys []string
	for i := range 500 {
		k := fmt.Sprintf("many:%d", i)
		values[k] = fmt.Sprint(i)
		keys = append(keys, k)
	}
	acked, err := writeMany(ctx, r, values, time.Hour)
	if err != nil {
		t.Fatalf("writeMany: %v", err)
	}
	for i, a := range acked {
		if a != 2 {
			t.Fatalf("key %d written to %d nodes, want 2", i, a)
		}
	}
	for _, k := range keys[:50] {
		owners, _ := r.RouteAll(k, 2)
		for n, c := range direct {
			has := c.Exists(ctx, k).Val() == 1
			if want := n.ID() == owners[0].Node.ID() || n.ID() == owners[1].Node.ID(); has != want {
				t.Fatalf("key %s on %s: %v, owner: %v", k, n.ID(), has, want)
			}
		}
	}

	check := func(when string) {
		t.Helper()
		got, ok, err := readMany(ctx, r, append(keys, "many:absent"))
		if err != nil {
			t.Fatalf("%s: readMany: %v", when, err)
		}
		for i, k := range keys {
			if !ok[i] || got[i] != values[k] {
				t.Fatalf("%s: %s = %q (%v), want %q", when, k, got[i], ok[i], values[k])
			}
		}
		if ok[len(keys)] {
			t.Fatalf("%s: an absent key read as present", when)
		}
	}
	check("all up")
	lead, _ := r.Route(keys[0])
	for _, s := range servers {
		if s.Port == lead.Node.Port {
			s.Kill()
		}
	}
	check("after SIGKILL of " + lead.Node.ID())
}
