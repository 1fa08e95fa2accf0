package zone_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/link/faulty"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// Claims of zone/doc.go that a review (issue 28) found false on layouts
// the other tests never tried, one test each.

// Stride walks an entity in a straight line: Start + Steps·Step, for Max
// steps, then it stands. Exact binary fractions keep every position
// exact, so a test can put an entity exactly on an edge.
type Stride struct {
	Start      torus.Pos
	Step       torus.Pos
	Steps, Max uint32
}

// striders is a test module: entity i (id zone.DerivedID(i)) strides as
// specs[i] says; each node creates those its table gives it. The module
// moves positions without marking them dirty, like the reference game
// (which resends positions only every 8th step), and marks a chunk change
// only (MarkMoved): the runtime must not need more to keep the margin.
type striders struct {
	specs []Stride
	// accounts: the first accounts entities are viewers (account i+1's),
	// residency anchors, owned by their account.
	accounts int
	// dirty marks every move (the position is replicated each step).
	dirty  bool
	r      *zone.Runtime
	stride *ecs.Store[Stride]
	q      *ecs.Query2[zone.Position, Stride]
}

func (m *striders) Setup(r *zone.Runtime) error {
	m.r = r
	var err error
	m.stride, m.q, err = setupMovers(r, "stride", m.specs, func(s Stride) torus.Pos { return s.Start }, m.accounts, m.run)
	return err
}

func (m *striders) run(w *ecs.World, _ ecs.Tick) {
	geo := m.r.Geometry()
	m.q.Each(func(id ecs.ID, p *zone.Position, s *Stride) {
		if s.Steps >= s.Max {
			return
		}
		s.Steps++
		n := float64(s.Steps)
		next := geo.Normalise(torus.Pos{X: s.Start.X + n*s.Step.X, Y: s.Start.Y + n*s.Step.Y})
		if geo.ChunkOf(next) != geo.ChunkOf(p.Pos) {
			w.MarkMoved(id)
		}
		p.Pos = next
		if m.dirty {
			m.r.Positions().MarkDirty(id)
		}
	})
}

// simulatedOn returns the nodes that simulate id, and where the last of
// them holds it.
func simulatedOn(c *zonetest.Cluster, id ecs.ID) (on []string, at torus.Pos) {
	for _, n := range c.Nodes {
		if n.Runtime.Simulated(id) {
			on = append(on, n.Name)
			p, _ := n.Runtime.Positions().Get(id)
			at = p.Pos
		}
	}
	return on, at
}

// TestNoEntityIsSimulatedPastTheMargin: an entity walks east from zone-0
// over the border into zone-1 at 2 m a tick and enters the chunk beyond
// the margin (32 m, one chunk) exactly at its west edge, where it stands
// exactly the margin past the border: not yet to be handed over. At no
// tick after that may zone-0 simulate it farther past the border than
// the margin; it is handed over once, to zone-1.
func TestNoEntityIsSimulatedPastTheMargin(t *testing.T) {
	t.Parallel()
	const border = 4096.0 // threeWays: zone-0 west of it, zone-1 east, both south of y 4096
	spec := Stride{Start: torus.Pos{X: border - 8, Y: 2000}, Step: torus.Pos{X: 2}, Max: 60}
	c := zonetest.Start(t, zonetest.Config{Nodes: 3, Grid: clusterGrid(), Table: threeWays, Memory: true,
		Module: func(int, string) (zone.Module, error) { return &striders{specs: []Stride{spec}}, nil }})
	margin := cells.DefaultBands(c.Grid).HandoffMargin
	geo := c.Nodes[0].Runtime.Geometry()
	if edge := geo.ChunkOrigin(geo.ChunkOf(torus.Pos{X: border + margin, Y: 2000})).X; edge != border+margin {
		t.Fatalf("the chunk beyond the margin starts at x %v, not at the margin's edge %v: the scene is not the one meant", edge, border+margin)
	}
	id, _ := zone.DerivedID(0)
	for tick := 1; tick <= int(spec.Max)+5; tick++ {
		c.StepSync(1)
		table := c.Nodes[0].Runtime.Table()
		on, at := simulatedOn(c, id)
		if len(on) > 1 {
			t.Fatalf("tick %d: the strider is simulated on %v", tick, on)
		}
		if len(on) == 1 {
			if to, ok := table.HandoffTarget(on[0], at, margin); ok {
				t.Fatalf("tick %d: the strider is simulated on %s at x %v, %v m past the border (margin %v m); its owner is %s",
					tick, on[0], at.X, at.X-border, margin, to)
			}
		}
	}
	on, at := simulatedOn(c, id)
	if st := totalHandoffs(c); len(on) != 1 || on[0] != "zone-1" || st.Acked != 1 {
		t.Fatalf("the strider ends simulated on %v at %v after handoffs %+v; want zone-1, after one handoff", on, at, st)
	}
}

