package econ_test

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/link/linktest"
)

// TestHostServesARotatedCertificate: an economy node with --certs serves
// mutual TLS, and a certificate rotated on disk is served from the next
// connection on, without restarting the node; callers with a rotated
// certificate of their own still get in.
func TestHostServesARotatedCertificate(t *testing.T) {
	ctx := t.Context()
	e, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{
		DataDir: t.TempDir(), Heartbeat: 50 * time.Millisecond, Election: 500 * time.Millisecond, UnsafeNoFsync: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	base := t.TempDir()
	dir := filepath.Join(base, "certs")
	ca, err := link.NewCA("test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := link.WriteCA(dir, ca, filepath.Join(base, "ca.key")); err != nil {
		t.Fatal(err)
	}
	if err := link.WriteNodeCerts(dir, ca, []string{"econ-a", "zone-a"}, nil, false, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}

	readyc := make(chan econ.HostReady, 1)
	done := make(chan error, 1)
	hostCtx, stop := context.WithCancel(ctx)
	go func() {
		done <- econ.Host(hostCtx, econ.HostConfig{
			Coord: coord.ClientConfig{Endpoints: e.Endpoints()},
			Name:  "econ-a", StoreURL: "sqlite:///" + filepath.Join(base, "econ.db"),
			CertDir: dir, Node: econ.Config{TTL: 2 * time.Second},
			OnReady: func(r econ.HostReady) { readyc <- r },
		})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("host: %v", err)
		}
	}()
	var ready econ.HostReady
	select {
	case ready = <-readyc:
	case err := <-done:
		t.Fatalf("host: %v", err)
	}

	members, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: e.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer members.Close()
	health := func() {
		t.Helper()
		cfg, err := econ.ClientTLS(dir, "zone-a")
		if err != nil {
			t.Fatal(err)
		}
		c, err := econ.NewClient(ctx, econ.ClientConfig{Members: members, TLS: cfg})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Health(ctx, "econ-a"); err != nil {
			t.Fatalf("health over mutual TLS: %v", err)
		}
	}
	// served is the serial of the certificate the node presents to a new
	// connection.
	served := func() string {
		t.Helper()
		cert, pool, err := link.LoadIdentity(dir, "zone-a")
		if err != nil {
			t.Fatal(err)
		}
		return linktest.ServedSerial(t, ready.Addr, &tls.Config{
			Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "localhost",
			NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13,
		})
	}
	onDisk := func(id string) string { return linktest.SerialOnDisk(t, dir, id) }

	health()
	before := onDisk("econ-a")
	if got := served(); got != before {
		t.Fatalf("served %s, want %s", got, before)
	}
	if err := link.WriteNodeCerts(dir, ca, []string{"econ-a", "zone-a"}, nil, true, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	after := onDisk("econ-a")
	if got := served(); got != after || after == before {
		t.Fatalf("after rotation served %s, on disk %s (before %s)", got, after, before)
	}
	health()
}
