package link_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/link"
)

func TestCloseJoinsEveryGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	c := newCluster(t, clusterOpts{}, "a", "b", "c")
	for _, n := range c.nodes {
		n.Handle(kindEcho, func(ctx context.Context, from string, p []byte) ([]byte, error) { return p, nil })
	}
	ctx := ctxTimeout(t, 10*time.Second)
	for _, from := range []string{"a", "b", "c"} {
		for _, to := range []string{"a", "b", "c"} {
			if from == to {
				continue
			}
			if _, err := c.nodes[from].Call(ctx, to, kindEcho, []byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := c.nodes[from].Replicate(to, []link.Entry{{Entity: 1}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One peer mid-reconnect and one removed, to cover those paths too.
	c.net.Cut("a", "b")
	if err := c.nodes["c"].RemovePeer("a"); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes["c"].RemovePeer("a"); !errors.Is(err, link.ErrUnknownPeer) {
		t.Fatalf("second RemovePeer: %v", err)
	}
	for _, n := range c.nodes {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		if err := n.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
	if err := c.nodes["a"].Send(ctx, "c", kindEcho, nil); !errors.Is(err, link.ErrClosed) || errcode.Of(err) != link.CodeClosed {
		t.Fatalf("Send after Close: %v, want ErrClosed", err)
	}
	testenv.PollUntil(t, 10*time.Second, "goroutines to return to the baseline", func() bool {
		return runtime.NumGoroutine() <= before
	})
}

func TestPendingCallFailsWithClosedOnRemovePeer(t *testing.T) {
	c := newCluster(t, clusterOpts{noPeers: true}, "a", "b")
	c.net.Cut("a", "b")
	c.peer("a", "b")
	errc := make(chan error, 1)
	go func() {
		_, err := c.nodes["a"].Call(context.Background(), "b", kindEcho, nil)
		errc <- err
	}()
	testenv.PollUntil(t, 10*time.Second, "the call to be queued", func() bool {
		return c.nodes["a"].Metrics().QueueDepth("b", link.StreamControl) == 1
	})
	if err := c.nodes["a"].RemovePeer("b"); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, link.ErrClosed) {
		t.Fatalf("call on removed peer: %v, want ErrClosed", err)
	}
}

// The reconnect schedule runs on the injected clock: after a cut and a
// heal nothing reconnects until the clock moves past the backoff.
func TestReconnectWaitsForBackoffOnClock(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	c := newCluster(t, clusterOpts{clock: fake, tweak: func(cfg *link.Config) {
		cfg.BackoffMin = time.Second
		cfg.BackoffMax = 10 * time.Second
	}}, "a", "b")
	c.waitConnected("a", "b")
	c.waitConnected("b", "a")
	c.net.Cut("a", "b")
	ctx := ctxTimeout(t, 10*time.Second)
	// Both directions are now waiting out their backoff on the fake clock.
	if err := fake.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	c.net.Heal("a", "b")
	if c.nodes["a"].Connected("b") || c.nodes["b"].Connected("a") {
		t.Fatal("reconnected before the backoff elapsed")
	}
	fake.Advance(time.Second) // the first backoff is in [BackoffMin/2, BackoffMin]
	c.waitConnected("a", "b")
	c.waitConnected("b", "a")
	if got := c.nodes["a"].Metrics().Reconnects("b"); got != 1 {
		t.Fatalf("reconnects %v, want 1", got)
	}
}

func TestConfigValidate(t *testing.T) {
	ca := newCA(t)
	good := nodeConfig(t, ca, "a")
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		field string
		mut   func(*link.Config)
	}{
		{"Certificate", func(c *link.Config) { c.Certificate.Certificate = nil }},
		{"ClusterCA", func(c *link.Config) { c.ClusterCA = nil }},
		{"ReplicationQueue", func(c *link.Config) { c.ReplicationQueue = -1 }},
		{"ControlQueue", func(c *link.Config) { c.ControlQueue = -1 }},
		{"BackoffMin", func(c *link.Config) { c.BackoffMin = -1 }},
		{"BackoffMax", func(c *link.Config) { c.BackoffMin, c.BackoffMax = time.Second, time.Millisecond }},
		{"ConnectTimeout", func(c *link.Config) { c.ConnectTimeout = -1 }},
		{"AckTimeout", func(c *link.Config) { c.AckTimeout = -1 }},
		{"KeepaliveInterval", func(c *link.Config) { c.KeepaliveInterval = -1 }},
		{"KeepaliveInterval", func(c *link.Config) { c.KeepaliveInterval = time.Second }},
		{"ReplicationQueue", func(c *link.Config) { c.ReplicationQueue = 1<<20 + 1 }},
		{"ControlQueue", func(c *link.Config) { c.ControlQueue = 1<<20 + 1 }},
		{"MaxFrameBytes", func(c *link.Config) { c.MaxFrameBytes = -1 }},
	}
	for _, tc := range cases {
		cfg := good
		tc.mut(&cfg)
		err := cfg.Validate()
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, errcode.ErrConfigInvalid) {
			t.Errorf("%s: got %v", tc.field, err)
		} else if ce.Value == nil {
			t.Errorf("%s: error %q does not name the value", tc.field, err)
		}
		if _, err := link.New(cfg); !errors.Is(err, errcode.ErrConfigInvalid) {
			t.Errorf("%s: New accepted an invalid config: %v", tc.field, err)
		}
	}
}

// Accepting a frame acknowledges it before its handler runs, so a handler
// slower than AckTimeout does not make the sender drop the connection.
func TestSlowHandlerDoesNotTripAckWatchdog(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	c := newCluster(t, clusterOpts{clock: fake, noPeers: true, tweak: func(cfg *link.Config) { cfg.AckTimeout = time.Second }}, "a", "b")
	entered := make(chan struct{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseAll) // registered after the nodes' Close, so it runs first
	c.nodes["b"].Handle(kindEcho, func(ctx context.Context, from string, p []byte) ([]byte, error) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return p, nil
	})
	c.peer("a", "b")
	c.waitConnected("a", "b")
	errc := make(chan error, 1)
	go func() {
		_, err := c.nodes["a"].Call(ctxTimeout(t, 30*time.Second), "b", kindEcho, []byte("slow"))
		errc <- err
	}()
	<-entered
	// The watchdog armed for the request is stopped by b's ack, which
	// must come while the handler is still running.
	testenv.PollUntil(t, 10*time.Second, "the ack to stop the watchdog", func() bool { return fake.Waiters() == 0 })
	fake.Advance(10 * time.Second)
	releaseAll()
	if err := <-errc; err != nil {
		t.Fatalf("slow call: %v", err)
	}
	if r := c.nodes["a"].Metrics().Reconnects("b"); r != 0 {
		t.Fatalf("%v reconnects during a slow handler", r)
	}
}
