package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
)

// One embedded single-member etcd and one three-member cluster serve the
// whole test binary (set once by TestMain, read-only after); each test works
// under its own key prefix. Tests that break etcd start their own.
var (
	sharedEtcd    *Embedded
	sharedCluster *EmbeddedCluster
)

// onEachEtcd runs f against the single member and against the three-member
// cluster: the same assertions hold for both (on the cluster, requests go
// through followers, reads use ReadIndex, watches are served by any member).
func onEachEtcd(t *testing.T, f func(t *testing.T, endpoints []string)) {
	t.Run("single", func(t *testing.T) { f(t, sharedEtcd.Endpoints()) })
	t.Run("cluster3", func(t *testing.T) { f(t, sharedCluster.Endpoints()) })
}

// testEmbeddedConfig makes etcd's minimum lease TTL 1s (1.5 × 500ms election,
// rounded up) so lease tests are fast.
func testEmbeddedConfig(dir string) EmbeddedConfig {
	return EmbeddedConfig{
		DataDir:       dir,
		Heartbeat:     50 * time.Millisecond,
		Election:      500 * time.Millisecond,
		UnsafeNoFsync: true,
	}
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "coord-test-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "coord tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := StartEmbedded(ctx, testEmbeddedConfig(dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, "coord tests: start embedded etcd:", err)
		return 1
	}
	defer e.Close()
	cluster, err := StartEmbeddedCluster(ctx, 3, dir+"/cluster", testEmbeddedConfig(""))
	if err != nil {
		fmt.Fprintln(os.Stderr, "coord tests: start embedded etcd cluster:", err)
		return 1
	}
	sharedEtcd, sharedCluster = e, cluster
	code := m.Run()
	_ = cluster.Close()
	_ = e.Close()
	if code == 0 {
		if leaked := leakedGoroutines(30 * time.Second); leaked != "" {
			fmt.Fprintln(os.Stderr, "coord tests: goroutines left running after every client, registration and etcd closed:\n"+leaked)
			return 1
		}
	}
	return code
}

// leakedGoroutines waits up to within for every goroutine started by coord
// or by the embedded etcd to end, and returns the stacks of those that did
// not. Tests close what they open (t.Cleanup), so anything left is a
// goroutine some Close failed to join.
func leakedGoroutines(within time.Duration) string {
	suspects := []string{"shardwise/coord.(*", "go.etcd.io/etcd/server/"}
	deadline := time.Now().Add(within)
	for {
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			for _, s := range suspects {
				if strings.Contains(g, s) {
					leaked = append(leaked, g)
					break
				}
			}
		}
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		runtime.Gosched()
		<-time.After(20 * time.Millisecond) // polling pace, not synchronisation
	}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testPrefix isolates a test's keys in the shared etcd, also across
// -count repetitions: all clients of one test run share one prefix, and the
// next run of the same test gets another.
func testPrefix(t *testing.T) string {
	prefixes.mu.Lock()
	defer prefixes.mu.Unlock()
	if p, ok := prefixes.byTest[t]; ok {
		return p
	}
	prefixes.n++
	p := fmt.Sprintf("/test/%s/%d/", strings.ReplaceAll(t.Name(), "/", "_"), prefixes.n)
	prefixes.byTest[t] = p
	t.Cleanup(func() {
		prefixes.mu.Lock()
		defer prefixes.mu.Unlock()
		delete(prefixes.byTest, t)
	})
	return p
}

var prefixes = struct {
	mu     sync.Mutex
	n      int
	byTest map[*testing.T]string
}{byTest: make(map[*testing.T]string)}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// connect opens a client on endpoints under the test's prefix, closed at
// cleanup.
func connect(t *testing.T, endpoints []string, c clock.Clock) *Client {
	t.Helper()
	cli, err := Connect(testCtx(t), ClientConfig{
		Endpoints:   endpoints,
		Prefix:      testPrefix(t),
		Logger:      testLogger(t),
		Clock:       c,
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("Connect(%v): %v", endpoints, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func register(t *testing.T, c *Client, cfg RegisterConfig) *Registration {
	t.Helper()
	r, err := c.Register(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("Register(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// eventually polls cond every few milliseconds until it holds or the
// deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		<-tick.C
	}
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

// table builds a default-grid table at version with the regions split
// evenly over names.
func table(t *testing.T, version uint64, names ...string) *cells.Table {
	t.Helper()
	tb, err := cells.Uniform(cells.DefaultGrid(), version, names)
	if err != nil {
		t.Fatalf("cells.Uniform(%d, %v): %v", version, names, err)
	}
	return tb
}

func asType[T error](t *testing.T, err error) T {
	t.Helper()
	var target T
	if !errors.As(err, &target) {
		t.Fatalf("error %v (%T) is not a %T", err, err, target)
	}
	return target
}
