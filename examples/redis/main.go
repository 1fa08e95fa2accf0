package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"time"
)

func main() {
	nodesFlag := flag.String("nodes", "127.0.0.1:6379", "comma-separated host:port[=vnodes] of the Redis servers")
	replicas := flag.Int("replicas", 2, "copies of each key, leader included")
	keys := flag.Int("keys", 1000, "keys to write and read back")
	ttl := flag.Duration("ttl", 10*time.Minute, "expiry of the keys written")
	flag.Parse()
	if err := run(*nodesFlag, *replicas, *keys, *ttl); err != nil {
		fmt.Fprintln(os.Stderr, "redis example:", err)
		os.Exit(1)
	}
}

func run(nodeSpec string, replicas, keys int, ttl time.Duration) error {
	nodes, err := parseNodes(nodeSpec)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r, err := newRouter(config{Replicas: replicas, Logger: logger})
	if err != nil {
		return err
	}
	defer r.Close()
	for _, n := range nodes {
		if err := r.AddNode(ctx, n); err != nil {
			return err
		}
	}

	perNode := map[string]int{}
	for i := range keys {
		key := fmt.Sprintf("shardwise:example:%d", i)
		copies, err := write(ctx, r, key, fmt.Sprint(i), ttl)
		if err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		if copies < min(replicas, len(r.LiveNodes())) {
			logger.Warn("write reached fewer replicas than asked", "key", key, "copies", copies)
		}
		if rt, err := r.Route(key); err == nil {
			perNode[rt.Node.ID()]++
		}
	}
	for i := range keys {
		key := fmt.Sprintf("shardwise:example:%d", i)
		if v, err := read(ctx, r, key); err != nil || v != fmt.Sprint(i) {
			return fmt.Errorf("read %s = %q, %v", key, v, err)
		}
	}
	fmt.Printf("wrote and read back %d keys with %d replicas\n", keys, replicas)

	// The same number of keys again, batched: one pipelined write and one
	// MGET per node instead of one round trip per key.
	values := make(map[string]string, keys)
	batch := make([]string, 0, keys)
	for i := range keys {
		key := fmt.Sprintf("shardwise:example:batch:%d", i)
		values[key] = fmt.Sprint(i)
		batch = append(batch, key)
	}
	if _, err := writeMany(ctx, r, values, ttl); err != nil {
		return fmt.Errorf("batched write: %w", err)
	}
	got, found, err := readMany(ctx, r, batch)
	if err != nil {
		return fmt.Errorf("batched read: %w", err)
	}
	for i, key := range batch {
		if !found[i] || got[i] != values[key] {
			return fmt.Errorf("batched read %s = %q (found %v)", key, got[i], found[i])
		}
	}
	fmt.Printf("and %d more with one pipelined write and one MGET per node\n", keys)
	for _, n := range r.LiveNodes() {
		fmt.Printf("  %-22s vnodes %4d  leads %5d keys\n", n.ID(), n.Vnodes, perNode[n.ID()])
	}
	return nil
}
