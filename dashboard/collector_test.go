package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/dashboard"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/zone"
)

// TestSnapshotShowsTheWholeCluster: after a few ticks of a 2-node game,
// the snapshot has the world and its bands, every region of the table
// with its owner, both nodes (with their numbers), and every node's
// simulated entities, named by the game's kinds, as many as the runtimes
// simulate; it encodes to the JSON the page reads.
func TestSnapshotShowsTheWholeCluster(t *testing.T) {
	r := startRig(t, dashboard.CollectorConfig{})
	r.step(40)
	s := r.col.Snapshot()
	if s.World.Width != 8192 || s.World.Height != 8192 || s.World.Cols != 4 || s.World.Rows != 4 || s.World.RegionEdge != 2048 {
		t.Fatalf("world %+v", s.World)
	}
	bands := r.c.Nodes[0].Runtime.Bands()
	if s.Bands.Ghost != bands.Ghost || s.Bands.Interaction != bands.Interaction || s.Bands.HandoffMargin != bands.HandoffMargin || s.Bands.Ghost <= 0 {
		t.Fatalf("bands %+v, the runtime's %+v", s.Bands, bands)
	}
	if len(s.Regions) != 16 || s.TableVersion != r.c.Nodes[0].Runtime.Table().Version() {
		t.Fatalf("%d regions at v%d", len(s.Regions), s.TableVersion)
	}
	table := r.c.Nodes[0].Runtime.Table()
	owned := map[string]int{}
	for _, reg := range s.Regions {
		if want := table.Owner(cells.RegionID(reg.ID)); reg.Owner != want {
			t.Errorf("region %d: owner %q, table %q", reg.ID, reg.Owner, want)
		}
		owned[reg.Owner]++
	}
	if owned["zone-0"] != 8 || owned["zone-1"] != 8 || strings.Join(s.Owners, ",") != "zone-0,zone-1" {
		t.Fatalf("owners %v, regions by owner %v", s.Owners, owned)
	}
	if len(s.Nodes) != 2 || s.Nodes[0].Name != "zone-0" || s.Nodes[1].Name != "zone-1" {
		t.Fatalf("nodes %+v", s.Nodes)
	}
	byNode := map[string]int{}
	kinds := map[string]int{}
	for _, e := range s.Entities {
		byNode[e.Node]++
		kinds[e.Kind]++
		if e.ID == "" || e.Kind == "" {
			t.Errorf("entity %+v unnamed", e)
		}
	}
	for _, n := range r.c.Nodes {
		sim := 0
		n.Runtime.Positions().Each(func(id ecs.ID, _ *zone.Position) {
			if n.Runtime.Simulated(id) {
				sim++
			}
		})
		// The last round's sample may be a tick old: within a handful.
		if got := byNode[n.Name]; got == 0 || got < sim-8 || got > sim+8 {
			t.Errorf("%s: %d entities sampled, it simulates %d", n.Name, got, sim)
		}
	}
	for _, st := range s.Nodes {
		if st.Tick == 0 || st.TickSamples == 0 || st.TickP99ms < st.TickP50ms || st.Simulated == 0 || st.OwnedRegions != 8 || st.Stale {
			t.Errorf("node stats %+v", st)
		}
		// Subscriptions along the border at least; the rates may be 0
		// while no entity stands near it.
		if st.LinkOut == 0 || st.LinkIn == 0 || st.LinkInPerSec < 0 || st.LinkOutPerSec < 0 {
			t.Errorf("%s: link traffic %d in, %d out (%v, %v a second)", st.Name, st.LinkIn, st.LinkOut, st.LinkInPerSec, st.LinkOutPerSec)
		}
	}
	if kinds["player"] == 0 || kinds["pet"] == 0 || kinds["den"] == 0 {
		t.Errorf("kinds %v: want players, pets and dens", kinds)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot: %d entities, %d regions, %d bytes of JSON", len(s.Entities), len(s.Regions), len(b))
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"at", "version", "world", "bands", "regions", "owners", "nodes", "entities", "handoffs", "econ", "events"} {
		if _, ok := back[k]; !ok {
			t.Errorf("the JSON lacks %q", k)
		}
	}
}

