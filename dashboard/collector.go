package dashboard

import (
	"cmp"
	"context"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonehost"
)

// EconStats are an economy node's numbers, as its Stats reports them.
type EconStats = econ.Stats

// CollectorConfig configures a Collector. Zero fields take the defaults
// documented on them.
type CollectorConfig struct {
	// Kinds names what an entity is ("player", "pet", "mob", "den": the
	// page draws each distinctly); game.KindOf for the reference game. It
	// is called on the runtime's goroutine during Zone. nil: every entity
	// is "entity".
	Kinds func(rt *zone.Runtime, id ecs.ID) string
	// Window is how far back the tick percentiles look. Default 5s.
	Window time.Duration
	// SampleEvery is how often a node's entities are sampled (positions,
	// kinds, handoffs seen, link rates): the rest of a report is kept
	// every tick, it costs nothing. Default 250ms (4 a second).
	SampleEvery time.Duration
	// KeepHandoffs is how long a handoff seen stays in the snapshot (the
	// page flashes it while it is young). Default 10s.
	KeepHandoffs time.Duration
	// MaxHandoffs caps the handoffs kept (the newest stay). Default 500.
	MaxHandoffs int
	// MaxEvents caps the events kept (the newest stay). Default 100.
	MaxEvents int
	// Stale is how long a node may go without a report before the
	// snapshot marks it stale (stopped, killed, fenced). Default 2s.
	Stale time.Duration
	// Clock times samples, windows and rates. Default clock.Real().
	Clock clock.Clock
	// Logger; default discard.
	Logger *slog.Logger
}

// Validate reports the first field out of range, by its Go name.
func (c CollectorConfig) Validate() error {
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"Window", c.Window}, {"SampleEvery", c.SampleEvery}, {"KeepHandoffs", c.KeepHandoffs}, {"Stale", c.Stale}} {
		if d.v < 0 {
			return errcode.Config(d.field, d.v.String(), "must not be negative (0 is the default)")
		}
	}
	if c.MaxHandoffs < 0 {
		return errcode.Config("MaxHandoffs", c.MaxHandoffs, "must not be negative (0 is the default)")
	}
	if c.MaxEvents < 0 {
		return errcode.Config("MaxEvents", c.MaxEvents, "must not be negative (0 is the default)")
	}
	return nil
}

