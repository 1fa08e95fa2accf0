package game

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonecoord"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// The column fence: a den has the id its column derives, so two nodes
// must never run one column at once, however the region tables reach
// them (late, skipping versions, at a node's first tick) and whoever has
// died. These tests move a region of dens between nodes whose view of the
// table is held back (pinned), and check at every step that no den is
// simulated by two nodes, and at the end that the new owner does run the
// region's dens once every node has caught up.

// fenceConfig is a world with dens in half the columns and no mobs
// wandering far.
var fenceConfig = Config{Seed: 5, DenChance: 0.5, Roam: 20}

// pinned is a node's Ownership whose table a test can hold back: a watch
// that delivers late, or a runtime that samples the table once per tick
// and so can go from v1 to v3.
type pinned struct {
	*zonecoord.Ownership
	pin atomic.Pointer[cells.Table]
}

func (p *pinned) Table() *cells.Table {
	if t := p.pin.Load(); t != nil {
		return t
	}
	return p.Ownership.Table()
}

// pinnedNodes starts n game nodes on an 8 km torus of 2 km regions, each
// behind a pinned Ownership.
func pinnedNodes(t *testing.T, n int) (*zonetest.Cluster, []*Game, []*pinned) {
	t.Helper()
	cfg := fenceConfig
	grid := cells.GridConfig{RegionEdge: 2048}
	grid.World.Width, grid.World.Height = 8192, 8192
	cfg.Torus, cfg.RegionEdge = grid.World, 2048
	pins := make([]*pinned, n)
	c := zonetest.Start(t, zonetest.Config{
		Nodes: n, Grid: grid,
		Module: func(int, string) (zone.Module, error) { return NewModule(cfg) },
		Runtime: func(i int, rc *zone.Config) {
			pins[i] = &pinned{Ownership: rc.Territory.(*zonecoord.Ownership)}
			rc.Territory = pins[i]
		},
	})
	games := make([]*Game, n)
	for i, node := range c.Nodes {
		games[i] = node.Module.(*Game)
	}
	return c, games, pins
}

// regionDens is the dens of reg that g simulates.
func regionDens(c *zonetest.Cluster, g *Game, reg cells.RegionID) map[ecs.ID]bool {
	m := map[ecs.ID]bool{}
	g.c.den.Each(func(id ecs.ID, d *Den) {
		if c.Grid.RegionOfChunk(torus.ChunkPos{X: d.Column.X, Y: d.Column.Y}) == reg && g.r.Simulated(id) {
			m[id] = true
		}
	})
	return m
}

// checkOnce fails t if a den of reg is simulated by more than one of gs.
func checkOnce(t *testing.T, c *zonetest.Cluster, reg cells.RegionID, when string, gs ...*Game) {
	t.Helper()
	on := map[ecs.ID]string{}
	for _, g := range gs {
		for id := range regionDens(c, g, reg) {
			if other, ok := on[id]; ok {
				t.Fatalf("%s: den %d of region %d is simulated by %s and %s", when, id, reg, other, g.r.Name())
			}
			on[id] = g.r.Name()
		}
	}
}

// stepOne steps g alone and waits for its messages to arrive.
func stepOne(c *zonetest.Cluster, gs ...*Game) {
	for _, g := range gs {
		g.r.Step()
		c.Sync(10 * time.Second)
	}
}

// settleOn steps every node, checking the dens at each step, until g
// simulates some of reg's dens.
func settleOn(t *testing.T, c *zonetest.Cluster, reg cells.RegionID, g *Game, gs ...*Game) {
	t.Helper()
	testenv.PollUntil(t, 30*time.Second, "the new owner running the region's dens", func() bool {
		c.StepSync(1)
		checkOnce(t, c, reg, "after the catch-up", gs...)
		return len(regionDens(c, g, reg)) > 0
	})
}