// TestHandoffSeenWhenARegionMoves: zone-0's busiest region is given to
// zone-1; its entities are handed over, and the collector records each
// as a handoff from zone-0 to zone-1 where zone-1 found it (inside the
// moved region), with the node counts to match; the snapshot's table is
// the new version with the region's new owner.
func TestHandoffSeenWhenARegionMoves(t *testing.T) {
	r := startRig(t, dashboard.CollectorConfig{})
	r.step(20)
	before := r.col.Snapshot()
	reg := busiestRegion(t, before, "zone-0")
	was := map[string]bool{}
	for _, e := range before.Entities {
		if e.Node == "zone-0" && inRegion(reg, e.X, e.Y) {
			was[e.ID] = true
		}
	}
	r.moveRegion(reg.ID, "zone-1")
	s := r.stepUntil(200, "a handoff of the moved region's entities", func(s dashboard.Snapshot) bool { return len(s.Handoffs) > 0 })
	s = r.stepUntil(100, "the table's new version in the snapshot", func(s dashboard.Snapshot) bool { return s.TableVersion > before.TableVersion })
	r.step(40)
	s = r.col.Snapshot()
	if got := s.Regions[reg.ID].Owner; got != "zone-1" {
		t.Fatalf("region %d owner %q after the move, want zone-1", reg.ID, got)
	}
	moved := 0
	for _, h := range s.Handoffs {
		if h.From != "zone-0" || h.To != "zone-1" {
			t.Errorf("handoff %+v: want zone-0 to zone-1", h)
		}
		if !inRegion(reg, h.X, h.Y) {
			// An entity walking near the border may be handed over
			// just outside it.
			t.Logf("handoff %+v outside region %d %+v", h, reg.ID, reg)
		}
		if was[h.ID] {
			moved++
		}
		if h.At.IsZero() || h.Kind == "" {
			t.Errorf("handoff %+v lacks its time or kind", h)
		}
	}
	if moved == 0 {
		t.Fatalf("none of the %d entities in region %d is among the handoffs %+v", len(was), reg.ID, s.Handoffs)
	}
	n0, n1 := s.Nodes[0], s.Nodes[1]
	if n0.HandoffsSeenOut != len(s.Handoffs) || n1.HandoffsSeenIn != len(s.Handoffs) {
		t.Errorf("seen out of zone-0 %d, into zone-1 %d, handoffs %d", n0.HandoffsSeenOut, n1.HandoffsSeenIn, len(s.Handoffs))
	}
	if n0.Handoff.Sent == 0 || n0.OwnedRegions != 7 || n1.OwnedRegions != 9 {
		t.Errorf("zone-0 %+v, zone-1 %+v", n0, n1)
	}
	for _, e := range s.Entities {
		if was[e.ID] && e.Node == "zone-0" && inRegion(reg, e.X, e.Y) {
			t.Errorf("entity %s still simulated by zone-0 in the moved region", e.ID)
		}
	}
	// Handoffs are kept KeepHandoffs (10 s): after that they leave the
	// snapshot, the counts stay.
	r.step(220)
	if s = r.col.Snapshot(); len(s.Handoffs) != 0 || s.Nodes[1].HandoffsSeenIn == 0 {
		t.Fatalf("after 11 s: %d handoffs kept, %d seen into zone-1", len(s.Handoffs), s.Nodes[1].HandoffsSeenIn)
	}
}

