package zone_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/link/faulty"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// ---- the boot check ----

// TestBootCheckNamesTheComponent: a component registered with neither a
// handoff codec nor the Local mark, or registered on the ecs world behind
// the runtime's back, stops the node at boot with ErrNoCodec naming it.
func TestBootCheckNamesTheComponent(t *testing.T) {
	type Forgotten struct{ N int32 }
	cases := []struct {
		name  string
		setup func(r *zone.Runtime) error
	}{
		{"neither codec nor mark", func(r *zone.Runtime) error {
			_, err := zone.Register(r, zone.Spec[Forgotten]{Name: "test.forgotten"})
			return err
		}},
		{"both codec and mark", func(r *zone.Runtime) error {
			_, err := zone.Register(r, zone.Spec[Forgotten]{Name: "test.forgotten", Handoff: zone.FixedCodec[Forgotten](), Local: true})
			return err
		}},
		{"behind the runtime's back", func(r *zone.Runtime) error {
			_, err := ecs.Register[Forgotten](r.World(), ecs.ComponentSpec{Name: "test.forgotten"})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := zone.New(zone.Config{Grid: clusterGrid(), Clock: clock.NewFake(fakeBoot)}, moduleFunc(tc.setup))
			if !errors.Is(err, zone.ErrNoCodec) || !strings.Contains(err.Error(), "test.forgotten") {
				t.Fatalf("zone.New = %v, want ErrNoCodec naming test.forgotten", err)
			}
		})
	}
}