// A column of the gained region that becomes resident on the gainer in
// the very tick it takes the new table in waits like the others: the gain
// is noted before the tick's residency changes are applied.
func TestAGainedColumnResidentOnTheChangeTickWaits(t *testing.T) {
	c, gs, pins := pinnedNodes(t, 2)
	a, b := gs[0], gs[1]
	at := torus.Pos{X: 3000, Y: 4096 - 40}
	a.player(t, 101, at)
	far := b.player(t, 102, torus.Pos{X: 3000, Y: 6000})
	c.StepSync(20)
	moved := c.Grid.RegionOf(at)
	if len(regionDens(c, a, moved)) == 0 || len(regionDens(c, b, moved)) != 0 {
		t.Fatalf("before the move: a runs %d dens of region %d, b %d", len(regionDens(c, a, moved)), moved, len(regionDens(c, b, moved)))
	}
	v2, err := a.r.Table().WithOwners(2, map[cells.RegionID]string{moved: b.r.Name()})
	if err != nil {
		t.Fatal(err)
	}
	pins[0].pin.Store(a.r.Table()) // a has not taken v2 in
	c.Apply(v2)
	// b's player stands by a's in the tick b first steps with v2.
	p, _ := b.c.pos.Get(far)
	p.Pos = torus.Pos{X: 3000, Y: 4096 - 30}
	b.r.Reindex(far)
	for range 3 {
		stepOne(c, b, a)
		checkOnce(t, c, moved, "a behind", a, b)
	}
	pins[0].pin.Store(nil)
	settleOn(t, c, moved, b, a, b)
}

// A column of a lost region that stops being resident in the tick the
// loser takes the new table in is torn down (under the table it was set
// up by), so no den of it is left to be handed to the new owner, which
// holds no column there.
func TestALostColumnLeavingResidencyOnTheChangeTickIsTornDown(t *testing.T) {
	c, gs, _ := pinnedNodes(t, 2)
	a, b := gs[0], gs[1]
	at := torus.Pos{X: 3000, Y: 4096 - 40}
	pa := a.player(t, 101, at)
	b.player(t, 102, torus.Pos{X: 3000, Y: 6000})
	c.StepSync(20)
	moved := c.Grid.RegionOf(at)
	if len(regionDens(c, a, moved)) == 0 {
		t.Fatal("no den on a")
	}
	v2, err := a.r.Table().WithOwners(2, map[cells.RegionID]string{moved: b.r.Name()})
	if err != nil {
		t.Fatal(err)
	}
	c.Apply(v2)
	// a's player and pet leave for a region a keeps in the same tick.
	m, _ := a.c.master.Get(pa)
	for _, id := range []ecs.ID{pa, m.Pet} {
		p, _ := a.c.pos.Get(id)
		p.Pos = torus.Pos{X: 3000, Y: 1000}
		a.r.Reindex(id)
	}
	for range 60 {
		c.StepSync(1)
		checkOnce(t, c, moved, "after the move", a, b)
	}
	if n := len(regionDens(c, a, moved)); n != 0 {
		t.Errorf("a runs %d dens of region %d, which it lost", n, moved)
	}
	// b runs a den only where its column is resident on b.
	stray := 0
	b.c.den.Each(func(id ecs.ID, d *Den) {
		if b.r.Simulated(id) && !b.r.IsResident(d.Column) {
			stray++
		}
	})
	if stray > 0 {
		t.Errorf("b runs %d dens of columns not resident on b (%d dens of region %d in all)", stray, len(regionDens(c, b, moved)), moved)
	}
}