// TestNodeDownAndRegionsChangingOwner: a node declared down (NodeDown) is
// marked so at once, its entities leave the snapshot and its later
// reports are not taken; when a new table gives its regions to the other
// node (a failover), the snapshot lists each region's change of owner
// with the version, for KeepHandoffs.
func TestNodeDownAndRegionsChangingOwner(t *testing.T) {
	r := startRig(t, dashboard.CollectorConfig{})
	r.step(20)
	before := r.col.Snapshot()
	r.col.NodeDown("zone-0", "killed")
	s := r.col.Snapshot()
	if n := s.Nodes[0]; n.Name != "zone-0" || !n.Down || n.DownWhy != "killed" || s.Nodes[1].Down || s.Version <= before.Version {
		t.Fatalf("nodes %+v (version %d, before %d): want zone-0 down, killed", s.Nodes, s.Version, before.Version)
	}
	for _, e := range s.Entities {
		if e.Node == "zone-0" {
			t.Fatalf("entity %+v of the node down still in the snapshot", e)
		}
	}
	if len(s.RegionChanges) != 0 {
		t.Fatalf("region changes %+v before any new table", s.RegionChanges)
	}
	tick := s.Nodes[0].Tick
	r.step(5)
	if s = r.col.Snapshot(); s.Nodes[0].Tick != tick {
		t.Fatalf("zone-0's reports taken after it was declared down: tick %d, was %d", s.Nodes[0].Tick, tick)
	}

	// The failover: zone-0's regions to zone-1, in one version.
	cur := r.c.Nodes[1].Runtime.Table()
	gone := cur.RegionsOf("zone-0")
	owners := map[cells.RegionID]string{}
	for _, reg := range gone {
		owners[reg] = "zone-1"
	}
	next, err := cur.WithOwners(cur.Version()+1, owners)
	if err != nil {
		t.Fatal(err)
	}
	r.c.Apply(next)
	s = r.stepUntil(100, "the failover's table in the snapshot", func(s dashboard.Snapshot) bool { return s.TableVersion == next.Version() })
	if len(s.RegionChanges) != len(gone) {
		t.Fatalf("%d region changes %+v, want zone-0's %d regions", len(s.RegionChanges), s.RegionChanges, len(gone))
	}
	for i, c := range s.RegionChanges {
		if c.Region != int(gone[i]) || c.From != "zone-0" || c.To != "zone-1" || c.Version != next.Version() || c.At.IsZero() {
			t.Errorf("change %+v, want region %d from zone-0 to zone-1 at version %d", c, gone[i], next.Version())
		}
		if o := s.Regions[c.Region].Owner; o != "zone-1" {
			t.Errorf("region %d owner %q after the failover", c.Region, o)
		}
	}
	r.step(220) // 11 s: the changes are kept KeepHandoffs (10 s)
	if s = r.col.Snapshot(); len(s.RegionChanges) != 0 || !s.Nodes[0].Down {
		t.Fatalf("after 11 s: changes %+v, zone-0 %+v", s.RegionChanges, s.Nodes[0])
	}
}

// TestTickPercentilesOverTheWindow: the percentiles are nearest-rank over
// the ticks of the last Window; older ticks leave it.
func TestTickPercentilesOverTheWindow(t *testing.T) {
	r := startRig(t, dashboard.CollectorConfig{Window: time.Second})
	n := r.c.Nodes[0]
	for i := range 100 {
		rep := n.Runtime.Step()
		r.col.Zone(report(n, rep, time.Duration(i+1)*time.Millisecond))
		r.clk.Advance(5 * time.Millisecond) // 100 ticks in 0.5 s, all in the window
	}
	st := r.col.Snapshot().Nodes[0]
	if st.TickSamples != 100 || st.TickP50ms != 50 || st.TickP99ms != 99 || st.TickMaxMs != 100 {
		t.Fatalf("100 ticks of 1…100 ms: %+v, want p50 50, p99 99, max 100", st)
	}
	r.clk.Advance(2 * time.Second)
	rep := n.Runtime.Step()
	r.col.Zone(report(n, rep, 7*time.Millisecond))
	st = r.col.Snapshot().Nodes[0]
	if st.TickSamples != 1 || st.TickP50ms != 7 || st.TickP99ms != 7 {
		t.Fatalf("after the window: %+v, want one tick of 7 ms", st)
	}
	// A node that stops reporting is stale.
	if len(r.col.Snapshot().Entities) == 0 {
		t.Fatal("no entities while the node reports")
	}
	r.clk.Advance(3 * time.Second)
	s := r.col.Snapshot()
	if st = s.Nodes[0]; !st.Stale || len(s.Entities) != 0 {
		t.Fatalf("3 s without a report: %+v and %d entities, want stale and none drawn", st, len(s.Entities))
	}
}

