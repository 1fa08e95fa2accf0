package zonehost_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/link/linktest"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonehost"
)

// TestHostServesARotatedLinkCertificate: a node's link presents, to each
// new connection, the certificate on disk at that moment: rotating it
// needs no restart.
func TestHostServesARotatedLinkCertificate(t *testing.T) {
	e := hostEtcd(t)
	prefix := fmt.Sprintf("/hostcerts/%d/", time.Now().UnixNano())
	grid, err := cells.NewGrid(hostGrid())
	if err != nil {
		t.Fatal(err)
	}
	table, err := cells.Uniform(grid, 1, []string{"zone-a"})
	if err != nil {
		t.Fatal(err)
	}
	applyTable(t, e, prefix, table)
	base := t.TempDir()
	dir := filepath.Join(base, "certs")
	ca, err := link.NewCA("hostcerts", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := link.WriteCA(dir, ca, filepath.Join(base, "ca.key")); err != nil {
		t.Fatal(err)
	}
	// zone-b only dials, to see what zone-a presents.
	if err := link.WriteNodeCerts(dir, ca, []string{"zone-a", "zone-b"}, nil, false, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	mod, err := wander.New(wander.Config{Seed: 7, Entities: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	readyc := make(chan zonehost.HostReady, 1)
	done := make(chan error, 1)
	go func() {
		done <- zonehost.Host(ctx, zonehost.HostConfig{
			Coord: coord.ClientConfig{Endpoints: e.Endpoints(), Prefix: prefix},
			Name:  "zone-a", CertDir: dir, Module: mod, Runtime: zone.Config{Grid: hostGrid()},
			// A fake clock that nobody advances: the node stays before its
			// first tick, with its link listening.
			Clock:   clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
			OnReady: func(r zonehost.HostReady) { readyc <- r },
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("host: %v", err)
		}
	}()
	var ready zonehost.HostReady
	select {
	case ready = <-readyc:
	case err := <-done:
		t.Fatalf("host: %v", err)
	}

	presented := func() string {
		t.Helper()
		cert, pool, err := link.LoadIdentity(dir, "zone-b")
		if err != nil {
			t.Fatal(err)
		}
		return linktest.ServedSerial(t, ready.LinkAddr, &tls.Config{
			Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "localhost",
			NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13,
		})
	}
	onDisk := func() string { return linktest.SerialOnDisk(t, dir, "zone-a") }
	before := onDisk()
	if got := presented(); got != before {
		t.Fatalf("presented %s, want %s", got, before)
	}
	if err := link.WriteNodeCerts(dir, ca, []string{"zone-a"}, nil, true, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	after := onDisk()
	if got := presented(); got != after || after == before {
		t.Fatalf("after rotation presented %s, on disk %s (before %s)", got, after, before)
	}
}