// WithDefaults fills the zero fields.
func (c CollectorConfig) WithDefaults() CollectorConfig {
	if c.Kinds == nil {
		c.Kinds = func(*zone.Runtime, ecs.ID) string { return "entity" }
	}
	if c.Window == 0 {
		c.Window = 5 * time.Second
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = 250 * time.Millisecond
	}
	if c.KeepHandoffs == 0 {
		c.KeepHandoffs = 10 * time.Second
	}
	if c.MaxHandoffs == 0 {
		c.MaxHandoffs = 500
	}
	if c.MaxEvents == 0 {
		c.MaxEvents = 100
	}
	if c.Stale == 0 {
		c.Stale = 2 * time.Second
	}
	c.Clock = clock.OrReal(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Collector gathers what the page shows: every zone node's reports and
// entity samples, the region table, the handoffs it saw, the economy
// nodes' stats and the announced events. It is safe for concurrent use:
// each zone host calls Zone from its own goroutine.
//
// A handoff is seen, not told: an entity one node's sample held and a
// later sample of another node holds has changed hands (from, to, where,
// when). Entities frozen in a handoff and simulation ghosts are not in a
// sample, so no entity is in two nodes' samples of the same moment.
type Collector struct {
	cfg CollectorConfig

	mu      sync.Mutex
	version uint64
	nodes   map[string]*nodeState
	table   *cells.Table // the newest any node holds
	grid    cells.Grid
	bands   cells.Bands
	hasGrid bool
	// seen is where each sampled entity was last seen; an entry whose
	// node's later sample lacked it is kept for KeepHandoffs (its new
	// owner may not have been sampled yet) and then dropped.
	seen     map[ecs.ID]sighting
	gone     []goneEntry
	handoffs []Handoff
	// changes are the regions that changed owner between two tables, in
	// the last KeepHandoffs.
	changes []RegionChange
	events  []Event
	econ    map[string]*econState
}

type sighting struct {
	node string
	gone bool
}

type goneEntry struct {
	id   ecs.ID
	node string
	at   time.Time
}

type tickSample struct {
	at   time.Time
	took time.Duration
}

type nodeState struct {
	name       string
	ticks      []tickSample // within Window, oldest first
	rep        zonehost.HostReport
	simGhosts  int
	lastReport time.Time
	// down is why the node was declared down (NodeDown), "" while up.
	down string

	lastSample time.Time
	entities   []Entity
	ids        map[ecs.ID]struct{}
	linkIn     uint64
	linkOut    uint64
	inRate     float64
	outRate    float64
	seenIn     int
	seenOut    int
}

type econState struct {
	stats     EconStats
	at        time.Time
	prev      EconStats
	prevAt    time.Time
	movements float64 // per second, between the last two pushes
}

// NewCollector returns a collector. cfg must be valid (Validate):
// NewCollector panics otherwise, a programming error like a nil map.
func NewCollector(cfg CollectorConfig) *Collector {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return &Collector{
		cfg:   cfg.WithDefaults(),
		nodes: make(map[string]*nodeState),
		seen:  make(map[ecs.ID]sighting),
		econ:  make(map[string]*econState),
	}
}

// Zone takes one tick's report of a zone node. Call it from the host's
// OnTick, on the runtime's goroutine: r.Runtime is read only during the
// call. Every call keeps the report's numbers and the tick's time; once
// per SampleEvery it also samples the node's simulated entities (a walk
// over its positions, off the collector's lock), the table it holds and
// its link counters.
func (c *Collector) Zone(r zonehost.HostReport) {
	if r.Runtime == nil {
		return
	}
	rt := r.Runtime
	name := rt.Name()
	now := c.cfg.Clock.Now()
	simGhosts := rt.SimGhosts()

	c.mu.Lock()
	ns := c.nodes[name]
	if ns == nil {
		ns = &nodeState{name: name, ids: map[ecs.ID]struct{}{}}
		c.nodes[name] = ns
	}
	if ns.down != "" {
		// A node declared down is dead to the page: a last tick it still
		// runs as it stops is not shown.
		c.mu.Unlock()
		return
	}
	ns.ticks = append(ns.ticks, tickSample{at: now, took: r.Took})
	cut := 0
	for cut < len(ns.ticks) && now.Sub(ns.ticks[cut].at) > c.cfg.Window {
		cut++
	}
	ns.ticks = slices.Delete(ns.ticks, 0, cut)
	r.Runtime = nil // kept past the call: the runtime is not ours to keep
	ns.rep = r
	ns.simGhosts = simGhosts
	ns.lastReport = now
	due := ns.lastSample.IsZero() || now.Sub(ns.lastSample) >= c.cfg.SampleEvery
	prevSample := ns.lastSample
	if due {
		ns.lastSample = now
	}
	capHint := len(ns.entities)
	c.version++
	c.mu.Unlock()
	if !due {
		return
	}

	// The walk is the runtime goroutine's own; only the merge below takes
	// the lock.
	ents := make([]Entity, 0, capHint+capHint/8)
	rt.Positions().Each(func(id ecs.ID, p *zone.Position) {
		if !rt.Simulated(id) {
			return
		}
		ents = append(ents, Entity{id: id, ID: strconv.FormatUint(uint64(id), 10), Node: name,
			X: round2(p.Pos.X), Y: round2(p.Pos.Y), Kind: c.cfg.Kinds(rt, id)})
	})
	var in, out uint64
	prog := rt.Progress()
	for _, s := range prog.Sent {
		out += s.Control + s.Seq
	}
	for _, s := range prog.Received {
		in += s.Control + s.Seq
	}
	table, grid, bands := rt.Table(), rt.Grid(), rt.Bands()

	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.hasGrid {
		c.grid, c.bands, c.hasGrid = grid, bands, true
	}
	if table != nil && (c.table == nil || table.Version() > c.table.Version()) {
		c.tableChanged(table, now)
		c.table = table
	}
	if !prevSample.IsZero() {
		if dt := now.Sub(prevSample).Seconds(); dt > 0 {
			ns.inRate = float64(in-min(in, ns.linkIn)) / dt
			ns.outRate = float64(out-min(out, ns.linkOut)) / dt
		}
	}
	ns.linkIn, ns.linkOut = in, out
	c.merge(ns, ents, now)
	c.version++
}

// merge installs node ns's sample taken at now: handoffs are the
// entities last seen on another node; the node's entities missing from
// the sample are marked gone. The caller holds mu.
func (c *Collector) merge(ns *nodeState, ents []Entity, now time.Time) {
	ids := make(map[ecs.ID]struct{}, len(ents))
	for _, e := range ents {
		ids[e.id] = struct{}{}
		if s, ok := c.seen[e.id]; ok && s.node != ns.name {
			c.handoffs = append(c.handoffs, Handoff{ID: e.ID, Kind: e.Kind, From: s.node, To: ns.name, X: e.X, Y: e.Y, At: now})
			ns.seenIn++
			if from := c.nodes[s.node]; from != nil {
				from.seenOut++
			}
		}
		c.seen[e.id] = sighting{node: ns.name}
	}
	for id := range ns.ids {
		if _, ok := ids[id]; ok {
			continue
		}
		if s, ok := c.seen[id]; ok && s.node == ns.name && !s.gone {
			c.seen[id] = sighting{node: ns.name, gone: true}
			c.gone = append(c.gone, goneEntry{id: id, node: ns.name, at: now})
		}
	}
	ns.ids, ns.entities = ids, ents
	// Forget what stayed gone (dead, or on a node no longer sampled).
	cut := 0
	for cut < len(c.gone) && now.Sub(c.gone[cut].at) > c.cfg.KeepHandoffs {
		g := c.gone[cut]
		if s, ok := c.seen[g.id]; ok && s.gone && s.node == g.node {
			delete(c.seen, g.id)
		}
		cut++
	}
	c.gone = slices.Delete(c.gone, 0, cut)
	cut = 0
	for cut < len(c.handoffs) && (len(c.handoffs)-cut > c.cfg.MaxHandoffs || now.Sub(c.handoffs[cut].At) > c.cfg.KeepHandoffs) {
		cut++
	}
	c.handoffs = slices.Delete(c.handoffs, 0, cut)
}

// tableChanged records the regions whose owner differs between the table
// held so far and next, and forgets the changes older than KeepHandoffs.
// The caller holds mu.
func (c *Collector) tableChanged(next *cells.Table, now time.Time) {
	if prev := c.table; prev != nil && prev.Grid() == next.Grid() {
		for r := range cells.RegionID(next.Grid().Regions()) {
			if from, to := prev.Owner(r), next.Owner(r); from != to {
				c.changes = append(c.changes, RegionChange{Region: int(r), From: from, To: to, Version: next.Version(), At: now})
			}
		}
	}
	cut := 0
	for cut < len(c.changes) && now.Sub(c.changes[cut].At) > c.cfg.KeepHandoffs {
		cut++
	}
	c.changes = slices.Delete(c.changes, 0, cut)
}

// NodeDown declares a zone node down, for why ("killed"): the snapshot
// marks it so at once (NodeStats.Down), draws none of its entities, and
// takes no more of its reports. A node that only stops reporting is
// marked Stale after CollectorConfig.Stale; NodeDown is for the caller
// that knows.
func (c *Collector) NodeDown(name, why string) {
	if why == "" {
		why = "down"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ns := c.nodes[name]
	if ns == nil {
		ns = &nodeState{name: name, ids: map[ecs.ID]struct{}{}}
		c.nodes[name] = ns
	}
	ns.down = why
	c.version++
}

// Econ takes an economy node's stats; the caller pushes them about once a
// second (the movements per second are the difference between the last
// two pushes).
func (c *Collector) Econ(name string, s EconStats) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.econ[name]
	if es == nil {
		es = &econState{}
		c.econ[name] = es
	} else {
		es.prev, es.prevAt = es.stats, es.at
		if dt := now.Sub(es.prevAt).Seconds(); dt > 0 {
			d := (s.Accepted + s.Rejected) - (es.prev.Accepted + es.prev.Rejected)
			es.movements = float64(max(d, 0)) / dt
		}
	}
	es.stats, es.at = s, now
	c.version++
}

// Event records an announced moment ("moving regions 3,4 from zone-1 to
// zone-2", "killing econ-2"); the page lists the newest first.
func (c *Collector) Event(text string) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, Event{At: now, Text: text})
	if over := len(c.events) - c.cfg.MaxEvents; over > 0 {
		c.events = slices.Delete(c.events, 0, over)
	}
	c.cfg.Logger.Info("dashboard: event", "text", text)
	c.version++
}

