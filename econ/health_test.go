package econ

import (
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/internal/testenv"
)

// TestHostProbes: an economy node's metrics address answers /healthz
// throughout, and /readyz 200 only while its view is ready: 503 while a
// member that joined has not adopted the view (as while the node itself
// joins), 200 again once the view re-formed without it, 503 once the
// node is fenced (its lease revoked).
func TestHostProbes(t *testing.T) {
	prefix := testPrefix(t)
	ctx := testCtx(t)
	readyCh := make(chan HostReady, 1)
	release := make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	done := make(chan error, 1)
	go func() {
		done <- Host(ctx, HostConfig{
			Coord:    coord.ClientConfig{Endpoints: sharedEtcd.Endpoints(), Prefix: prefix, DialTimeout: 5 * time.Second},
			Name:     "econ-h",
			StoreURL: "sqlite://" + filepath.Join(t.TempDir(), "econ.db"),
			// OnReady holds the node before it watches for its fence, so
			// the fence is seen while the metrics address still serves.
			MetricsAddr: "127.0.0.1:0", Node: Config{TTL: time.Second, ReadyWait: 200 * time.Millisecond},
			Logger:  testLogger(t),
			OnReady: func(r HostReady) { readyCh <- r; <-release },
		})
	}()
	var r HostReady
	select {
	case r = <-readyCh:
	case err := <-done:
		t.Fatalf("Host: %v", err)
	}
	base := "http://" + r.MetricsAddr
	get := func(path string) (int, string) {
		t.Helper()
		c := http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitProbe := func(what string, code int, body string) {
		t.Helper()
		var gc int
		var gb string
		testenv.PollUntil(t, 20*time.Second, what, func() bool {
			gc, gb = get("/readyz")
			return gc == code && strings.Contains(gb, body)
		})
	}
	waitProbe("ready alone", http.StatusOK, "ready: view [econ-h] ready")
	if code, body := get("/healthz"); code != http.StatusOK || body != "alive\n" {
		t.Errorf("/healthz %d %q", code, body)
	}

	stuck, err := newCoord(t, prefix).Register(ctx, coord.RegisterConfig{Name: "econ-stuck", Role: Role, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitProbe("not ready while a member has not adopted the view", http.StatusServiceUnavailable,
		"not ready: joining: view [econ-h econ-stuck] not ready")
	if err := stuck.Close(); err != nil {
		t.Fatal(err)
	}
	waitProbe("ready again without it", http.StatusOK, "ready: view [econ-h] ready")

	cli, err := clientv3.New(clientv3.Config{Endpoints: sharedEtcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(r.Node.Registration().LeaseID())); err != nil {
		t.Fatal(err)
	}
	waitProbe("not ready once fenced", http.StatusServiceUnavailable, "not ready: fenced: ")
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("fenced: /healthz %d, want 200 while the process serves", code)
	}
	close(release)
	released = true
	select {
	case err := <-done:
		if !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("Host = %v, want ErrLeaseLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Host did not return after the fence")
	}
}
