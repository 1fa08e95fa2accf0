// Package toptest runs, for tests, what "shardwise top" reads: a zone node
// and an economy node, each serving its metrics and publishing their
// address in its member record, over an embedded etcd.
package toptest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonehost"
)

// Cluster is one zone node and one economy node serving metrics.
type Cluster struct {
	// Endpoints is the etcd's client URLs, joined for --endpoints.
	Endpoints string
	cl        *coord.Client
}

// MemberList lists the cluster's live members.
func (c *Cluster) MemberList(ctx context.Context) ([]coord.Member, error) {
	return c.cl.Members(ctx)
}

// StartCluster starts an embedded etcd, a zone node "zone-a" of 16
// wanderers over a 4 × 4 grid it owns alone, and an economy node "econ-a"
// on SQLite that has recorded 5 movements into one scope and settled
// them; it returns once the zone node has ticked and the economy node's
// settle is done. Cleanup stops them.
func StartCluster(t *testing.T) *Cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	e, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{
		DataDir: t.TempDir(), Heartbeat: 50 * time.Millisecond, Election: 500 * time.Millisecond, UnsafeNoFsync: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: e.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	grid := cells.GridConfig{RegionEdge: 2048}
	grid.World.Width, grid.World.Height = 8192, 8192
	grid = grid.WithDefaults()
	g, err := cells.NewGrid(grid)
	if err != nil {
		t.Fatal(err)
	}
	table, err := cells.Uniform(g, 1, []string{"zone-a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ApplyRegions(ctx, table, coord.ApplyOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(t.TempDir(), "certs")
	if err := link.WriteClusterCerts(certs, "toptest", []string{"zone-a"}, time.Now().Add(-time.Hour), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	mod, err := wander.New(wander.Config{Seed: 7, Entities: 16})
	if err != nil {
		t.Fatal(err)
	}

	ticked := make(chan struct{})
	zoneDone := make(chan error, 1)
	go func() {
		first := true
		zoneDone <- zonehost.Host(ctx, zonehost.HostConfig{
			Coord: coord.ClientConfig{Endpoints: e.Endpoints()},
			Name:  "zone-a", CertDir: certs, Module: mod, Runtime: zone.Config{Grid: grid},
			MetricsAddr: "127.0.0.1:0", TTL: 2 * time.Second,
			OnTick: func(zonehost.HostReport) {
				if first {
					first = false
					close(ticked)
				}
			},
		})
	}()

	readyc := make(chan econ.HostReady, 1)
	econDone := make(chan error, 1)
	go func() {
		econDone <- econ.Host(ctx, econ.HostConfig{
			Coord: coord.ClientConfig{Endpoints: e.Endpoints()},
			Name:  "econ-a", StoreURL: "sqlite:///" + filepath.Join(t.TempDir(), "econ.db"),
			MetricsAddr: "127.0.0.1:0", Node: econ.Config{TTL: 2 * time.Second},
			OnReady: func(r econ.HostReady) { readyc <- r },
		})
	}()
	t.Cleanup(func() {
		cancel()
		for _, done := range []chan error{zoneDone, econDone} {
			if err := <-done; err != nil {
				t.Errorf("host: %v", err)
			}
		}
		_ = cl.Close()
		_ = e.Close()
	})

	wait := time.NewTimer(60 * time.Second)
	defer wait.Stop()
	var ready econ.HostReady
	select {
	case ready = <-readyc:
	case err := <-econDone:
		t.Fatalf("econ host: %v", err)
	case <-wait.C:
		t.Fatal("the economy node never got ready")
	}
	for i := range 5 {
		m := netting.Movement{Key: fmt.Sprintf("grant-%d", i), Legs: []ledger.Leg{
			ledger.Debit(ledger.Revenue, 10), ledger.Credit(ledger.Spendable("u1"), 10),
		}}
		// The first calls wait for the node's first view (ECON.NOT_READY
		// after ReadyWait: retried).
		testenv.PollUntil(t, 30*time.Second, "movement "+m.Key+" accepted", func() bool {
			out, err := ready.Node.Record(ctx, "market-1", m)
			return err == nil && out.Status == netting.Accepted
		})
	}
	if _, err := ready.Node.SettleAll(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ticked:
	case err := <-zoneDone:
		t.Fatalf("zone host: %v", err)
	case <-wait.C:
		t.Fatal("the zone node never ticked")
	}
	return &Cluster{Endpoints: strings.Join(e.Endpoints(), ","), cl: cl}
}
