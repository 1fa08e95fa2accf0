package dashboard_test

import (
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/dashboard"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonehost"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// rig is a 2-node cluster of the reference game (an 8 km torus in 2 km
// regions; zone-0 owns the rows y < 4096, zone-1 the rows above) whose
// every tick is reported to a Collector as a zone host would: the test's
// goroutine steps each runtime and calls Zone right after, the runtime
// still its own. The collector's clock is moved one tick per round.
type rig struct {
	t   testing.TB
	c   *zonetest.Cluster
	col *dashboard.Collector
	clk *clock.Fake
}

const tick = 50 * time.Millisecond

func startRig(t testing.TB, cfg dashboard.CollectorConfig) *rig {
	t.Helper()
	grid := cells.GridConfig{RegionEdge: 2048}
	grid.World.Width, grid.World.Height = 8192, 8192
	gc := game.Config{Seed: 3, Torus: grid.World, RegionEdge: 2048}
	c := zonetest.Start(t, zonetest.Config{
		Nodes: 2, Grid: grid,
		Module: func(int, string) (zone.Module, error) { return game.NewModule(gc) },
	})
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg.Clock = clk
	if cfg.Kinds == nil {
		cfg.Kinds = game.KindOf
	}
	return &rig{t: t, c: c, col: dashboard.NewCollector(cfg), clk: clk}
}

// report is node n's HostReport of the tick that returned rep, as
// zonehost.Host builds it (census included).
func report(n *zonetest.Node, rep zone.Report, took time.Duration) zonehost.HostReport {
	rt := n.Runtime
	hr := zonehost.HostReport{Report: rep, Runtime: rt, Took: took, RenderGhosts: rt.RenderGhosts(),
		Handoff: rt.HandoffStats(), Cluster: rt.ClusterStats(), TableVersion: rt.Table().Version(),
		OwnedRegions: len(rt.Table().RegionsOf(rt.Name())), Peers: 1, Connected: 1}
	rt.Positions().Each(func(id ecs.ID, _ *zone.Position) {
		switch {
		case rt.Simulated(id):
			hr.Simulated++
		case rt.Frozen().Has(id) && !rt.Ghosts().Has(id):
			hr.Frozen++
		}
	})
	return hr
}

// step runs rounds ticks: each node steps and reports (its step's wall
// time as Took), then the messages are delivered and the clock moves a
// tick.
func (r *rig) step(rounds int) {
	r.t.Helper()
	for range rounds {
		for _, n := range r.c.Nodes {
			began := time.Now()
			rep := n.Runtime.Step()
			r.col.Zone(report(n, rep, time.Since(began)))
		}
		r.c.Sync(10 * time.Second)
		r.clk.Advance(tick)
	}
}

// stepUntil steps until cond holds on the collector's snapshot, at most
// limit rounds, and returns that snapshot.
func (r *rig) stepUntil(limit int, what string, cond func(dashboard.Snapshot) bool) dashboard.Snapshot {
	r.t.Helper()
	for range limit {
		r.step(1)
		if s := r.col.Snapshot(); cond(s) {
			return s
		}
	}
	r.t.Fatalf("after %d ticks: %s never happened", limit, what)
	return dashboard.Snapshot{}
}

// busiestRegion is the region owned by node whose bounds hold the most of
// the snapshot's entities.
func busiestRegion(t testing.TB, s dashboard.Snapshot, node string) dashboard.Region {
	t.Helper()
	best, most := dashboard.Region{}, -1
	for _, reg := range s.Regions {
		if reg.Owner != node {
			continue
		}
		n := 0
		for _, e := range s.Entities {
			if inRegion(reg, e.X, e.Y) {
				n++
			}
		}
		if n > most {
			best, most = reg, n
		}
	}
	if most <= 0 {
		t.Fatalf("no region of %s holds an entity: %+v", node, s.Entities)
	}
	return best
}

func inRegion(reg dashboard.Region, x, y float64) bool {
	return x >= reg.MinX && x < reg.MaxX && y >= reg.MinY && y < reg.MaxY
}

// moveRegion gives region id to node in a new table version, applied
// through etcd; it returns once every node holds it.
func (r *rig) moveRegion(id int, node string) {
	r.t.Helper()
	cur := r.c.Nodes[0].Runtime.Table()
	next, err := cur.WithOwners(cur.Version()+1, map[cells.RegionID]string{cells.RegionID(id): node})
	if err != nil {
		r.t.Fatal(err)
	}
	r.c.Apply(next)
}