// Snapshot returns the state the page draws, a copy the caller owns.
func (c *Collector) Snapshot() Snapshot {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Snapshot{At: now, Version: c.version, Window: c.cfg.Window.Seconds(), SampleEvery: c.cfg.SampleEvery.Seconds(),
		Entities: []Entity{}, Handoffs: slices.Clone(c.handoffs), Events: slices.Clone(c.events), RegionChanges: []RegionChange{},
		Nodes: []NodeStats{}, Econ: []EconNode{}, Regions: []Region{}, Owners: []string{}}
	if s.Handoffs == nil {
		s.Handoffs = []Handoff{}
	}
	if s.Events == nil {
		s.Events = []Event{}
	}
	for _, ch := range c.changes {
		if now.Sub(ch.At) <= c.cfg.KeepHandoffs {
			s.RegionChanges = append(s.RegionChanges, ch)
		}
	}
	if c.hasGrid {
		w := c.grid.World().Config()
		s.World = World{Width: float64(w.Width), Height: float64(w.Height), RegionEdge: c.grid.RegionEdge(), Cols: c.grid.Cols(), Rows: c.grid.Rows()}
		s.Bands = Bands{Ghost: c.bands.Ghost, Interaction: c.bands.Interaction, HandoffMargin: c.bands.HandoffMargin}
	}
	if c.table != nil {
		s.TableVersion = c.table.Version()
		g := c.table.Grid()
		for r := range cells.RegionID(g.Regions()) {
			col, row := g.Coords(r)
			minX, minY, maxX, maxY := g.Bounds(r)
			s.Regions = append(s.Regions, Region{ID: int(r), Col: col, Row: row, Owner: c.table.Owner(r),
				MinX: minX, MinY: minY, MaxX: maxX, MaxY: maxY})
		}
	}
	owners := map[string]bool{}
	for _, r := range s.Regions {
		owners[r.Owner] = true
	}
	for name := range c.nodes {
		owners[name] = true
	}
	for name := range owners {
		s.Owners = append(s.Owners, name)
	}
	slices.Sort(s.Owners)
	for _, ns := range c.nodes {
		st := c.nodeStats(ns, now)
		s.Nodes = append(s.Nodes, st)
		if !st.Stale && !st.Down { // a stopped node's last sample is no longer anywhere
			s.Entities = append(s.Entities, ns.entities...)
		}
	}
	slices.SortFunc(s.Nodes, func(a, b NodeStats) int { return cmp.Compare(a.Name, b.Name) })
	for name, es := range c.econ {
		st := es.stats
		if st.Name == "" {
			st.Name = name
		}
		s.Econ = append(s.Econ, EconNode{EconStats: st, MovementsPerSec: round2(es.movements), Stale: now.Sub(es.at) > c.cfg.Stale})
	}
	slices.SortFunc(s.Econ, func(a, b EconNode) int { return cmp.Compare(a.Name, b.Name) })
	return s
}

