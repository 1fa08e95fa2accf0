package router

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
)

const (
	probeInterval = time.Second
	probeTimeout  = 100 * time.Millisecond
)

// prober is a scripted health check: each probe announces itself on
// started and answers with the next value sent on results, or with its
// context's error when the router cancels it.
type prober struct {
	started  chan Node
	results  chan error
	inFlight atomic.Int32
	maxSeen  atomic.Int32
	calls    atomic.Int32
}

func newProber() *prober {
	return &prober{started: make(chan Node, 16), results: make(chan error)}
}

func (p *prober) Check(ctx context.Context, _ *client, n Node) error {
	p.calls.Add(1)
	cur := p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	for {
		if m := p.maxSeen.Load(); cur <= m || p.maxSeen.CompareAndSwap(m, cur) {
			break
		}
	}
	p.started <- n
	select {
	case err := <-p.results:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func healthOptions(c *cluster, clk clock.Clock, p *prober, threshold int) Options[*client] {
	o := baseOptions(c, clk)
	o.Health = &Health[*client]{Check: p.Check, Interval: probeInterval, Timeout: probeTimeout, FailureThreshold: threshold}
	return o
}

// probe runs one scripted probe of the single node: move time to it, wait
// for it to start, answer it, and wait until the prober is idle again
// (re-armed for the next interval) unless the answer marks the node down.
func probe(t *testing.T, clk *clock.Fake, p *prober, result error) {
	t.Helper()
	waitArmed(t, clk, probeInterval)
	clk.Advance(probeInterval)
	<-p.started
	p.results <- result
}

var errUnhealthy = errors.New("unhealthy")

func TestHealthMarksDownAfterThresholdConsecutiveFailures(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	p := newProber()
	r := newRouter(t, c, healthOptions(c, clk, p, 3))
	n := node(1)
	addNodes(t, r, n)

	probe(t, clk, p, errUnhealthy)
	probe(t, clk, p, errUnhealthy)
	probe(t, clk, p, nil) // a healthy probe resets the count
	probe(t, clk, p, errUnhealthy)
	probe(t, clk, p, errUnhealthy)
	waitArmed(t, clk, probeInterval)
	if !isLive(r, n) {
		t.Fatal("node marked down without 3 consecutive failures")
	}
	probe(t, clk, p, errUnhealthy)
	waitFor(t, "mark-down by probe", func() bool { return !isLive(r, n) })
	if v := metricValue(t, r.metrics.markDowns.WithLabelValues(n.ID(), ReasonProbe)); v != 1 {
		t.Errorf("mark-downs{probe} = %v", v)
	}
	if v := metricValue(t, r.metrics.probeFailures.WithLabelValues(n.ID())); v != 5 {
		t.Errorf("probe failures = %v, want 5", v)
	}
}

func TestHealthProbeTimeoutCancelsContextAndCounts(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	p := newProber()
	r := newRouter(t, c, healthOptions(c, clk, p, 1))
	n := node(1)
	addNodes(t, r, n)

	waitArmed(t, clk, probeInterval)
	clk.Advance(probeInterval)
	<-p.started
	// The probe waits on its context; only the router's timeout ends it.
	waitArmed(t, clk, probeTimeout)
	clk.Advance(probeTimeout)
	waitFor(t, "mark-down after a timed-out probe", func() bool { return !isLive(r, n) })
	waitFor(t, "the probe to see its context end", func() bool { return p.inFlight.Load() == 0 })
}

func TestHealthRejoinedNodeIsProbedAgain(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	p := newProber()
	r := newRouter(t, c, healthOptions(c, clk, p, 1))
	n := node(1)
	addNodes(t, r, n)
	probe(t, clk, p, errUnhealthy)
	waitFor(t, "mark-down", func() bool { return !isLive(r, n) })
	waitArmed(t, clk, 50*time.Millisecond) // the reconnect
	clk.Advance(50 * time.Millisecond)
	waitFor(t, "rejoin", func() bool { return isLive(r, n) })
	probe(t, clk, p, nil)
	waitArmed(t, clk, probeInterval)
	if !isLive(r, n) || p.calls.Load() != 2 {
		t.Fatalf("live = %v, probes = %d", isLive(r, n), p.calls.Load())
	}
}
