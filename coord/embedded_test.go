package coord

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/shardwise/shardwise/errcode"
)

func TestEmbeddedConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   EmbeddedConfig
		field string
	}{
		{"no dir", EmbeddedConfig{}, "EmbeddedConfig.DataDir"},
		{"bad name", EmbeddedConfig{DataDir: "d", Name: "a,b"}, "EmbeddedConfig.Name"},
		{"heartbeat too short", EmbeddedConfig{DataDir: "d", Heartbeat: time.Microsecond}, "EmbeddedConfig.Heartbeat"},
		{"election under 5 heartbeats", EmbeddedConfig{DataDir: "d", Heartbeat: 100 * time.Millisecond, Election: 400 * time.Millisecond}, "EmbeddedConfig.Election"},
		{"election too long", EmbeddedConfig{DataDir: "d", Heartbeat: time.Second, Election: time.Minute}, "EmbeddedConfig.Election"},
		{"defaults", EmbeddedConfig{DataDir: "d"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if ce := asType[*errcode.ConfigError](t, err); ce.Field != tc.field {
				t.Fatalf("field %q, want %q (%v)", ce.Field, tc.field, err)
			}
		})
	}
}

func TestClientConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   ClientConfig
		field string
	}{
		{"no endpoints", ClientConfig{}, "ClientConfig.Endpoints"},
		{"blank endpoint", ClientConfig{Endpoints: []string{" "}}, "ClientConfig.Endpoints[0]"},
		{"bad scheme", ClientConfig{Endpoints: []string{"http://a:1", "ftp://b:2"}}, "ClientConfig.Endpoints[1]"},
		{"url without host", ClientConfig{Endpoints: []string{"http://"}}, "ClientConfig.Endpoints[0]"},
		{"prefix without slashes", ClientConfig{Endpoints: []string{"a:1"}, Prefix: "x"}, "ClientConfig.Prefix"},
		{"negative dial timeout", ClientConfig{Endpoints: []string{"a:1"}, DialTimeout: -1}, "ClientConfig.DialTimeout"},
		{"port not a number", ClientConfig{Endpoints: []string{"127.0.0.1:2379x"}}, "ClientConfig.Endpoints[0]"},
		{"port out of range", ClientConfig{Endpoints: []string{"a:1", "a:70000"}}, "ClientConfig.Endpoints[1]"},
		{"no port", ClientConfig{Endpoints: []string{"127.0.0.1"}}, "ClientConfig.Endpoints[0]"},
		{"url port not a number", ClientConfig{Endpoints: []string{"http://127.0.0.1:2379x"}}, "ClientConfig.Endpoints[0]"},
		{"host:port", ClientConfig{Endpoints: []string{"127.0.0.1:2379"}}, ""},
		{"[ipv6]:port", ClientConfig{Endpoints: []string{"[::1]:2379"}}, ""},
		{"url", ClientConfig{Endpoints: []string{"https://etcd.example:2379"}, Prefix: "/x/"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if !errors.Is(err, errcode.ErrConfigInvalid) {
				t.Fatalf("%v is not a config error", err)
			}
			if ce := asType[*errcode.ConfigError](t, err); ce.Field != tc.field {
				t.Fatalf("field %q, want %q (%v)", ce.Field, tc.field, err)
			}
		})
	}
}

func TestConnectToNothingFailsClearly(t *testing.T) {
	// A port that was free a moment ago: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, err = Connect(testCtx(t), ClientConfig{Endpoints: []string{"http://" + addr}, DialTimeout: 300 * time.Millisecond})
	wantCode(t, err, CodeUnavailable)
}

// A one-machine cluster restarted from its data directory keeps its data,
// even though it comes back on other ports.
func TestEmbeddedRestartKeepsData(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	e, err := StartEmbedded(ctx, testEmbeddedConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	c := connect(t, e.Endpoints(), nil)
	register(t, c, RegisterConfig{Name: "zone-a", Role: "zone", TTL: 30 * time.Second})
	if err := c.ApplyRegions(ctx, table(t, 1, "zone-a"), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	e2, err := StartEmbedded(ctx, testEmbeddedConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e2.Close() })
	c2 := connect(t, e2.Endpoints(), nil)
	got, err := c2.Regions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version() != 1 || got.Nodes()[0] != "zone-a" {
		t.Fatalf("after restart: version %d nodes %v", got.Version(), got.Nodes())
	}
}

// Three members, one lost (the leader, the hardest case): writes still
// succeed through the survivors, and what was written before is there.
func TestEmbeddedClusterSurvivesMemberLoss(t *testing.T) {
	ctx := testCtx(t)
	cluster, err := StartEmbeddedCluster(ctx, 3, t.TempDir(), testEmbeddedConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Close() })
	if n := len(cluster.Endpoints()); n != 3 {
		t.Fatalf("%d endpoints, want 3", n)
	}
	c := connect(t, cluster.Endpoints(), nil)
	a := register(t, c, RegisterConfig{Name: "zone-a", Role: "zone", TTL: 10 * time.Second})
	if err := c.ApplyRegions(ctx, table(t, 1, "zone-a"), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}

	var leader *Embedded
	eventually(t, 30*time.Second, "a leader", func() bool {
		for _, m := range cluster.Members() {
			if m.IsLeader() {
				leader = m
				return true
			}
		}
		return false
	})
	lostAt := time.Now()
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}

	// The survivors elect a new leader; until then writes may fail, so
	// retry until the deadline.
	var applyErr error
	eventually(t, 30*time.Second, "a write after losing the leader", func() bool {
		// A request that reaches a member with no leader yet waits for
		// one; bound each attempt so the loop tries again.
		attempt, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		applyErr = c.ApplyRegions(attempt, table(t, 2, "zone-a"), ApplyOptions{})
		return applyErr == nil || errors.Is(applyErr, ErrRegionsConflict)
	})
	t.Logf("write accepted %v after the leader stopped", time.Since(lostAt))
	got, err := c.Regions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version() != 2 {
		t.Fatalf("version %d after the write, want 2 (last apply error: %v)", got.Version(), applyErr)
	}
	b := register(t, c, RegisterConfig{Name: "zone-b", Role: "zone"})
	if b.ID() == a.ID() {
		t.Fatalf("new member got the live member's id %d", a.ID())
	}
	if isClosed(a.Lost()) {
		t.Fatalf("losing one etcd member of three cost a node its lease: %v", a.Err())
	}

	// Each survivor serves the same data on its own.
	for _, m := range cluster.Members() {
		if m == leader {
			continue
		}
		solo := connect(t, m.Endpoints(), nil)
		ms, err := solo.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 2 {
			t.Fatalf("member %s lists %d members, want 2", m.Name(), len(ms))
		}
	}
}