// TestARegionSwapHandsOverEveryEntityInIt: zone-0 and zone-3 swap region
// (1, 1) for region (2, 2). Standing entities fill both, many of them
// within the handoff margin (32 m) of a region their old owner keeps.
// The margin is for walking over a border; an entity standing in a region
// whose owner changed goes to its new owner, margin or not: every one
// ends on the new owner, none on two nodes at any tick.
func TestARegionSwapHandsOverEveryEntityInIt(t *testing.T) {
	t.Parallel()
	grid := mustGrid(t, clusterGrid())
	a := grid.RegionOf(torus.Pos{X: 3000, Y: 3000}) // (1, 1): zone-0's, by zone-0's regions on its west and south
	b := grid.RegionOf(torus.Pos{X: 5000, Y: 5000}) // (2, 2): zone-3's, by zone-3's regions on its east and north
	var specs []Pace
	for k := range 8 {
		d := 1 + 4*float64(k) // 1 … 29 m from the border: inside the margin
		specs = append(specs,
			Pace{Centre: torus.Pos{X: 2048 + d, Y: 2300 + 200*float64(k)}}, // by (0, 1), zone-0 keeps it
			Pace{Centre: torus.Pos{X: 2300 + 200*float64(k), Y: 2048 + d}}, // by (1, 0), zone-0 keeps it
			Pace{Centre: torus.Pos{X: 6144 - d, Y: 4300 + 200*float64(k)}}, // by (3, 2), zone-3 keeps it
			Pace{Centre: torus.Pos{X: 4300 + 200*float64(k), Y: 6144 - d}}, // by (2, 3), zone-3 keeps it
			Pace{Centre: torus.Pos{X: 2800 + 60*float64(k), Y: 3000}},      // inside (1, 1)
			Pace{Centre: torus.Pos{X: 4800 + 60*float64(k), Y: 5000}},      // inside (2, 2)
		)
	}
	c := zonetest.Start(t, zonetest.Config{Grid: clusterGrid(), Table: fourWays, Memory: true,
		Module: func(int, string) (zone.Module, error) { return &pacers{specs: specs}, nil }})
	old := c.Nodes[0].Runtime.Table()
	if old.Owner(a) != "zone-0" || old.Owner(b) != "zone-3" {
		t.Fatalf("regions %d and %d are %s's and %s's, not zone-0's and zone-3's", a, b, old.Owner(a), old.Owner(b))
	}
	ids := make([]ecs.ID, len(specs))
	for i := range specs {
		ids[i], _ = zone.DerivedID(uint64(i))
	}
	c.StepSync(5)
	next, err := old.WithOwners(2, map[cells.RegionID]string{a: "zone-3", b: "zone-0"})
	if err != nil {
		t.Fatal(err)
	}
	c.Apply(next)
	for tick := 1; tick <= 100; tick++ {
		c.StepSync(1)
		checkOneWriter(t, c, ids, tick)
	}
	var left []string
	for i, id := range ids {
		if on, _ := simulatedOn(c, id); len(on) != 1 || on[0] != next.OwnerOf(specs[i].Centre) {
			left = append(left, fmt.Sprintf("%d at %v on %v", id, specs[i].Centre, on))
		}
	}
	if len(left) > 0 {
		t.Fatalf("100 ticks after the swap %d of %d standing entities are not simulated on their region's new owner, e.g. %v",
			len(left), len(ids), left[:min(len(left), 4)])
	}
	t.Logf("handoffs %+v", totalHandoffs(c))
}

