package zonehost_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonehost"
)

// TestHostsFailOver: three zone nodes as hosts, each campaigning to be the
// failover controller; one is cut off from etcd (as if dead: its lease
// expires and it stops, fenced). With no operator action the table's next
// version gives its regions to their standbys, and the two survivors own
// and simulate the whole world, ticking on. (The entities that stood in
// its regions are lost: their new owner starts those regions empty.)
func TestHostsFailOver(t *testing.T) {
	// The lease TTL: the cut-off node is fenced within it, and a live node
	// is fenced too if it renews nothing for that long. At 1 s a loaded
	// machine (load 18 on 2 cores, -race) starved live nodes that long in
	// one run of six; see the commit that set it.
	const ttl = 3 * time.Second
	e := hostEtcd(t)
	prefix := fmt.Sprintf("/failovertest/%d/", time.Now().UnixNano())
	names := []string{"zone-a", "zone-b", "zone-c"}
	grid, err := cells.NewGrid(hostGrid())
	if err != nil {
		t.Fatal(err)
	}
	v1, err := cells.Uniform(grid, 1, names)
	if err != nil {
		t.Fatal(err)
	}
	applyTable(t, e, prefix, v1)
	certs := t.TempDir() + "/certs"
	if err := link.WriteClusterCerts(certs, "failovertest", names, time.Now().Add(-time.Hour), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	proxy := testenv.StartTCPProxy(t, e.Endpoints()[0])
	hosts := map[string]*hostRun{}
	for _, name := range names {
		mod, err := wander.New(wander.Config{Seed: 7, Entities: 60, Accounts: 6, Area: 700})
		if err != nil {
			t.Fatal(err)
		}
		endpoints := e.Endpoints()
		if name == "zone-c" {
			endpoints = []string{proxy.Endpoint()}
		}
		hosts[name] = startHost(ctx, zonehost.HostConfig{
			Coord: coord.ClientConfig{Endpoints: endpoints, Prefix: prefix, DialTimeout: time.Second},
			Name:  name, CertDir: certs, TTL: ttl, Module: mod, Runtime: zone.Config{Grid: hostGrid()},
		})
	}
	// running fails the test at once when a node that should run has
	// returned, with what it returned, rather than let a poll time out.
	running := func(names ...string) {
		t.Helper()
		for _, name := range names {
			if ended, err := hosts[name].exited(); ended {
				t.Fatalf("%s's Host returned: %v", name, err)
			}
		}
	}
	for _, name := range names {
		h := hosts[name]
		testenv.PollUntil(t, 30*time.Second, name+" ticking with both peers connected", func() bool {
			running(names...)
			r, n := h.report()
			return n >= 5 && r.Connected == 2
		})
	}

	cut := time.Now()
	proxy.Cut()
	select {
	case err := <-hosts["zone-c"].done:
		if !errors.Is(err, zone.ErrFenced) {
			t.Fatalf("the cut-off node returned %v, want ErrFenced", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the cut-off node still runs 30s after the cut (TTL %v)", ttl)
	}
	want, _, err := zone.PlanFailover(v1, []string{"zone-a", "zone-b"}, []string{"zone-c"})
	if err != nil {
		t.Fatal(err)
	}
	ticksAt := map[string]int{}
	for _, name := range []string{"zone-a", "zone-b"} {
		h := hosts[name]
		testenv.PollUntil(t, 30*time.Second, name+" holding table version 2", func() bool {
			running("zone-a", "zone-b")
			r, n := h.report()
			ticksAt[name] = n
			return r.TableVersion == 2
		})
		if r, _ := h.report(); r.OwnedRegions != len(want.RegionsOf(name)) {
			t.Fatalf("%s owns %d regions at version 2, want %d (its own and its share of zone-c's)", name, r.OwnedRegions, len(want.RegionsOf(name)))
		}
	}
	t.Logf("zone-c cut off: both survivors held version 2 %v later (TTL %v)", time.Since(cut), ttl)
	for _, name := range []string{"zone-a", "zone-b"} {
		h := hosts[name]
		// They tick on, on the new table: the regions are simulated again.
		testenv.PollUntil(t, 30*time.Second, name+" ticking on", func() bool {
			running("zone-a", "zone-b")
			_, n := h.report()
			return n >= ticksAt[name]+10
		})
		if r, _ := h.report(); r.TableVersion != 2 {
			t.Fatalf("%s at table version %d after the failover, want 2 (one write)", name, r.TableVersion)
		}
	}
	op, err := coord.Connect(t.Context(), coord.ClientConfig{Endpoints: e.Endpoints(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	stored, prov, err := op.RegionsProvenance(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !stored.Equal(want) || (prov.Writer != "controller zone-a" && prov.Writer != "controller zone-b") {
		t.Fatalf("stored version %d by %+v; want version 2 = the plan, by a survivor's controller", stored.Version(), prov)
	}
	cancel()
	for _, name := range []string{"zone-a", "zone-b"} {
		select {
		case err := <-hosts[name].done:
			if err != nil {
				t.Errorf("%s: Host after cancel = %v", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: Host did not return after cancel", name)
		}
	}
}
