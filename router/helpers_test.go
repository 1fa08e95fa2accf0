package router

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
)

// client is the fake client the tests route to. Each connect makes a new
// one, so a test can tell a reconnected node's client from its old one.
type client struct {
	node Node
	gen  int // 1 for the first connect of a node, 2 for the next, …
}

// cluster is a fake set of servers: it counts connects and disconnects per
// node, can refuse connects, and knows which clients are still open.
type cluster struct {
	mu          sync.Mutex
	refuse      map[string]int // node id → connects still to refuse (-1: forever)
	connects    map[string]int
	disconnects map[string]int
	open        map[*client]bool
	// gate, when set, is called inside Connect before it answers.
	gate func(ctx context.Context, n Node) error
}

func newCluster() *cluster {
	return &cluster{
		refuse:      map[string]int{},
		connects:    map[string]int{},
		disconnects: map[string]int{},
		open:        map[*client]bool{},
	}
}

var errRefused = errors.New("connection refused")

func (c *cluster) Connect(ctx context.Context, n Node) (*client, error) {
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		if err := gate(ctx, n); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := n.ID()
	c.connects[id]++
	if left := c.refuse[id]; left != 0 {
		if left > 0 {
			c.refuse[id] = left - 1
		}
		return nil, fmt.Errorf("%s: %w", id, errRefused)
	}
	cl := &client{node: n, gen: c.connects[id]}
	c.open[cl] = true
	return cl, nil
}

func (c *cluster) Disconnect(cl *client, n Node) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.open[cl] {
		return fmt.Errorf("client of %s closed twice or never opened", n.ID())
	}
	delete(c.open, cl)
	c.disconnects[n.ID()]++
	return nil
}

func (c *cluster) setRefuse(id string, n int) {
	c.mu.Lock()
	c.refuse[id] = n
	c.mu.Unlock()
}

func (c *cluster) connectCount(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connects[id]
}

func (c *cluster) openCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open)
}

func (c *cluster) setGate(g func(ctx context.Context, n Node) error) {
	c.mu.Lock()
	c.gate = g
	c.mu.Unlock()
}

// zeroSource makes every jitter draw 0, so delays are exactly
// nominal − nominal/2 and tests can compute them.
type zeroSource struct{}

func (zeroSource) Uint64() uint64 { return 0 }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func node(i int) Node { return Node{Host: "10.0.0." + fmt.Sprint(i), Port: 6379} }

// baseOptions is a router over c with a fake clock and deterministic
// jitter.
func baseOptions(c *cluster, clk clock.Clock) Options[*client] {
	return Options[*client]{
		Connect:    c.Connect,
		Disconnect: c.Disconnect,
		Clock:      clk,
		Rand:       zeroSource{},
		Retry:      &Retry{MaxRetries: 2, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second},
	}
}

// newRouter builds a router and closes it at the end of the test, checking
// that Close succeeds and every client is closed.
func newRouter(t *testing.T, c *cluster, opts Options[*client]) *Router[*client] {
	t.Helper()
	r, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if n := c.openCount(); n != 0 {
			t.Errorf("%d clients still open after Close", n)
		}
	})
	return r
}

func addNodes(t *testing.T, r *Router[*client], nodes ...Node) {
	t.Helper()
	for _, n := range nodes {
		if err := r.AddNode(t.Context(), n); err != nil {
			t.Fatalf("AddNode(%s): %v", n.ID(), err)
		}
	}
}

func isLive(r *Router[*client], n Node) bool {
	for _, l := range r.LiveNodes() {
		if l.ID() == n.ID() {
			return true
		}
	}
	return false
}

// waitFor polls cond until it holds or a deadline passes. It is for state
// that changes on a router goroutine after an event the test caused.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-poll.C:
		}
	}
}

// blockUntil waits until the fake clock has n armed timers.
func blockUntil(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(ctx, n); err != nil {
		t.Fatalf("waiting for %d timers (have %d): %v", n, clk.Waiters(), err)
	}
}

// logRecorder is a slog handler that keeps every record's message and
// attributes, for tests of the router's log events.
type logRecorder struct {
	mu      sync.Mutex
	records []logRecord
}

type logRecord struct {
	msg   string
	attrs map[string]string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, rec)
	h.mu.Unlock()
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

func (h *logRecorder) count(msg, node string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r.msg == msg && (node == "" || r.attrs["node"] == node) {
			n++
		}
	}
	return n
}

// waitArmed waits until the earliest armed timer of clk is exactly d from
// now and is the only one armed: the state in which exactly one loop of the
// router is waiting d on the clock.
func waitArmed(t *testing.T, clk *clock.Fake, d time.Duration) {
	t.Helper()
	waitFor(t, fmt.Sprintf("one timer armed for %s", d), func() bool {
		next, ok := clk.NextDeadline()
		return ok && clk.Waiters() == 1 && next.Sub(clk.Now()) == d
	})
}

// metricValue reads a counter or gauge.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	switch {
	case out.Counter != nil:
		return out.Counter.GetValue()
	case out.Gauge != nil:
		return out.Gauge.GetValue()
	}
	t.Fatalf("metric %v is neither a counter nor a gauge", m.Desc())
	return 0
}