// TestModulesPassTheBootCheck: the reference game and the example module
// give every component they register a handoff codec or the Local mark,
// and a snapshot of each of their entities names only components with a
// codec.
func TestModulesPassTheBootCheck(t *testing.T) {
	gm, err := game.NewModule(game.Config{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	wm, err := wander.New(wander.Config{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	gc := game.Config{Seed: 3}.RuntimeConfig()
	gc.Clock = clock.NewFake(fakeBoot)
	configs := map[string]zone.Config{"game": gc, "wander": {Grid: clusterGrid(), Clock: clock.NewFake(fakeBoot)}}
	for name, m := range map[string]zone.Module{"game": gm, "wander": wm} {
		r, err := zone.New(configs[name], m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for range 40 {
			r.Step()
		}
		n := 0
		r.Positions().Each(func(id ecs.ID, _ *zone.Position) {
			s, err := r.HandoffSnapshot(id)
			if err != nil {
				t.Fatalf("%s: entity %d: %v", name, id, err)
			}
			if len(s.Components) < 2 {
				t.Fatalf("%s: entity %d's snapshot holds %d components", name, id, len(s.Components))
			}
			n++
		})
		if n == 0 {
			t.Fatalf("%s: no entity to snapshot", name)
		}
		_ = r.Close()
	}
}

type moduleFunc func(r *zone.Runtime) error

func (f moduleFunc) Setup(r *zone.Runtime) error { return f(r) }

// ---- a module of pacing entities ----

// Pace moves an entity back and forth around Centre along X (along Y if
// AlongY): Centre.X + Amp·sin(2π·Steps/Period); and the other coordinate
// drifts by Drift metres a step, so that no two steps stand at one
// position and a client can tell from a position which step it is.
type Pace struct {
	Centre torus.Pos
	Amp    float64
	Period uint32
	Steps  uint32
	AlongY bool
	Drift  float64
}

// at is where s stands after steps steps.
func (s Pace) at(steps uint32) torus.Pos {
	off := s.Amp * math.Sin(2*math.Pi*float64(steps)/float64(max(s.Period, 1)))
	drift := s.Drift * float64(steps)
	if s.AlongY {
		return torus.Pos{X: s.Centre.X + drift, Y: s.Centre.Y + off}
	}
	return torus.Pos{X: s.Centre.X + off, Y: s.Centre.Y + drift}
}

// stepOf is the step a position of s stands at, from its drift.
func (s Pace) stepOf(p torus.Pos) float64 {
	if s.AlongY {
		return (p.X - s.Centre.X) / s.Drift
	}
	return (p.Y - s.Centre.Y) / s.Drift
}

// pacers is a test module: entity i (id zone.DerivedID(i)) paces as
// spec[i] says, or stands still (Amp 0); the first accounts entities view
// from their own entity.
type pacers struct {
	specs    []Pace
	accounts int
	r        *zone.Runtime
	pace     *ecs.Store[Pace]
	q        *ecs.Query2[zone.Position, Pace]
}

func (m *pacers) Setup(r *zone.Runtime) error {
	m.r = r
	var err error
	m.pace, m.q, err = setupMovers(r, "pace", m.specs, func(s Pace) torus.Pos { return s.Centre }, m.accounts, m.run)
	return err
}

// setupMovers is the Setup of a test module whose entity i (id
// zone.DerivedID(i)) carries specs[i] as its one component, named
// "test."+name and handed over by FixedCodec, and starts at at(specs[i]):
// it registers the component and the system run (over the simulated
// entities with both), and creates the entities standing in this node's
// regions; the first accounts entities view from their own entity.
func setupMovers[T any](r *zone.Runtime, name string, specs []T, at func(T) torus.Pos, accounts int, run func(*ecs.World, ecs.Tick)) (*ecs.Store[T], *ecs.Query2[zone.Position, T], error) {
	if err := r.SyncPosition(1); err != nil {
		return nil, nil, err
	}
	store, err := zone.Register(r, zone.Spec[T]{Name: "test." + name, Handoff: zone.FixedCodec[T]()})
	if err != nil {
		return nil, nil, err
	}
	q := zone.Query2(r, r.Positions(), store)
	if err := r.AddSystem(ecs.System{Name: name, Run: run}); err != nil {
		return nil, nil, err
	}
	for i, s := range specs {
		start := at(s)
		if r.Table().OwnerOf(start) != r.Name() {
			continue
		}
		id, _ := zone.DerivedID(uint64(i))
		if err := errors.Join(
			r.World().CreateEntity(id),
			r.Positions().Add(id, zone.Position{Pos: start}),
			store.Add(id, s),
		); err != nil {
			return nil, nil, err
		}
		r.World().MarkMoved(id)
		if i < accounts {
			a := account.ID(i + 1)
			if err := r.SetOwner(id, a); err != nil {
				return nil, nil, err
			}
			r.SetViewer(a, id)
			r.SetAnchor(id)
		}
	}
	return store, q, nil
}

func (m *pacers) run(w *ecs.World, t ecs.Tick) {
	geo := m.r.Geometry()
	m.q.Each(func(id ecs.ID, p *zone.Position, s *Pace) {
		if s.Amp == 0 {
			return
		}
		s.Steps++
		p.Pos = geo.Normalise(s.at(s.Steps))
		m.r.Positions().MarkDirty(id)
	})
}

// sightLog is a client that counts, per entity, the appears and vanishes
// it was sent.
type sightLog struct {
	mu       sync.Mutex
	appears  map[uint64]int
	vanishes map[uint64]int
	bad      error
}

func newSightLog() *sightLog {
	return &sightLog{appears: map[uint64]int{}, vanishes: map[uint64]int{}}
}

func (s *sightLog) Deliver(_ uint64, frames [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := outbox.DecodeBatch(bytes.Join(frames, nil), func(m outbox.Message) error {
		switch m.Kind {
		case outbox.KindAppear:
			s.appears[m.Entity]++
		case outbox.KindVanish:
			s.vanishes[m.Entity]++
		}
		return nil
	})
	if err != nil && s.bad == nil {
		s.bad = err
	}
}

func (s *sightLog) count(e uint64) (appears, vanishes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appears[e], s.vanishes[e]
}

// threeWays gives the south-west quarter of the torus to zone-0, the
// south-east to zone-1 and the north half to zone-2: the three meet at
// (4096, 4096).
func threeWays(grid cells.Grid, names []string) (*cells.Table, error) {
	owners := make([]string, grid.Regions())
	for r := range owners {
		x0, y0, _, _ := grid.Bounds(cells.RegionID(r))
		switch {
		case y0 >= 4096:
			owners[r] = names[2]
		case x0 >= 4096:
			owners[r] = names[1]
		default:
			owners[r] = names[0]
		}
	}
	return cells.NewTable(grid, 1, owners)
}

func totalHandoffs(c *zonetest.Cluster) zone.HandoffStats {
	var total zone.HandoffStats
	for _, n := range c.Nodes {
		total = total.Plus(n.Runtime.HandoffStats())
	}
	return total
}

// attachViewers attaches one sightLog per account on the node that
// simulates its viewer.
func attachViewers(t *testing.T, c *zonetest.Cluster, accounts int) []*sightLog {
	t.Helper()
	logs := make([]*sightLog, accounts+1)
	for a := 1; a <= accounts; a++ {
		logs[a] = newSightLog()
		for _, n := range c.Nodes {
			if _, ok := n.Runtime.Viewer(account.ID(a)); ok {
				n.Runtime.Attach(account.ID(a), logs[a])
			}
		}
	}
	return logs
}

// TestNoBlinkOnThreeNodes: an entity paces back and forth over the border
// of zone-0 and zone-1, 60 m each way (past the handoff margin on both
// sides), near where zone-2's territory meets both; a viewer on each of
// the three nodes keeps it in sight all along. Each of the three clients
// is shown it exactly once: no vanish, no second appear, through every
// handoff.
func TestNoBlinkOnThreeNodes(t *testing.T) {
	m := func(int, string) (zone.Module, error) {
		return &pacers{accounts: 3, specs: []Pace{
			{Centre: torus.Pos{X: 4000, Y: 3996}},                        // viewer on zone-0
			{Centre: torus.Pos{X: 4190, Y: 3996}},                        // viewer on zone-1
			{Centre: torus.Pos{X: 4096, Y: 4150}},                        // viewer on zone-2
			{Centre: torus.Pos{X: 4095.5, Y: 3996}, Amp: 60, Period: 40}, // the pacer
		}}, nil
	}
	c := zonetest.Start(t, zonetest.Config{Nodes: 3, Grid: clusterGrid(), Table: threeWays, Module: m})
	logs := attachViewers(t, c, 3)
	pacer, _ := zone.DerivedID(3)
	for range 400 {
		c.StepSync(1)
	}
	st := totalHandoffs(c)
	if st.Acked < 15 || st.Refused+st.Aborted+st.Stale > 0 {
		t.Fatalf("handoffs %+v: want at least 15 acked, none refused, aborted or stale", st)
	}
	// Every ack is in the latency histogram; in lockstep an ack comes
	// back within a few ticks, never at the abort deadline.
	inHist := 0
	for _, n := range st.AckTicks {
		inHist += n
	}
	if p99, ok := st.AckQuantile(0.99); inHist != st.Acked || !ok || p99 < 1 || p99 >= zone.AckTickBuckets-1 {
		t.Fatalf("ack latency: %d in the histogram for %d acked, p99 %d ticks (ok %v): want all, between 1 and %d", inHist, st.Acked, p99, ok, zone.AckTickBuckets-2)
	}
	for a := 1; a <= 3; a++ {
		if logs[a].bad != nil {
			t.Fatalf("account %d: %v", a, logs[a].bad)
		}
		if ap, va := logs[a].count(uint64(pacer)); ap != 1 || va != 0 {
			t.Errorf("account %d (viewer on %s) was shown the pacer %d times and told it vanished %d times over %d handoffs; want once and never",
				a, c.Nodes[a-1].Name, ap, va, st.Acked)
		}
	}
	t.Logf("handoffs %+v", st)
}

// TestPacingOnABorderHandsOverOncePerMarginCrossing: a player pacing ±20
// m on a border for a minute (1,200 ticks) never passes the handoff
// margin, so it is never handed over; one pacing ±45 m passes it on
// alternate sides, and is handed over at most once per crossing to the far
// side of the margin (and at least once fewer).
func TestPacingOnABorderHandsOverOncePerMarginCrossing(t *testing.T) {
	t.Parallel()
	margin := cells.DefaultBands(mustGrid(t, clusterGrid())).HandoffMargin
	for _, amp := range []float64{20, 45} {
		t.Run(fmt.Sprintf("±%vm", amp), func(t *testing.T) {
			spec := Pace{Centre: torus.Pos{X: 4095.5, Y: 2000}, Amp: amp, Period: 200}
			m := func(int, string) (zone.Module, error) { return &pacers{specs: []Pace{spec}}, nil }
			c := zonetest.Start(t, zonetest.Config{Nodes: 3, Grid: clusterGrid(), Table: threeWays, Module: m, Memory: true})
			// Crossings of the margin to the far side: the side the pacer
			// last stood beyond the margin on changes.
			side, crossings := 0, 0
			for step := 1; step <= 1200; step++ {
				c.StepSync(1)
				x := spec.Centre.X + spec.Amp*math.Sin(2*math.Pi*float64(step)/float64(spec.Period))
				s := 0
				switch {
				case x > 4096+margin:
					s = 1
				case x < 4096-margin:
					s = -1
				}
				if s != 0 && s != side {
					if side != 0 || s == 1 { // it starts on zone-0's side
						crossings++
					}
					side = s
				}
			}
			st := totalHandoffs(c)
			if st.Acked > crossings || st.Acked < crossings-1 || st.Refused+st.Aborted+st.Stale > 0 {
				t.Fatalf("handoffs %+v for %d crossings of the margin", st, crossings)
			}
			t.Logf("%d handoffs for %d crossings of the margin (%v m)", st.Acked, crossings, margin)
		})
	}
}

func mustGrid(t *testing.T, cfg cells.GridConfig) cells.Grid {
	t.Helper()
	g, err := cells.NewGrid(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// ---- many handoffs under link faults ----

// intentLog records every intent applied, on any node, by its number.
type intentLog struct {
	mu      sync.Mutex
	applied map[int64][]string
}

func (l *intentLog) add(node string, n int64) {
	l.mu.Lock()
	l.applied[n] = append(l.applied[n], node)
	l.mu.Unlock()
}

// countingPacers are pacers that also apply intents: each is recorded, by
// number, with the node that applied it.
type countingPacers struct {
	*pacers
	log *intentLog
}

func (m countingPacers) Setup(r *zone.Runtime) error {
	if err := m.pacers.Setup(r); err != nil {
		return err
	}
	r.OnIntent(func(_ *ecs.World, in zone.Intent) { m.log.add(r.Name(), in.Amount) })
	return nil
}

// orderLog is a client that checks, for every pacer it is shown, that the
// positions it gets never go back in the pacer's steps (no stale update
// was applied, across sightings too), and that it is never shown an
// entity twice without a vanish.
type orderLog struct {
	mu    sync.Mutex
	specs []Pace
	shown map[uint64]bool
	step  map[uint64]float64
	n     int
	bad   error
}

func (o *orderLog) Deliver(tick uint64, frames [][]byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	err := outbox.DecodeBatch(bytes.Join(frames, nil), func(m outbox.Message) error {
		switch m.Kind {
		case outbox.KindAppear:
			if o.shown[m.Entity] {
				return fmt.Errorf("tick %d: entity %d appeared again without a vanish", tick, m.Entity)
			}
			o.shown[m.Entity] = true
		case outbox.KindVanish:
			delete(o.shown, m.Entity)
		case outbox.KindComponent:
			i := int(m.Entity) - 1
			if m.Component != 1 || i < 0 || i >= len(o.specs) || o.specs[i].Drift == 0 {
				return nil
			}
			p, err := zone.DecodePos(m.Payload)
			if err != nil {
				return err
			}
			st := o.specs[i].stepOf(p)
			if last, ok := o.step[m.Entity]; ok && st < last-0.5 {
				return fmt.Errorf("tick %d: entity %d shown at its step %.1f after its step %.1f: a stale update was applied", tick, m.Entity, st, last)
			}
			o.step[m.Entity] = max(st, o.step[m.Entity])
			o.n++
		}
		return nil
	})
	if err != nil && o.bad == nil {
		o.bad = err
	}
}

// fourWays gives each quarter of the torus to one of four nodes: they meet
// at (4096, 4096).
func fourWays(grid cells.Grid, names []string) (*cells.Table, error) {
	owners := make([]string, grid.Regions())
	for r := range owners {
		x0, y0, _, _ := grid.Bounds(cells.RegionID(r))
		i := 0
		if x0 >= 4096 {
			i++
		}
		if y0 >= 4096 {
			i += 2
		}
		owners[r] = names[i]
	}
	return cells.NewTable(grid, 1, owners)
}

// checkOneWriter fails unless each of ids is held by a node, simulated on
// at most one, and that one holds the highest epoch: the others holding
// it are sources of handoffs still waiting for an answer (a chain of them
// when a cut holds the answers back), frozen.
func checkOneWriter(t *testing.T, c *zonetest.Cluster, ids []ecs.ID, tick int) {
	t.Helper()
	for _, id := range ids {
		var held, simulated []string
		var top uint64
		for _, n := range c.Nodes {
			r := n.Runtime
			if e, ok := r.Epoch(id); ok {
				held = append(held, fmt.Sprintf("%s@%d", n.Name, e))
				top = max(top, e)
			}
		}
		for _, n := range c.Nodes {
			r := n.Runtime
			if r.Simulated(id) {
				simulated = append(simulated, n.Name)
				if e, _ := r.Epoch(id); e != top {
					t.Fatalf("tick %d: entity %d is simulated on %s at epoch %d, below the %d another node holds (%v)", tick, id, n.Name, e, top, held)
				}
			}
		}
		if len(held) < 1 || len(simulated) > 1 {
			t.Fatalf("tick %d: entity %d is held on %v and simulated on %v", tick, id, held, simulated)
		}
	}
}

// TestManyHandoffsUnderLinkFaults: 1,000 handoffs (500 with -short), in
// 80 ticks at least, of 200 entities pacing over the borders where four
// nodes meet, with every stream between every two nodes dropping,
// duplicating and delaying messages, and in every 80 ticks a random pair
// of nodes cut apart for 10 ticks and another for 50 (longer than a
// source waits for an answer before it asks again) — seeded:
// SHARDWISE_SEED replays it. At every tick each entity is held
// by one node (two in flight) and simulated on at most one. No client, on
// any node, is shown a pacer at an older step than one it was shown
// before (every stale message is dropped), nor an entity twice without a
// vanish. Every intent, sent each tick from a node that knows its target
// (as a ghost or its own), is applied exactly once, wherever the target
// went meanwhile.
func TestManyHandoffsUnderLinkFaults(t *testing.T) {
	seed := testseed.Seed(t)
	// 1,000 handoffs come in about 100-120 ticks; the test runs one
	// whole cycle of cuts (80 ticks) at least. The properties at every
	// tick under faults are the simulation's too (zone/zonesim's
	// TestSimulation, hundreds of seeds; the intents' exactly-once count
	// at this test's density, 400 wanderers and 20 intents a tick, is
	// TestIntentsExactlyOnce's): this test is their smoke over the real
	// link, its drops and resends on both streams. It ran 10,000
	// handoffs (about 390 ticks) of 400 pacers before, then 2,000 of 400
	// (about 5,000 in two cycles, 160 ticks: one cycle let the guard at
	// the end fail, when its long cut fell between diagonal nodes; it
	// joins bordering ones now, below); docs/decisions.md.
	want := 1000
	if testing.Short() {
		want = 500
	}
	const nPacers, intentsPerTick = 200, 10 // the density of 400 and 20
	rnd := rand.New(rand.NewPCG(seed, 0x1a7e))
	const viewers = 8
	var specs []Pace
	for i := range viewers { // two viewers on each node, around the corner
		specs = append(specs, Pace{Centre: torus.Pos{X: 4096 + float64(i%2*2-1)*80, Y: 4096 + float64(i/2%2*2-1)*80 + float64(i/4)*10}})
	}
	for range nPacers {
		specs = append(specs, Pace{
			Centre: torus.Pos{X: 4096 + (rnd.Float64()-0.5)*160, Y: 4096 + (rnd.Float64()-0.5)*160},
			Amp:    50 + rnd.Float64()*30, Period: 16 + uint32(rnd.IntN(16)),
			Steps: uint32(rnd.IntN(32)), AlongY: rnd.IntN(2) == 0, Drift: 0.05,
		})
	}
	// Centre each pacer on a border, so that it crosses the margin both ways.
	for i := viewers; i < len(specs); i++ {
		if specs[i].AlongY {
			specs[i].Centre.Y = 4095.5
		} else {
			specs[i].Centre.X = 4095.5
		}
	}
	log := &intentLog{applied: map[int64][]string{}}
	c := zonetest.Start(t, zonetest.Config{Seed: seed, Grid: clusterGrid(), Table: fourWays,
		Module: func(int, string) (zone.Module, error) {
			return countingPacers{pacers: &pacers{specs: specs, accounts: viewers}, log: log}, nil
		}})
	var ids []ecs.ID
	for i := range specs {
		id, _ := zone.DerivedID(uint64(i))
		ids = append(ids, id)
	}
	clients := make([]*orderLog, viewers+1)
	for a := 1; a <= viewers; a++ {
		clients[a] = &orderLog{specs: specs, shown: map[uint64]bool{}, step: map[uint64]float64{}}
		for _, n := range c.Nodes {
			if _, ok := n.Runtime.Viewer(account.ID(a)); ok {
				n.Runtime.Attach(account.ID(a), clients[a])
			}
		}
	}
	setRule := func(r faulty.Rule) {
		for _, a := range c.Nodes {
			for _, b := range c.Nodes {
				if a != b {
					c.Net.Set(a.Name, b.Name, "", r)
				}
			}
		}
	}
	setRule(faulty.Rule{DropRate: 0.05, DuplicateRate: 0.05, Delay: 2 * time.Millisecond})
	var sent int64
	type pair struct{ a, b string }
	randomPair := func() pair {
		i := rnd.IntN(len(c.Nodes))
		j := (i + 1 + rnd.IntN(len(c.Nodes)-1)) % len(c.Nodes)
		return pair{c.Nodes[i].Name, c.Nodes[j].Name}
	}
	// The long cut is between two nodes whose quadrants share a border
	// (fourWays: node i's neighbours are i^1 and i^2), so that handoffs
	// wait across it past their timeout: a diagonal pair meets only at
	// the corner, and with both cycles' long cuts diagonal no handoff
	// waited (Asked 0: the guard at the end failed on seed
	// 15437389966746306404 with 200 pacers).
	borderingPair := func() pair {
		i := rnd.IntN(len(c.Nodes))
		j := i ^ (1 << rnd.IntN(2))
		return pair{c.Nodes[i].Name, c.Nodes[j].Name}
	}
	var short, long pair
	tick := 0
	step := func(limit time.Duration) {
		c.Step()
		settle(c, limit)
		tick++
		checkOneWriter(t, c, ids, tick)
		for a := 1; a <= viewers; a++ {
			clients[a].mu.Lock()
			bad := clients[a].bad
			clients[a].mu.Unlock()
			if bad != nil {
				t.Fatalf("account %d: %v", a, bad)
			}
		}
	}
	// At least one whole cycle of cuts, so that handoffs wait past their
	// timeout even when the handoffs wanted come sooner (five seeds:
	// 50-88 asked).
	for totalHandoffs(c).Acked < want || tick < 80 {
		if tick > want {
			t.Fatalf("only %d handoffs in %d ticks", totalHandoffs(c).Acked, tick)
		}
		switch tick % 80 {
		case 0:
			short = randomPair()
			c.Net.Cut(short.a, short.b)
		case 10:
			c.Net.Heal(short.a, short.b)
		case 20:
			long = borderingPair()
			c.Net.Cut(long.a, long.b)
			t.Logf("tick %d: %s and %s cut apart for 50 ticks", tick, long.a, long.b)
		case 70:
			c.Net.Heal(long.a, long.b)
		}
		for range intentsPerTick {
			if sendFromAnyNode(c, rnd, ids[rnd.IntN(len(ids))], sent+1) {
				sent++
			}
		}
		step(5 * time.Millisecond)
	}
	faultTicks := tick

	// Heal; then, without faults, until every intent is applied (or 200
	// ticks pass). A batch dropped last is never resent: no Sync.
	c.Net.Heal(short.a, short.b)
	c.Net.Heal(long.a, long.b)
	setRule(faulty.Rule{})
	missing := func() int {
		log.mu.Lock()
		defer log.mu.Unlock()
		return int(sent) - len(log.applied)
	}
	for i := 0; i < 200 && missing() > 0; i++ {
		step(200 * time.Millisecond)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for n := int64(1); n <= sent; n++ {
		if nodes := log.applied[n]; len(nodes) != 1 {
			t.Errorf("intent %d was applied %d times (on %v)", n, len(nodes), nodes)
		}
	}
	var stale, dropped, shown int
	for _, n := range c.Nodes {
		cs := n.Runtime.ClusterStats()
		stale += cs.Stale
		dropped += cs.IntentsDropped
		if cs.IntentsDropped > 0 {
			t.Logf("%s dropped %d intents", n.Name, cs.IntentsDropped)
		}
	}
	for a := 1; a <= viewers; a++ {
		shown += clients[a].n
	}
	st := totalHandoffs(c)
	t.Logf("%d ticks under faults, %d after; handoffs %+v; %d intents; %d positions shown; %d stale messages dropped; faults injected: %d drops, %d duplicates, %d delays",
		faultTicks, tick-faultTicks, st, sent, shown, stale, c.Net.Injected("drop"), c.Net.Injected("duplicate"), c.Net.Injected("delay"))
	if dropped > 0 {
		t.Errorf("%d intents dropped", dropped)
	}
	if st.Asked == 0 || shown == 0 {
		t.Errorf("no handoff waited past its timeout, or no client was shown a pacer: the faults exercised too little")
	}
}

// sendFromAnyNode sends intent number n to id from a random node that
// indexes it (simulates it, or holds its ghost); from none if none does.
func sendFromAnyNode(c *zonetest.Cluster, rnd *rand.Rand, id ecs.ID, n int64) bool {
	for _, i := range rnd.Perm(len(c.Nodes)) {
		r := c.Nodes[i].Runtime
		if _, ok := r.ChunkOf(id); ok {
			r.Send(zone.Intent{Kind: 1, Target: id, Amount: n})
			return true
		}
	}
	return false
}

// TestRegionMoveUnderLoad: 1,000 entities stand in region (1, 1) of
// zone-0 while 200 pace over its borders, watched by viewers on all four
// nodes. A table that gives the region to zone-3 is applied while the
// world runs: zone-0 hands every entity of the region over (at most 128
// a tick, once zone-3 shows it holds the table). Every one ends simulated
// on zone-3; none is lost or duplicated at any tick; no client, anywhere,
// sees a standing entity vanish or appear again.
func TestRegionMoveUnderLoad(t *testing.T) {
	t.Parallel()
	seed := testseed.Seed(t)
	rnd := rand.New(rand.NewPCG(seed, 0x3e61))
	grid := mustGrid(t, clusterGrid())
	x0, y0, x1, y1 := grid.Bounds(grid.RegionOf(torus.Pos{X: 3000, Y: 3000}))
	const viewers = 8
	var specs []Pace
	for i := range viewers { // on every node, within sight of the region's south-east corner
		specs = append(specs, Pace{Centre: torus.Pos{X: x1 + float64(i%2*2-1)*60 + float64(i/4)*5, Y: y1 + float64(i/2%2*2-1)*60}})
	}
	standing := len(specs)
	for range 1000 {
		specs = append(specs, Pace{Centre: torus.Pos{X: x1 - 10 - rnd.Float64()*140, Y: y1 - 10 - rnd.Float64()*140}})
	}
	moving := len(specs)
	for range 200 {
		specs = append(specs, Pace{Centre: torus.Pos{X: x1 - 0.5, Y: y1 - 20 - rnd.Float64()*100},
			Amp: 60, Period: 30 + uint32(rnd.IntN(20)), Drift: 0.01})
	}
	c := zonetest.Start(t, zonetest.Config{Seed: seed, Grid: clusterGrid(), Table: fourWays, Memory: true,
		Module: func(int, string) (zone.Module, error) { return &pacers{specs: specs, accounts: viewers}, nil }})
	region := grid.RegionOf(torus.Pos{X: x0 + 1, Y: y0 + 1})
	if c.Nodes[0].Runtime.Table().Owner(region) != "zone-0" {
		t.Fatalf("region %d is %s's, not zone-0's", region, c.Nodes[0].Runtime.Table().Owner(region))
	}
	logs := attachViewers(t, c, viewers)
	var ids []ecs.ID
	for i := range specs {
		id, _ := zone.DerivedID(uint64(i))
		ids = append(ids, id)
	}
	c.StepSync(20)
	for a := 1; a <= viewers; a++ {
		for _, id := range ids[:moving] {
			if ap, va := logs[a].count(uint64(id)); ap > 1 || va > 0 {
				t.Fatalf("before the move: account %d was shown standing entity %d %d times and told it vanished %d times", a, id, ap, va)
			}
		}
	}

	next, err := c.Nodes[0].Runtime.Table().WithOwners(2, map[cells.RegionID]string{region: "zone-3"})
	if err != nil {
		t.Fatal(err)
	}
	c.Apply(next)
	moved := func() int {
		n := 0
		for _, id := range ids[standing:moving] {
			if c.Node("zone-3").Runtime.Simulated(id) {
				n++
			}
		}
		return n
	}
	ticks := 0
	for ; moved() < moving-standing; ticks++ {
		if ticks > 100 {
			t.Fatalf("after %d ticks %d of %d standing entities are on zone-3", ticks, moved(), moving-standing)
		}
		c.StepSync(1)
		checkOneWriter(t, c, ids, ticks)
	}
	c.StepSync(10)
	checkOneWriter(t, c, ids, ticks+10)
	for a := 1; a <= viewers; a++ {
		if logs[a].bad != nil {
			t.Fatalf("account %d: %v", a, logs[a].bad)
		}
		for _, id := range ids[:moving] {
			if ap, va := logs[a].count(uint64(id)); ap > 1 || va > 0 {
				t.Fatalf("account %d was shown standing entity %d %d times and told it vanished %d times", a, id, ap, va)
			}
		}
	}
	seen := 0
	for _, id := range ids[standing:moving] {
		if ap, _ := logs[1].count(uint64(id)); ap == 1 {
			seen++
		}
	}
	if seen == 0 {
		t.Fatal("account 1 was shown no entity of the moved region: the test watches nothing")
	}
	t.Logf("the region's %d entities moved in %d ticks; account 1 watched %d of them; handoffs %+v", moving-standing, ticks, seen, totalHandoffs(c))
}

// TestARegionMoveShowsWalkersNoBlink: region (1, 1) moves from zone-0 to
// zone-3 while walkers near its corner, watched by a viewer on each node,
// cross a chunk border. East of it the chunk is within zone-3's old
// margin, so the other nodes already receive it from zone-3; west of it
// they do not until their subscriptions are re-planned for the new
// table, a share of chunks a tick. A walker is handed over, to zone-3,
// as it steps west, or steps west once handed. No viewer, on any node, is
// ever told a walker vanished: each is shown every walker once. In step,
// every node follows at once; lagging, zone-1 and zone-2 take no message
// and re-plan nothing for the move's first ticks (a pause, a slow watch).
func TestARegionMoveShowsWalkersNoBlink(t *testing.T) {
	for _, lag := range []int{0, 8} {
		name := "in step"
		if lag > 0 {
			name = fmt.Sprintf("zone-1 and zone-2 %d ticks behind", lag)
		}
		t.Run(name, func(t *testing.T) { regionMoveWithWalkers(t, lag) })
	}
}

func regionMoveWithWalkers(t *testing.T, lag int) {
	grid := mustGrid(t, clusterGrid())
	_, _, x1, y1 := grid.Bounds(grid.RegionOf(torus.Pos{X: 3000, Y: 3000}))
	specs := []Pace{ // a viewer on each node, around the corner
		{Centre: torus.Pos{X: x1 - 60, Y: y1 - 60}},
		{Centre: torus.Pos{X: x1 + 60, Y: y1 - 60}},
		{Centre: torus.Pos{X: x1 - 60, Y: y1 + 60}},
		{Centre: torus.Pos{X: x1 + 60, Y: y1 + 60}},
	}
	viewers := len(specs)
	// The walkers pace over x = x1-64 (the chunk border) just south of
	// the region's north edge; at every tick one of them steps west over
	// it.
	for i := range 24 {
		specs = append(specs, Pace{Centre: torus.Pos{X: x1 - 64, Y: y1 - 4 - float64(i)}, Amp: 12, Period: 8, Steps: uint32(i)})
	}
	c := zonetest.Start(t, zonetest.Config{Grid: clusterGrid(), Table: fourWays,
		Module: func(int, string) (zone.Module, error) { return &pacers{specs: specs, accounts: viewers}, nil }})
	region := grid.RegionOf(torus.Pos{X: 3000, Y: 3000})
	logs := attachViewers(t, c, viewers)
	c.StepSync(20)
	walkers := make([]uint64, 0, len(specs)-viewers)
	for i := viewers; i < len(specs); i++ {
		id, _ := zone.DerivedID(uint64(i))
		walkers = append(walkers, uint64(id))
	}
	check := func(when string) {
		t.Helper()
		for a := 1; a <= viewers; a++ {
			if logs[a].bad != nil {
				t.Fatalf("account %d: %v", a, logs[a].bad)
			}
			for _, id := range walkers {
				if ap, va := logs[a].count(id); ap != 1 || va != 0 {
					t.Fatalf("%s: account %d (viewer on %s) was shown walker %d %d times and told it vanished %d times; want once and never",
						when, a, c.Nodes[a-1].Name, id, ap, va)
				}
			}
		}
	}
	check("before the move")

	next, err := c.Nodes[0].Runtime.Table().WithOwners(2, map[cells.RegionID]string{region: "zone-3"})
	if err != nil {
		t.Fatal(err)
	}
	// On zone-3 the last update of a walker zone-0 hands over is applied
	// before its transfer (both leave in one tick, on two streams).
	c.Node("zone-3").Runtime.ReplicationFirst()
	c.Apply(next)
	for range lag {
		for _, r := range []*zone.Runtime{c.Node("zone-0").Runtime, c.Node("zone-3").Runtime} {
			r.Step()
		}
		c.Sync(10 * time.Second)
	}
	c.StepSync(40)
	onZone3 := 0
	for _, id := range walkers {
		if c.Node("zone-3").Runtime.Simulated(ecs.ID(id)) {
			onZone3++
		}
	}
	if onZone3 != len(walkers) {
		t.Fatalf("%d of %d walkers are on zone-3 after the move", onZone3, len(walkers))
	}
	check("after the move")
	held, applied := 0, 0
	for _, n := range c.Nodes {
		st := n.Runtime.ClusterStats()
		held, applied = held+st.VanishesHeld, applied+st.VanishesHeldApplied
	}
	if held == 0 {
		t.Errorf("no vanish was held: the walkers never stepped into a chunk still being subscribed, so the test shows nothing")
	}
	t.Logf("handoffs %+v; vanishes held %d, applied after all %d", totalHandoffs(c), held, applied)
}