// A region moved from a to b (v2) and back (v3), where a goes from v1 to
// v3 in one step: b, still at v2, does not set the region up on seeing a
// name a version above its own — it waits for v3, which gives the region
// back to a.
func TestASkippedTableVersionReleasesNothingEarly(t *testing.T) {
	c, gs, pins := pinnedNodes(t, 2)
	a, b := gs[0], gs[1]
	at := torus.Pos{X: 3000, Y: 4096 - 40}
	a.player(t, 101, at)
	b.player(t, 102, torus.Pos{X: 3000, Y: 4096 + 40})
	c.StepSync(20)
	moved := c.Grid.RegionOf(at)
	v1 := a.r.Table()
	v2, err := v1.WithOwners(2, map[cells.RegionID]string{moved: b.r.Name()})
	if err != nil {
		t.Fatal(err)
	}
	v3, err := v2.WithOwners(3, map[cells.RegionID]string{moved: a.r.Name()})
	if err != nil {
		t.Fatal(err)
	}
	pins[0].pin.Store(v1)
	c.Apply(v2)
	for range 3 {
		stepOne(c, b)
		checkOnce(t, c, moved, "b at v2, a at v1", a, b)
	}
	pins[1].pin.Store(v2) // b's view of v3 is late
	c.Apply(v3)
	pins[0].pin.Store(nil) // a: v1 → v3
	for range 3 {
		stepOne(c, a, b)
		checkOnce(t, c, moved, "a at v3, b at v2", a, b)
	}
	pins[1].pin.Store(nil)
	settleOn(t, c, moved, a, a, b)
}

// A region moved a → b (v2) → c (v3) while a still holds v1: c waits for
// every node to follow v3, not only for the owner v2 named (b never ran
// the region; a still does).
func TestARegionMovedTwiceWaitsForEveryNode(t *testing.T) {
	c, gs, pins := pinnedNodes(t, 3)
	a, b, cc := gs[0], gs[1], gs[2]
	v1 := a.r.Table()
	at := torus.Pos{X: 3000, Y: 1000}
	if v1.OwnerOf(at) != a.r.Name() {
		t.Fatalf("%v is %s's", at, v1.OwnerOf(at))
	}
	var bAt, cAt torus.Pos
	for y := 0.0; y < 8192; y += 512 {
		p := torus.Pos{X: 7000, Y: y}
		switch v1.OwnerOf(p) {
		case b.r.Name():
			bAt = p
		case cc.r.Name():
			cAt = p
		}
	}
	a.player(t, 101, at)
	b.player(t, 102, bAt)
	pc := cc.player(t, 103, cAt)
	c.StepSync(20)
	moved := c.Grid.RegionOf(at)
	if len(regionDens(c, a, moved)) == 0 {
		t.Fatal("no dens on a")
	}
	v2, err := v1.WithOwners(2, map[cells.RegionID]string{moved: b.r.Name()})
	if err != nil {
		t.Fatal(err)
	}
	v3, err := v2.WithOwners(3, map[cells.RegionID]string{moved: cc.r.Name()})
	if err != nil {
		t.Fatal(err)
	}
	pins[0].pin.Store(v1) // a's watch lags
	c.Apply(v2)
	stepOne(c, b, cc, b, cc)
	c.Apply(v3)
	stepOne(c, b, cc, b, cc)
	// c's player walks up to a's (c owns the region in v3).
	p, _ := cc.c.pos.Get(pc)
	p.Pos = torus.Pos{X: 3000, Y: 1010}
	cc.r.Reindex(pc)
	for range 4 {
		stepOne(c, a, b, cc)
		checkOnce(t, c, moved, "a still at v1", a, b, cc)
	}
	pins[0].pin.Store(nil)
	settleOn(t, c, moved, cc, a, b, cc)
}

