package econ

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
	"github.com/shardwise/shardwise/netting/sqlstore/sqlitetest"
)

// This file is the package's shared test set-up: one embedded etcd for the
// whole run (TestMain), a key prefix per test, SQLite stores in temporary
// directories, and nodes closed at cleanup. Every econ test uses it.

var sharedEtcd *coord.Embedded

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "econ-test-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "econ tests:", err)
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
		fmt.Fprintln(os.Stderr, "econ tests: start embedded etcd:", err)
		return 1
	}
	defer e.Close()
	sharedEtcd = e
	return m.Run()
}

var prefixN atomic.Int64

// testPrefix isolates one test's keys, also across -count repetitions.
func testPrefix(t testing.TB) string {
	return fmt.Sprintf("/econ-test/%s/%d/", strings.ReplaceAll(t.Name(), "/", "_"), prefixN.Add(1))
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// newCoord connects to the shared etcd under prefix, closed at cleanup.
func newCoord(t testing.TB, prefix string) *coord.Client {
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

// newSQLite opens a SQLite store in a temporary directory, closed at
// cleanup, and returns it with its file's path: a copy of a migrated file
// (sqlitetest), as a fresh one would be after its migrations.
func newSQLite(t testing.TB) (*sqlstore.Store, string) {
	t.Helper()
	return sqlitetest.Open(t, "econ.db")
}

// startNode starts a node named name on its own coord client under prefix;
// cfg's Name, Coord and Store are filled in. Closed at cleanup.
func startNode(t testing.TB, prefix, name string, store netting.SharedStore, cfg Config) *Node {
	t.Helper()
	cfg.Name = name
	cfg.Store = store
	if cfg.Coord == nil {
		cfg.Coord = newCoord(t, prefix)
	}
	if cfg.TTL == 0 {
		cfg.TTL = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	n, err := Start(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("Start(%s): %v", name, err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// waitView polls until every node is ready with exactly the view names.
func waitView(t testing.TB, names []string, nodes ...*Node) {
	t.Helper()
	want := strings.Join(names, ",")
	testenv.PollUntil(t, 20*time.Second, "economy nodes ready with view "+want, func() bool {
		for _, n := range nodes {
			st := n.Status()
			if !st.Ready || strings.Join(st.View, ",") != want {
				return false
			}
		}
		return true
	})
}

func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if got := errcode.Of(err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
}

// recordRouted records m under scope starting at the node named first,
// following misroutes and retrying ECON.NOT_READY and closed nodes with the
// same key, as a caller does: a caller whose view is behind (a misroute to
// a node that just left) backs off a little and asks again, for up to 10s.
// pick returns the named node if it is live, else any live node.
func recordRouted(ctx context.Context, pick func(name string) *Node, first, scope string, m netting.Movement) (netting.Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	at, hops := first, 0
	for {
		n := pick(at)
		if n == nil {
			return netting.Outcome{}, fmt.Errorf("no live node for %q", at)
		}
		out, err := n.Record(ctx, scope, m)
		var mis *netting.MisroutedError
		switch {
		case err == nil:
			return out, nil
		case errors.As(err, &mis) && hops < 3 && pick(mis.Owner) != nil && pick(mis.Owner).Name() == mis.Owner:
			at, hops = mis.Owner, hops+1
			continue
		case errors.As(err, &mis), errors.Is(err, ErrNotReady), errors.Is(err, ErrClosed):
			// The views are moving: back off and ask again.
			hops = 0
		default:
			return out, err
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, fmt.Errorf("gave up: %w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}
