package main

import (
	"errors"
	"fmt"
	"sync"
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

// BenchmarkManyKeysRealRedis reads 100 keys spread over 10 real
// redis-servers: with one MGET per node (router.ExecuteMulti) against one
// GET per key through Execute, one after another and all at once. Each op
// is the whole 100-key read.
func BenchmarkManyKeysRealRedis(b *testing.B) {
	r, err := newRouter(config{Replicas: 1, ProbeInterval: time.Hour, CommandTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := b.Context()
	for range 10 {
		s := testenv.StartRedis(b)
		if err := r.AddNode(ctx, router.Node{Host: "127.0.0.1", Port: s.Port}); err != nil {
			b.Fatal(err)
		}
	}
	values := map[string]string{}
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench:many:%d", i)
		values[keys[i]] = fmt.Sprint(i)
	}
	if _, err := writeMany(ctx, r, values, time.Hour); err != nil {
		b.Fatal(err)
	}
	b.Run("mget-per-node", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			got, _, err := readMany(ctx, r, keys)
			if err != nil || got[99] != "99" {
				b.Fatalf("readMany: %v", err)
			}
		}
	})
	b.Run("get-per-key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, k := range keys {
				if _, err := read(ctx, r, k); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("get-per-key-parallel", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var wg sync.WaitGroup
			errs := make([]error, len(keys))
			for i, k := range keys {
				wg.Go(func() { _, errs[i] = read(ctx, r, k) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				b.Fatal(err)
			}
		}
	})
}