// A region whose previous owner died is set up by its new owner once the
// membership drops the dead node's lease, whether or not the new owner
// ever heard from it.
func TestARegionOfADeadOwnerIsSetUp(t *testing.T) {
	for _, heard := range []bool{true, false} {
		t.Run(map[bool]string{true: "heard", false: "never heard"}[heard], func(t *testing.T) {
			c, gs, _ := pinnedNodes(t, 2)
			b := gs[1]
			at := torus.Pos{X: 3000, Y: 4096 - 40}
			b.player(t, 102, torus.Pos{X: 3000, Y: 4096 + 40})
			moved := c.Grid.RegionOf(at)
			A, B := c.Nodes[0], c.Nodes[1]
			if heard {
				c.StepSync(5)
			}
			c.Net.Cut(A.Name, B.Name)
			for range 3 {
				b.r.Step() // its messages to a wait for the cut to heal
			}
			raw, err := clientv3.New(clientv3.Config{Endpoints: c.Etcd.Endpoints(), DialTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = raw.Close() }()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			lease := A.Ownership.Lease()
			if _, err := raw.Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
				t.Fatal(err)
			}
			testenv.PollUntil(t, 20*time.Second, "the membership dropping a's lease", func() bool { return !c.Accepts(A.Name, lease) })
			next, err := b.r.Table().WithOwners(2, map[cells.RegionID]string{moved: B.Name})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Admin.ApplyRegions(ctx, next, coord.ApplyOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
			if err := B.Ownership.WaitVersion(ctx, next.Version()); err != nil {
				t.Fatal(err)
			}
			// b's player stands by the border, so columns of the region
			// it gained are resident there.
			testenv.PollUntil(t, 30*time.Second, "b running the dens of the region it gained", func() bool {
				b.r.Step()
				return len(regionDens(c, b, moved)) > 0
			})
		})
	}
}

// A node's first table is not trusted on its own: a node that starts
// while a region is moving to it waits for the node that still runs the
// region (here a, whose view of the table lags).
func TestANodesFirstTableWaitsForItsPeers(t *testing.T) {
	c, gs, pins := pinnedNodes(t, 2)
	a, b := gs[0], gs[1]
	at := torus.Pos{X: 3000, Y: 4096 - 40}
	a.player(t, 101, at)
	b.player(t, 102, torus.Pos{X: 3000, Y: 4096 + 40})
	moved := c.Grid.RegionOf(at)
	for range 20 { // only a steps: b has not started yet
		stepOne(c, a)
	}
	v1 := a.r.Table()
	v2, err := v1.WithOwners(2, map[cells.RegionID]string{moved: b.r.Name()})
	if err != nil {
		t.Fatal(err)
	}
	pins[0].pin.Store(v1) // a lags
	c.Apply(v2)
	for range 3 {
		stepOne(c, b)
		checkOnce(t, c, moved, "b's first steps, a at v1", a, b)
	}
	pins[0].pin.Store(nil)
	settleOn(t, c, moved, b, a, b)
}

// A new grid (a table of another region edge, applied by force) waits like
// a region move: the gainer maps a column to a region by the held table's
// grid, and sets nothing up while the node holding the old grid's table
// runs it.
func TestAGridChangeWaitsForThePeers(t *testing.T) {
	c, gs, pins := pinnedNodes(t, 2)
	a, b := gs[0], gs[1]
	at := torus.Pos{X: 3000, Y: 4096 - 40} // old region 5 (a's), new region 0
	a.player(t, 101, at)
	far := b.player(t, 102, torus.Pos{X: 3000, Y: 6000})
	c.StepSync(20)
	moved := c.Grid.RegionOf(at)
	if len(regionDens(c, a, moved)) == 0 || len(regionDens(c, b, moved)) != 0 {
		t.Fatalf("before: a runs %d dens of region %d, b %d", len(regionDens(c, a, moved)), moved, len(regionDens(c, b, moved)))
	}
	gcfg := cells.GridConfig{RegionEdge: 4096}
	gcfg.World = c.Grid.World().Config()
	ng, err := cells.NewGrid(gcfg)
	if err != nil {
		t.Fatal(err)
	}
	v1 := a.r.Table()
	v2, err := cells.NewTable(ng, v1.Version()+1, []string{b.r.Name(), a.r.Name(), b.r.Name(), a.r.Name()})
	if err != nil {
		t.Fatal(err)
	}
	pins[0].pin.Store(v1) // a still holds the old grid's table
	c.Apply(v2)
	p, _ := b.c.pos.Get(far)
	p.Pos = torus.Pos{X: 3000, Y: 4096 - 30}
	b.r.Reindex(far)
	for range 20 {
		stepOne(c, b, a)
		checkOnce(t, c, moved, "a at the old grid, b at the new", a, b)
	}
}