func (c *Collector) nodeStats(ns *nodeState, now time.Time) NodeStats {
	r := ns.rep
	st := NodeStats{
		Name: ns.name, Tick: r.Tick, Stale: now.Sub(ns.lastReport) > c.cfg.Stale, Down: ns.down != "", DownWhy: ns.down,
		Simulated: r.Simulated, Frozen: r.Frozen, Entities: len(ns.entities),
		RenderGhosts: r.RenderGhosts, SimGhosts: ns.simGhosts,
		OwnedRegions: r.OwnedRegions, TableVersion: r.TableVersion,
		Peers: r.Peers, Connected: r.Connected, Sessions: r.Sessions,
		LinkIn: ns.linkIn, LinkOut: ns.linkOut, LinkInPerSec: round2(ns.inRate), LinkOutPerSec: round2(ns.outRate),
		Handoff: r.Handoff, HandoffsSeenIn: ns.seenIn, HandoffsSeenOut: ns.seenOut,
		TickSamples: len(ns.ticks),
	}
	if len(ns.ticks) > 0 {
		d := make([]time.Duration, len(ns.ticks))
		for i, t := range ns.ticks {
			d[i] = t.took
		}
		slices.Sort(d)
		st.TickP50ms = ms(quantile(d, 0.50))
		st.TickP99ms = ms(quantile(d, 0.99))
		st.TickMaxMs = ms(d[len(d)-1])
	}
	return st
}

// quantile is the nearest-rank q-quantile of sorted (non-empty): the
// smallest value with at least q of the values at or below it.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round2(v float64) float64 { return math.Round(v*100) / 100 }
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// EconNodes pushes every node's Stats (as Econ does), with SessionsOpen
// counted in store by one query for them all (econ.OpenSessions): call it
// about once a second. A halted or closed node keeps its last counts, and
// its open sessions are the orphans the survivors' sweep will settle. If
// the store cannot answer, the stats are pushed without it and the error
// returned.
func (c *Collector) EconNodes(ctx context.Context, store netting.SessionStore, nodes ...*econ.Node) error {
	open, err := econ.OpenSessions(ctx, store)
	for _, n := range nodes {
		s := n.Stats()
		s.SessionsOpen = open[n.Name()]
		c.Econ(n.Name(), s)
	}
	return err
}
