package zonehost_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonehost"
)

// probe GETs a probe path and returns its status and body.
func probe(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestHostProbes: a zone node's metrics address answers /healthz from
// before it joins to its end, and /readyz 503 while it is joining (no
// region table yet), 200 once it holds the table and is about to tick,
// and 503 again once it is fenced (its etcd cut off: the lease lapses).
func TestHostProbes(t *testing.T) {
	e := hostEtcd(t)
	proxy := testenv.StartTCPProxy(t, e.Endpoints()[0])
	prefix := fmt.Sprintf("/hosttest/%d/", time.Now().UnixNano())
	certs := t.TempDir() + "/certs"
	if err := link.WriteClusterCerts(certs, "hosttest", []string{"zone-a"}, time.Now().Add(-time.Hour), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	mod, err := wander.New(wander.Config{Seed: 7, Entities: 4})
	if err != nil {
		t.Fatal(err)
	}
	// OnReady holds the node between its start and its first tick, so the
	// fence is seen while the metrics address still serves.
	release := make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	done := make(chan error, 1)
	go func() {
		done <- zonehost.Host(t.Context(), zonehost.HostConfig{
			Coord: coord.ClientConfig{Endpoints: []string{proxy.Endpoint()}, Prefix: prefix, DialTimeout: time.Second},
			Name:  "zone-a", CertDir: certs, TTL: time.Second, Module: mod, Runtime: zone.Config{Grid: hostGrid()},
			MetricsAddr: "127.0.0.1:0", Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
			OnReady: func(zonehost.HostReady) { <-release },
		})
	}()

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	op, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: e.Endpoints(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	var base string
	testenv.PollUntil(t, 30*time.Second, "zone-a to join and publish its metrics address", func() bool {
		ms, err := op.Members(ctx)
		if err == nil && len(ms) == 1 {
			base = "http://" + ms[0].Addrs["metrics"]
		}
		return base != ""
	})
	if code, body := probe(t, base+"/healthz"); code != http.StatusOK || body != "alive\n" {
		t.Errorf("joining: /healthz %d %q, want 200 alive", code, body)
	}
	// The metrics address is published before the membership is noted as
	// the node's own, so the probe may see either joining step; with no
	// table applied it can see no other answer.
	if code, body := probe(t, base+"/readyz"); code != http.StatusServiceUnavailable ||
		(body != "not ready: joining: not a member yet\n" && body != "not ready: joining: no region table held yet\n") {
		t.Errorf("joining: /readyz %d %q, want 503 joining (not a member yet, or no region table held yet)", code, body)
	}

	grid, err := cells.NewGrid(hostGrid())
	if err != nil {
		t.Fatal(err)
	}
	table, err := cells.Uniform(grid, 1, []string{"zone-a"})
	if err != nil {
		t.Fatal(err)
	}
	applyTable(t, e, prefix, table)
	var body string
	testenv.PollUntil(t, 30*time.Second, "/readyz 200 once the table is held", func() bool {
		var code int
		code, body = probe(t, base+"/readyz")
		return code == http.StatusOK
	})
	if want := "ready: table version 1, 16 of 16 regions\n"; body != want {
		t.Errorf("ready: /readyz body %q, want %q", body, want)
	}

	proxy.Cut()
	testenv.PollUntil(t, 30*time.Second, "/readyz 503 fenced once etcd is cut off", func() bool {
		var code int
		code, body = probe(t, base+"/readyz")
		if code == http.StatusOK {
			return false
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz %d %q", code, body)
		}
		return strings.Contains(body, "not ready: fenced: ")
	})
	t.Logf("fenced: /readyz %q", body)
	if code, _ := probe(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("fenced: /healthz %d, want 200 while the process serves", code)
	}
	close(release)
	released = true
	select {
	case err := <-done:
		if !errors.Is(err, zone.ErrFenced) {
			t.Fatalf("Host = %v, want ErrFenced", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Host did not return after the fence")
	}
}