// randomTable gives each region of the grid to one of the nodes at
// random, from seed, every node at least one region, and the four
// regions around the origin (where wanderConfig's wanderers roam) to two
// nodes at least: a table that gives them all to one node is drawn
// again (1 in about 60 was; its run showed no client an entity of
// another node and failed as exercising nothing).
func randomTable(seed uint64) func(cells.Grid, []string) (*cells.Table, error) {
	return func(g cells.Grid, names []string) (*cells.Table, error) {
		rnd := rand.New(rand.NewPCG(seed, 0x7ab1e))
		e := float64(g.RegionEdge()) / 2
		var corner []cells.RegionID
		for _, p := range [][2]float64{{e, e}, {-e, e}, {e, -e}, {-e, -e}} {
			corner = append(corner, g.RegionOf(g.World().Normalise(torus.Pos{X: p[0], Y: p[1]})))
		}
		owners := make([]string, g.Regions())
		for {
			for r := range owners {
				owners[r] = names[rnd.IntN(len(names))]
			}
			for i, r := range rnd.Perm(len(owners))[:len(names)] {
				owners[r] = names[i]
			}
			if slices.ContainsFunc(corner, func(r cells.RegionID) bool { return owners[r] != owners[corner[0]] }) {
				return cells.NewTable(g, 1, owners)
			}
		}
	}
}

// TestClusterWithHandoffsIsOneNodeOnRandomTables: wanderers roaming over
// borders and seams, handed over many times, show every client what one
// node shows it (within the lag of TestClusterWithHandoffsIsOneNode),
// whatever the region table: over random tables, each with its own
// wander seed, all from one seed (each subtest logs its table). A review
// found about half of random tables failing: a viewer on a third node
// that subscribed after a handoff was shown the entity where it was
// handed over, from the old owner's snapshot, long after it walked away.
//
// Each run takes a fresh seed, printed; SHARDWISE_SEED=N replays seed N.
// One table a run, beside the table
// TestClusterWithHandoffsIsOneNodeOnAHandedOnTable replays; SHARDWISE_LONG=1
// runs three (table-0 is the same table in both: a seed printed by either
// replays in either). A fresh seed every run of the suite is what covers
// many tables; three a run cost about 11 s of CPU under -race (issue 28).
func TestClusterWithHandoffsIsOneNodeOnRandomTables(t *testing.T) {
	t.Parallel()
	seed := testseed.Seed(t)
	rnd := rand.New(rand.NewPCG(seed, 0x1a7e5))
	runs := 1
	if os.Getenv("SHARDWISE_LONG") == "1" {
		runs = 3
	}
	for i := range runs {
		tableSeed, wanderSeed := rnd.Uint64(), rnd.Uint64()
		t.Run(fmt.Sprintf("table-%d", i), func(t *testing.T) {
			t.Parallel()
			oneNodeOnRandomTable(t, tableSeed, wanderSeed, 400)
		})
	}
}

// TestClusterWithHandoffsIsOneNodeOnAHandedOnTable replays table-0 of
// TestClusterWithHandoffsIsOneNodeOnRandomTables' seed
// 15465355954984300310, which failed at tick 244 (about one random table
// in twenty did): zone-3 handed entity 96 to zone-1 in chunk (249, 1),
// and zone-1's first step of it took it into (248, 1), before its first
// flush. zone-0 held (249, 1) from both for a client, not (248, 1):
// zone-3 said nothing (a handoff is superseded by the new owner's epoch),
// zone-1 counted only the observers of (248, 1), and zone-0 kept its
// ghost at zone-3's epoch 2 where it was handed over, for good. The new
// owner now sends such a node the entity's vanish (announceAdopted;
// testdata/scenarios/handed_on_ghost.txt, nohandedvanish).
func TestClusterWithHandoffsIsOneNodeOnAHandedOnTable(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(15465355954984300310, 0x1a7e5))
	// 260 ticks, not 400: the scene is at tick 244 (nohandedvanish
	// planted breaks it there), and the rest of the run is what the
	// random tables above cover.
	oneNodeOnRandomTable(t, rnd.Uint64(), rnd.Uint64(), 260)
}

