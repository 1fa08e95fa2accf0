package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/router"
)

// BenchmarkFailoverRealRedis measures, against real redis-server
// processes, the time from a node's death (SIGKILL, process gone) to the
// first successful read served by its replica. Each iteration kills the
// key's leader, reads, then (off the clock) restarts it and waits for it
// to rejoin.
func BenchmarkFailoverRealRedis(b *testing.B) {
	servers := map[string]*testenv.RedisServer{}
	var nodes []router.Node
	for range 3 {
		s := testenv.StartRedis(b)
		n := router.Node{Host: "127.0.0.1", Port: s.Port}
		servers[n.ID()] = s
		nodes = append(nodes, n)
	}
	r, err := newRouter(config{
		Replicas:      2,
		ProbeInterval: time.Hour, // only calls detect the death
		Retry:         &router.Retry{MaxRetries: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := b.Context()
	for _, n := range nodes {
		if err := r.AddNode(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
	const key = "bench:failover"
	b.ReportAllocs()
	b.ResetTimer() // the servers' start-up is not failover
	for i := range b.N {
		b.StopTimer()
		if copies, err := write(ctx, r, key, fmt.Sprint(i), time.Minute); err != nil || copies != 2 {
			b.Fatalf("write: %d copies, %v", copies, err)
		}
		lead, err := r.Route(key)
		if err != nil {
			b.Fatal(err)
		}
		victim := servers[lead.Node.ID()]
		victim.Kill()
		b.StartTimer()
		if v, err := read(ctx, r, key); err != nil || v != fmt.Sprint(i) {
			b.Fatalf("read after kill: %q, %v", v, err)
		}
		b.StopTimer()
		victim.Restart(b)
		deadline := time.Now().Add(20 * time.Second)
		for !live(r, lead.Node) {
			if time.Now().After(deadline) {
				b.Fatal("victim did not rejoin")
			}
			<-time.After(5 * time.Millisecond) // polling interval
		}
		b.StartTimer()
	}
}