// TestEconAndEvents: the economy's movements a second come from the last
// two pushes; events keep the newest MaxEvents.
func TestEconAndEvents(t *testing.T) {
	r := startRig(t, dashboard.CollectorConfig{MaxEvents: 3})
	r.col.Econ("econ-b", dashboard.EconStats{Name: "econ-b", Ready: true})
	r.col.Econ("econ-a", dashboard.EconStats{Name: "econ-a", Ready: true, Accepted: 10, Rejected: 2})
	r.clk.Advance(2500 * time.Millisecond)
	r.col.Econ("econ-a", dashboard.EconStats{Name: "econ-a", Ready: true, Accepted: 50, Rejected: 12, SessionsOpen: 4, NettingRatio: 8})
	for i := range 5 {
		r.col.Event(fmt.Sprintf("event %d", i))
	}
	s := r.col.Snapshot()
	if len(s.Econ) != 2 || s.Econ[0].Name != "econ-a" || s.Econ[0].MovementsPerSec != 20 || s.Econ[0].SessionsOpen != 4 || s.Econ[0].NettingRatio != 8 {
		t.Fatalf("econ %+v: want econ-a first at 20 movements a second", s.Econ)
	}
	if s.Econ[0].Stale || !s.Econ[1].Stale {
		t.Fatalf("econ %+v: econ-b has not pushed for 2.5 s, econ-a just did", s.Econ)
	}
	if len(s.Events) != 3 || s.Events[0].Text != "event 2" || s.Events[2].Text != "event 4" {
		t.Fatalf("events %+v: want the newest three, oldest first", s.Events)
	}
}

func TestCollectorConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg   dashboard.CollectorConfig
		field string
	}{
		{dashboard.CollectorConfig{Window: -time.Second}, "Window"},
		{dashboard.CollectorConfig{SampleEvery: -1}, "SampleEvery"},
		{dashboard.CollectorConfig{MaxHandoffs: -1}, "MaxHandoffs"},
		{dashboard.CollectorConfig{MaxEvents: -1}, "MaxEvents"},
	} {
		err := tc.cfg.Validate()
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: %v, want a config error naming %s", tc.cfg, err, tc.field)
		}
	}
	if err := (dashboard.CollectorConfig{}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestEconNodesPushesStatsWithOpenSessions: a real economy node (on the
// rig's etcd, over a memory store) records movements; EconNodes pushes
// its Stats with its open sessions from the store.
func TestEconNodesPushesStatsWithOpenSessions(t *testing.T) {
	r := startRig(t, dashboard.CollectorConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: r.c.Etcd.Endpoints(), Prefix: "/dashboard-econ/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	store := netting.NewMemStore()
	n, err := econ.Start(ctx, econ.Config{Name: "econ-a", Coord: cl, Store: store, TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	testenv.PollUntil(t, 20*time.Second, "econ-a ready", func() bool { return n.Status().Ready })
	for i := range 6 {
		m := netting.Movement{Key: fmt.Sprintf("k%d", i), Legs: []ledger.Leg{ledger.Debit(ledger.Revenue, 1), ledger.Credit(ledger.Spendable("u"), 1)}}
		if out, err := n.Record(ctx, fmt.Sprintf("market-%d", i%2), m); err != nil || out.Status != netting.Accepted {
			t.Fatalf("record: %+v, %v", out, err)
		}
	}
	if err := r.col.EconNodes(ctx, store, n); err != nil {
		t.Fatal(err)
	}
	s := r.col.Snapshot()
	if len(s.Econ) != 1 || s.Econ[0].Name != "econ-a" || s.Econ[0].Accepted != 6 || s.Econ[0].SessionsOpen != 2 || !s.Econ[0].Ready {
		t.Fatalf("econ %+v: want econ-a ready, 6 accepted, 2 sessions open", s.Econ)
	}
}