// oneNodeOnRandomTable is TestClusterWithHandoffsIsOneNode's comparison
// on a random table from tableSeed, with wanderers from wanderSeed, over
// ticks ticks.
func oneNodeOnRandomTable(t *testing.T, tableSeed, wanderSeed uint64, ticks int) {
	t.Helper()
	table := randomTable(tableSeed)
	grid := mustGrid(t, clusterGrid())
	tb, err := table(grid, []string{"zone-0", "zone-1", "zone-2", "zone-3"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("owners by region: %v", tb.Owners())
	cfg := wanderConfig(wanderSeed)
	cfg.Entities, cfg.Accounts = 96, 12
	cfg.Area, cfg.Roam, cfg.Speed = 300, 400, 30
	if n := sameAsOneNodeOn(t, cfg, ticks, 4, true, table); n < 10 {
		t.Fatalf("only %d handoffs: the table exercises too few", n)
	}
}

// TestAViewerArrivingAfterAHandoffSeesNoStaleGhost: a walker goes east
// from zone-0 into zone-1, is handed over, and walks on 14 chunks. Then a
// viewer on zone-2, which never saw it, turns to look at the chunk where
// it was handed over: zone-2 subscribes to that chunk from zone-1, its
// owner, and from zone-0, within whose margin it lies. zone-0 still
// remembers the walker there (the "went" record, for the observers that
// saw it from zone-0 and may need it in a resync), but the viewer must not
// be shown it: it stands far away, and nothing would ever move or remove
// a ghost made from that record.
func TestAViewerArrivingAfterAHandoffSeesNoStaleGhost(t *testing.T) {
	t.Parallel()
	specs := []Stride{
		{Start: torus.Pos{X: 5000, Y: 4200}},                                  // zone-2's viewer, away from the walk
		{Start: torus.Pos{X: 4000, Y: 3950}, Step: torus.Pos{X: 4}, Max: 150}, // the walker, on to x 4600
	}
	c := zonetest.Start(t, zonetest.Config{Nodes: 3, Grid: clusterGrid(), Table: threeWays, Memory: true,
		Module: func(int, string) (zone.Module, error) { return &striders{specs: specs, accounts: 1}, nil }})
	z0, z2 := c.Node("zone-0"), c.Node("zone-2")
	if _, ok := z2.Runtime.Viewer(account.ID(1)); !ok {
		t.Fatal("the viewer is not on zone-2")
	}
	log := newSightLog()
	z2.Runtime.Attach(account.ID(1), log)
	walker, _ := zone.DerivedID(1)
	c.StepSync(155)
	on, at := simulatedOn(c, walker)
	if st := totalHandoffs(c); len(on) != 1 || on[0] != "zone-1" || st.Acked != 1 {
		t.Fatalf("the walker is simulated on %v at %v after handoffs %+v; want zone-1, after one handoff", on, at, st)
	}
	if ap, _ := log.count(uint64(walker)); ap != 0 {
		t.Fatalf("zone-2's viewer was shown the walker %d times before it looked", ap)
	}
	// The viewer turns to the chunk of the handoff (x 4128–4160), staying
	// on zone-2's side of y 4096.
	viewer, _ := zone.DerivedID(0)
	look := torus.Pos{X: 4140, Y: 4110}
	pos, _ := z2.Runtime.Positions().Get(viewer)
	pos.Pos = look
	z2.Runtime.Positions().MarkDirty(viewer)
	z2.Runtime.World().MarkMoved(viewer)
	c.StepSync(10)
	geo := z0.Runtime.Geometry()
	d := geo.ChunkDistance(geo.ChunkOf(look), geo.ChunkOf(at))
	if ap, va := log.count(uint64(walker)); ap != va || log.bad != nil {
		ghost, _ := z2.Runtime.ChunkOf(walker)
		t.Fatalf("zone-2's viewer is shown the walker (appears %d, vanishes %d; its ghost filed at %v), which stands at %v, %d chunks from the viewer (%v)",
			ap, va, ghost, at, d, log.bad)
	}
	if d <= 6 {
		t.Fatalf("the walker stands %d chunks from the viewer: the scene is not the one meant", d)
	}
}

// TestAGhostFollowsItsNewOwnerAfterTheOldOnesSnapshot: a viewer on zone-2
// watches a walker go from zone-0 into zone-1 and on. Then one of
// zone-0's batches to zone-2 is lost, and zone-2 resyncs every chunk it
// holds from zone-0: zone-0's snapshot of the chunk where it handed the
// walker over lists it as it was then, at its old epoch, for zone-2 saw
// it there. zone-2 holds it from zone-1 at the newer epoch and skips that
// entry; the ghost must stay zone-1's and go on following the walker.
func TestAGhostFollowsItsNewOwnerAfterTheOldOnesSnapshot(t *testing.T) {
	specs := []Stride{
		{Start: torus.Pos{X: 4140, Y: 4110}},                                      // zone-2's viewer, looking at the border of zone-0 and zone-1
		{Start: torus.Pos{X: 4000, Y: 3950}, Step: torus.Pos{X: 2}, Max: 120},     // the walker: handed to zone-1 past x 4128, on to x 4240
		{Start: torus.Pos{X: 4060, Y: 4000}, Step: torus.Pos{X: -0.25}, Max: 300}, // zone-0's, moving in the viewer's sight: a batch every tick
	}
	c := zonetest.Start(t, zonetest.Config{Nodes: 3, Grid: clusterGrid(), Table: threeWays,
		Module: func(int, string) (zone.Module, error) { return &striders{specs: specs, accounts: 1, dirty: true}, nil }})
	z1, z2 := c.Node("zone-1"), c.Node("zone-2")
	if _, ok := z2.Runtime.Viewer(account.ID(1)); !ok {
		t.Fatal("the viewer is not on zone-2")
	}
	cl := newClient()
	z2.Runtime.Attach(account.ID(1), cl)
	walker, _ := zone.DerivedID(1)
	c.StepSync(90)
	if on, at := simulatedOn(c, walker); len(on) != 1 || on[0] != "zone-1" || totalHandoffs(c).Acked != 1 {
		t.Fatalf("the walker is simulated on %v at %v after handoffs %+v; want zone-1, after one handoff", on, at, totalHandoffs(c))
	}
	if _, ok := cl.shown[uint64(walker)]; !ok || cl.bad != nil {
		t.Fatalf("zone-2's viewer is not shown the walker (%v)", cl.bad)
	}
	c.Net.Set("zone-0", "zone-2", string(link.StreamReplication), faulty.Rule{DropRate: 1})
	c.Step()
	if !zonetest.Poll(10*time.Second, func() bool { return c.Net.Injected("drop") > 0 }) {
		t.Fatal("no batch of zone-0's to zone-2 was dropped: the test shows nothing")
	}
	c.Net.Set("zone-0", "zone-2", string(link.StreamReplication), faulty.Rule{})
	c.StepSync(20)
	p, _ := z1.Runtime.Positions().Get(walker)
	shown, err := zone.DecodePos([]byte(cl.shown[uint64(walker)][1]))
	if err != nil || cl.bad != nil {
		t.Fatalf("zone-2's viewer holds no position of the walker: %v, %v", err, cl.bad)
	}
	if d := p.Pos.X - shown.X; d < 0 || d > 4 {
		t.Fatalf("zone-2's viewer is shown the walker at x %v; it stands at x %v on zone-1 (a ghost that stopped following its owner)", shown.X, p.Pos.X)
	}
	if st := z2.Runtime.ClusterStats(); st.Gaps == 0 {
		t.Fatalf("zone-2 saw no gap in zone-0's batches (%+v): the test shows nothing", st)
	}
}
