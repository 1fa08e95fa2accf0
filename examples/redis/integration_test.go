package main

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/router"
)

// Three real redis-server processes, 10,000 keys written with replicas=2,
// one server SIGKILLed in the middle of the reads. Claims checked:
//
//  1. reads keep succeeding, with zero errors visible to the caller;
//  2. the dead node leaves the ring, and with no traffic at all it leaves
//     through the health checks after FailureThreshold failed probes;
//  3. restarted, it rejoins with its original weight and every key is
//     placed where it was before.
//
// The servers are started and stopped by the test (testenv); nothing is
// left running.
func TestThreeRedisServersSurviveSIGKILL(t *testing.T) {
	servers := []*testenv.RedisServer{testenv.StartRedis(t), testenv.StartRedis(t), testenv.StartRedis(t)}
	nodes := []router.Node{
		{Host: "127.0.0.1", Port: servers[0].Port},
		{Host: "127.0.0.1", Port: servers[1].Port},
		{Host: "127.0.0.1", Port: servers[2].Port, Vnodes: 200}, // the bigger box
	}
	victim, victimNode := servers[2], nodes[2]

	const threshold = 2
	// Timeouts are generous: CI runs every package under -race on two
	// shared cores, and a healthy node whose PING is slow there must not be
	// marked down (with the victim dead, that would leave a key with no
	// replica). A SIGKILLed server refuses connections at once, so long
	// timeouts do not slow the detection this test is about.
	r, err := newRouter(config{
		Replicas:         2,
		ProbeInterval:    50 * time.Millisecond,
		ProbeTimeout:     5 * time.Second,
		FailureThreshold: threshold,
		Retry:            &router.Retry{MaxRetries: 3, BaseDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond},
		CommandTimeout:   5 * time.Second,
		Logger:           slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.Collectors()...)

	ctx := t.Context()
	for _, n := range nodes {
		if err := r.AddNode(ctx, n); err != nil {
			t.Fatalf("AddNode(%s): %v", n.ID(), err)
		}
	}

	const keys = 10_000
	key := func(i int) string { return fmt.Sprintf("it:%d", i) }
	leaders := make([]string, keys)
	for i := range keys {
		copies, err := write(ctx, r, key(i), fmt.Sprint(i), time.Hour)
		if err != nil || copies != 2 {
			t.Fatalf("write %s: %d copies, %v", key(i), copies, err)
		}
		rt, err := r.Route(key(i))
		if err != nil {
			t.Fatal(err)
		}
		leaders[i] = rt.Node.ID()
	}
	led := 0
	for _, l := range leaders {
		if l == victimNode.ID() {
			led++
		}
	}
	t.Logf("weighted node %s (200 vnodes of 400) leads %d of %d keys", victimNode.ID(), led, keys)
	if led < keys*4/10 || led > keys*6/10 {
		t.Errorf("weighted node leads %d keys, want about half", led)
	}

	// Claim 1: SIGKILL in the middle of the reads; no read fails.
	killAt := keys / 3
	var failoverLatency time.Duration
	callerErrors := 0
	for i := range keys {
		if i == killAt {
			victim.Kill()
			died := time.Now()
			// The first read of a key the dead node leads: from the
			// death to the first success served by its replica.
			j := slices.Index(leaders[i:], victimNode.ID()) + i
			if v, err := read(ctx, r, key(j)); err != nil || v != fmt.Sprint(j) {
				t.Fatalf("first read after the kill: %q, %v", v, err)
			}
			failoverLatency = time.Since(died)
		}
		v, err := read(ctx, r, key(i))
		if err != nil || v != fmt.Sprint(i) {
			callerErrors++
			if callerErrors <= 5 {
				t.Errorf("read %s = %q, %v", key(i), v, err)
			}
		}
	}
	if callerErrors != 0 {
		t.Fatalf("%d reads failed for the caller", callerErrors)
	}
	t.Logf("failover latency (SIGKILL → first success served by the replica): %s", failoverLatency)
	if live(r, victimNode) {
		t.Fatal("the killed node is still on the ring")
	}

	// Claim 3: restart; it rejoins with its weight and original placement.
	victim.Restart(t)
	waitFor(t, "rejoin after restart", func() bool { return live(r, victimNode) })
	assertWeightAndPlacement(t, r, victimNode, leaders, key)

	// Claim 2: kill with no traffic at all: only the health checks can
	// notice, after `threshold` consecutive failed probes.
	probeMarkDowns := counter(t, reg, "shardwise_router_mark_downs_total", victimNode.ID(), router.ReasonProbe)
	failuresBefore := counter(t, reg, "shardwise_router_probe_failures_total", victimNode.ID(), "")
	victim.Kill()
	died := time.Now()
	waitFor(t, "mark-down by health checks", func() bool { return !live(r, victimNode) })
	t.Logf("health-check detection (SIGKILL → off the ring, no traffic): %s", time.Since(died))
	if got := counter(t, reg, "shardwise_router_mark_downs_total", victimNode.ID(), router.ReasonProbe); got != probeMarkDowns+1 {
		t.Fatalf("probe mark-downs %v → %v, want one more", probeMarkDowns, got)
	}
	if got := counter(t, reg, "shardwise_router_probe_failures_total", victimNode.ID(), ""); got < failuresBefore+threshold {
		t.Fatalf("probe failures %v → %v, want at least %d more", failuresBefore, got, threshold)
	}
	victim.Restart(t)
	waitFor(t, "second rejoin", func() bool { return live(r, victimNode) })
	assertWeightAndPlacement(t, r, victimNode, leaders, key)
}

func assertWeightAndPlacement(t *testing.T, r *router.Router[*redis.Client], n router.Node, leaders []string, key func(int) string) {
	t.Helper()
	for _, l := range r.LiveNodes() {
		if l.ID() == n.ID() && l.Vnodes != n.Vnodes {
			t.Fatalf("%s rejoined with %d vnodes, want %d", n.ID(), l.Vnodes, n.Vnodes)
		}
	}
	moved := 0
	for i, want := range leaders {
		if rt, err := r.Route(key(i)); err != nil || rt.Node.ID() != want {
			moved++
		}
	}
	if moved != 0 {
		t.Fatalf("%d keys placed differently after the rejoin", moved)
	}
}

func live(r *router.Router[*redis.Client], n router.Node) bool {
	for _, l := range r.LiveNodes() {
		if l.ID() == n.ID() {
			return true
		}
	}
	return false
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-poll.C:
		}
	}
}

// counter reads one series of a counter family from reg: the one whose
// node label is node and, when reason is set, whose reason label is reason.
func counter(t *testing.T, reg *prometheus.Registry, name, node, reason string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if (l.GetName() == "node" && l.GetValue() != node) || (l.GetName() == "reason" && reason != "" && l.GetValue() != reason) {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
