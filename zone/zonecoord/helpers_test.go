package zonecoord

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
)

// sharedEtcd is one embedded etcd for the whole package; tests keep apart
// by key prefix.
var sharedEtcd *coord.Embedded

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "zone-test-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "zone tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A 500ms election lets etcd grant 1s leases, so lease tests are fast.
	e, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{
		DataDir:       dir,
		Heartbeat:     50 * time.Millisecond,
		Election:      500 * time.Millisecond,
		UnsafeNoFsync: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "zone tests: start embedded etcd:", err)
		return 1
	}
	defer e.Close()
	sharedEtcd = e
	return m.Run()
}

var prefixN atomic.Int64

// newClient connects to the shared etcd under prefix, closed at cleanup.
func newClient(t *testing.T, prefix string) *coord.Client {
	t.Helper()
	c, err := coord.Connect(testCtx(t), coord.ClientConfig{
		Endpoints:   sharedEtcd.Endpoints(),
		Prefix:      prefix,
		Logger:      testLogger(t),
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("coord.Connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testPrefix isolates one test run's keys, also across -count repetitions.
func testPrefix(t *testing.T) string {
	return fmt.Sprintf("/zone-test/%s/%d/", strings.ReplaceAll(t.Name(), "/", "_"), prefixN.Add(1))
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// join starts a node on its own coord client, closed at cleanup.
func join(t *testing.T, prefix string, cfg JoinConfig) *Ownership {
	t.Helper()
	if cfg.Coord == nil {
		cfg.Coord = newClient(t, prefix)
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	o, err := Join(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("Join(%q): %v", cfg.Name, err)
	}
	t.Cleanup(func() { _ = o.Close() })
	return o
}

func waitVersion(t *testing.T, o *Ownership, v uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	if err := o.WaitVersion(ctx, v); err != nil {
		t.Fatalf("%s: WaitVersion(%d): %v (holds %d)", o.Name(), v, err, o.Version())
	}
}

func apply(t *testing.T, c *coord.Client, tb *cells.Table) {
	t.Helper()
	if err := c.ApplyRegions(testCtx(t), tb, coord.ApplyOptions{}); err != nil {
		t.Fatalf("ApplyRegions(v%d): %v", tb.Version(), err)
	}
}

func uniform(t *testing.T, version uint64, names ...string) *cells.Table {
	t.Helper()
	tb, err := cells.Uniform(cells.DefaultGrid(), version, names)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := errcode.Of(err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// noZoneGoroutines waits until no goroutine runs code of this package.
func noZoneGoroutines(t *testing.T) {
	t.Helper()
	testenv.PollUntil(t, 10*time.Second, "no goroutine started by an Ownership is left", func() bool {
		stacks := make([]byte, 1<<22)
		stacks = stacks[:runtime.Stack(stacks, true)]
		return !bytes.Contains(stacks, []byte("shardwise/zone/zonecoord.(*Ownership)"))
	})
}
