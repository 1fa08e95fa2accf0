package zonesim

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

type chunkPos = torus.ChunkPos

func chunkStr(c torus.ChunkPos) string { return fmt.Sprintf("(%d,%d)", c.X, c.Y) }

// ScenarioConfig is a scenario's options.
type ScenarioConfig struct {
	// Started, if set, is called with every runtime after New (a test
	// plants a broken variant there).
	Started func(name string, r *zone.Runtime)
}

// Scenario is a cluster a script drives step by step (scenario scripts:
// zone/testdata/scenarios, run by zone's TestScenarios): the script
// places entities and clients, steps all nodes or some for a number of
// ticks, holds, delivers, drops or duplicates messages of a kind between
// two nodes, cuts and heals, takes a lease, installs a table at one
// node, and prints what each node holds of each entity and what each
// client is shown. Nothing is drawn: the same script gives the same
// output on every run. After every tick it checks what Run checks
// (every node's CheckInvariants, one simulator per entity, entities
// conserved, each client's batches well formed, no vanish of an entity
// standing within two chunks of a client's viewer) and the tick command
// prints what broke (an entity on no live node, after a lease is taken,
// once, and again when it is back).
//
// The world is Run's default: 2048 m square, 512 m regions (4 × 4), 32 m
// chunks (64 × 64); view radius 5 chunks, handoff margin one chunk.
type Scenario struct {
	cfg    ScenarioConfig
	grid   cells.Grid
	geo    torus.World
	net    *scriptNet
	leases *Leases
	names  []string
	nodes  map[string]*scriptNode
	tables map[uint64]*cells.Table
	tick   uint64
	ents   map[uint64]bool // entity numbers placed
	// gone are the entities on no live node (a node's lease lost): the
	// tick prints that once, and again when one is back.
	gone    map[uint64]bool
	clients []*scriptClient
}

type scriptNode struct {
	name string
	rt   *zone.Runtime
	mod  *scriptModule
	terr *Territory
}

// scriptClient is a client of a scenario: Run's client checks, and the
// appears and vanishes since the last print.
type scriptClient struct {
	*client
	events []string
}

// NewScenario returns an empty scenario: the script's first command is
// cluster.
func NewScenario(cfg ScenarioConfig) *Scenario {
	s := &Scenario{cfg: cfg, nodes: make(map[string]*scriptNode), tables: make(map[uint64]*cells.Table), ents: make(map[uint64]bool), gone: make(map[uint64]bool)}
	s.net = newScriptNet(s.entName)
	return s
}

// Close closes every runtime.
func (s *Scenario) Close() {
	for _, n := range s.names {
		_ = s.nodes[n].rt.Close()
	}
}

// entity n of a script is zone.DerivedID(n-1): id n, as Run's
// wanderers.
func entID(n uint64) ecs.ID { id, _ := zone.DerivedID(n - 1); return id }

func (s *Scenario) entName(id uint64) string { return fmt.Sprintf("e%d", id) }

// Exec runs one step and returns its output.
func (s *Scenario) Exec(st Step) (string, error) {
	if st.Name != "cluster" && len(s.names) == 0 {
		return "", errors.New("the first command must be cluster")
	}
	switch st.Name {
	case "cluster":
		return s.cluster(st)
	case "place":
		return s.place(st)
	case "walk", "jump":
		return s.walk(st)
	case "client":
		return s.addClient(st)
	case "tick":
		return s.runTicks(st)
	case "hold", "release":
		r, err := s.rule(st)
		if err != nil {
			return "", err
		}
		if st.Name == "hold" {
			s.net.holds = append(s.net.holds, r)
		} else {
			s.net.holds = slices.DeleteFunc(s.net.holds, func(h msgRule) bool {
				return (r.from == "" || h.from == r.from) && (r.to == "" || h.to == r.to) && (r.kind == "" || h.kind == r.kind)
			})
		}
		return "ok", nil
	case "deliver", "drop", "flight":
		return s.messages(st)
	case "cut", "heal":
		v := st.Vals("nodes")
		if len(v) != 2 || s.nodes[v[0]] == nil || s.nodes[v[1]] == nil {
			return "", fmt.Errorf("%s needs nodes=A,B", st.Name)
		}
		if st.Name == "cut" {
			s.net.cut[pair{v[0], v[1]}], s.net.cut[pair{v[1], v[0]}] = true, true
		} else {
			delete(s.net.cut, pair{v[0], v[1]})
			delete(s.net.cut, pair{v[1], v[0]})
		}
		return "ok", nil
	case "lose":
		n := s.nodes[st.Str("node", "")]
		if n == nil {
			return "", errors.New("lose needs node=N")
		}
		s.leases.Lose(n.name)
		return "ok", nil
	case "table":
		return s.defineTable(st)
	case "install":
		v, err := st.Int("v", 0)
		if err != nil {
			return "", err
		}
		t := s.tables[uint64(v)]
		if t == nil {
			return "", fmt.Errorf("no table v=%d", v)
		}
		for _, n := range s.pick(st) {
			n.terr.Install(t)
		}
		return "ok", nil
	case "state":
		return s.state(st)
	case "clients":
		return s.showClients(), nil
	}
	return "", fmt.Errorf("unknown command %q", st.Name)
}

// pick is the nodes a step names with nodes=…, or all.
func (s *Scenario) pick(st Step) []*scriptNode {
	var out []*scriptNode
	for _, n := range s.names {
		if v := st.Vals("nodes"); v == nil || slices.Contains(v, n) {
			out = append(out, s.nodes[n])
		}
	}
	return out
}

func (s *Scenario) parseOwners(st Step, version uint64) (*cells.Table, error) {
	rows := st.Vals("owners")
	if len(rows) != s.grid.Rows() {
		return nil, fmt.Errorf("owners needs %d rows of %d nodes (row 0 first: y from 0 up)", s.grid.Rows(), s.grid.Cols())
	}
	owners := make([]string, 0, s.grid.Regions())
	for _, row := range rows {
		if len(row) != s.grid.Cols() {
			return nil, fmt.Errorf("owners row %q: needs %d nodes", row, s.grid.Cols())
		}
		for _, c := range row {
			owners = append(owners, string(c))
		}
	}
	return cells.NewTable(s.grid, version, owners)
}

// cluster owners=ROW,ROW,… makes the nodes the rows name (one letter a
// node), table 1.
func (s *Scenario) cluster(st Step) (string, error) {
	if len(s.names) > 0 {
		return "", errors.New("one cluster a script")
	}
	gc := cells.GridConfig{RegionEdge: 512}
	gc.World.Width, gc.World.Height = 2048, 2048
	gc = gc.WithDefaults()
	var err error
	if s.grid, err = cells.NewGrid(gc); err != nil {
		return "", err
	}
	s.geo = s.grid.World()
	table, err := s.parseOwners(st, 1)
	if err != nil {
		return "", err
	}
	s.tables[1] = table
	s.names = table.Nodes()
	slices.Sort(s.names)
	s.leases = NewLeases(s.names)
	for i, name := range s.names {
		n := &scriptNode{name: name, terr: s.leases.Territory(name, table), mod: &scriptModule{}}
		rc := zone.Config{
			Name: name, Node: i + 1, Grid: gc, Territory: n.terr, Transport: s.net.endpoint(name),
			Clock: clock.NewFake(Boot), Logger: slog.New(slog.DiscardHandler),
			Accept: s.leases.Accept, LivePeers: s.leases.LivePeers(name),
		}
		if n.rt, err = zone.New(rc, n.mod); err != nil {
			return "", err
		}
		if s.cfg.Started != nil {
			s.cfg.Started(name, n.rt)
		}
		s.nodes[name] = n
	}
	return "nodes " + strings.Join(s.names, " "), nil
}

func (s *Scenario) defineTable(st Step) (string, error) {
	v, err := st.Int("v", 0)
	if err != nil || v < 2 {
		return "", fmt.Errorf("table needs v=N above 1 (%v)", err)
	}
	t, err := s.parseOwners(st, uint64(v))
	if err != nil {
		return "", err
	}
	s.tables[uint64(v)] = t
	return "ok", nil
}

func (s *Scenario) pos(st Step, key string) (torus.Pos, error) {
	f, err := st.Floats(key)
	if err != nil || len(f) != 2 {
		return torus.Pos{}, fmt.Errorf("%s needs %s=X,Y (%v)", st.Name, key, err)
	}
	return torus.Pos{X: f[0], Y: f[1]}, nil
}

// place e=N at=X,Y [to=X,Y speed=S] creates entity N on the owner of
// its position (on=NODE to choose), walking to to at speed m/s.
func (s *Scenario) place(st Step) (string, error) {
	e, err := st.Int("e", 0)
	if err != nil || e < 1 {
		return "", fmt.Errorf("place needs e=N, N ≥ 1 (%v)", err)
	}
	p, err := s.pos(st, "at")
	if err != nil {
		return "", err
	}
	n := s.nodes[st.Str("on", s.tables[1].OwnerOf(p))]
	if n == nil {
		return "", errors.New("place: no such node")
	}
	w := scriptWalk{Target: p}
	if st.Has("to") {
		if w.Target, err = s.pos(st, "to"); err != nil {
			return "", err
		}
		sp, err := st.Floats("speed")
		if err != nil || len(sp) != 1 {
			return "", fmt.Errorf("place with to needs speed=S (%v)", err)
		}
		w.Speed = sp[0]
	}
	if err := n.mod.create(entID(uint64(e)), p, w); err != nil {
		return "", err
	}
	s.ents[uint64(e)] = true
	return fmt.Sprintf("e%d on %s in chunk %s", e, n.name, chunkStr(s.geo.ChunkOf(p))), nil
}

// simulator is the node that simulates entity id (not frozen), if any.
func (s *Scenario) simulator(id ecs.ID) *scriptNode {
	for _, name := range s.names {
		if n := s.nodes[name]; !s.leases.Lost(name) && n.rt.Simulated(id) {
			return n
		}
	}
	return nil
}

// walk e=N to=X,Y speed=S sets entity N's walk; jump e=N to=X,Y moves it
// there at once. On the node that simulates it.
func (s *Scenario) walk(st Step) (string, error) {
	e, err := st.Int("e", 0)
	if err != nil {
		return "", err
	}
	id := entID(uint64(e))
	n := s.simulator(id)
	if n == nil {
		return "", fmt.Errorf("e%d is simulated nowhere now", e)
	}
	to, err := s.pos(st, "to")
	if err != nil {
		return "", err
	}
	if st.Name == "jump" {
		n.mod.jump(id, to)
		return fmt.Sprintf("e%d on %s to chunk %s", e, n.name, chunkStr(s.geo.ChunkOf(to))), nil
	}
	sp, err := st.Floats("speed")
	if err != nil || len(sp) != 1 {
		return "", fmt.Errorf("walk needs speed=S (%v)", err)
	}
	n.mod.setWalk(id, scriptWalk{Target: to, Speed: sp[0]})
	return "ok", nil
}

// client acct=A on=NODE viewer=N attaches account A's client on NODE,
// its view following entity N (which NODE must hold).
func (s *Scenario) addClient(st Step) (string, error) {
	a, err := st.Int("acct", 0)
	if err != nil || a < 1 {
		return "", fmt.Errorf("client needs acct=A ≥ 1 (%v)", err)
	}
	v, err := st.Int("viewer", 0)
	if err != nil || v < 1 {
		return "", fmt.Errorf("client needs viewer=N (%v)", err)
	}
	n := s.nodes[st.Str("on", "")]
	if n == nil {
		return "", errors.New("client needs on=NODE")
	}
	i := slices.Index(s.names, n.name)
	c := &scriptClient{client: newClient(account.ID(a), i)}
	c.viewer = entID(uint64(v))
	s.clients = append(s.clients, c)
	n.rt.SetViewer(account.ID(a), c.viewer)
	n.rt.Attach(account.ID(a), outbox.SinkFunc(func(tick uint64, frames [][]byte) {
		_ = outbox.DecodeBatch(bytes.Join(frames, nil), func(m outbox.Message) error {
			switch m.Kind {
			case outbox.KindAppear:
				c.events = append(c.events, fmt.Sprintf("+e%d@%d", m.Entity, tick))
			case outbox.KindVanish:
				c.events = append(c.events, fmt.Sprintf("-e%d@%d", m.Entity, tick))
			}
			return nil
		})
		c.deliver(tick, frames)
	}))
	return "ok", nil
}

// runTicks: tick [n=N] [nodes=A,B]: N ticks (default 1), each
// delivering what is due, stepping the nodes named (default all), and
// checking; prints what broke, or ok.
func (s *Scenario) runTicks(st Step) (string, error) {
	count, err := st.Int("n", 1)
	if err != nil {
		return "", err
	}
	step := s.pick(st)
	var out []string
	for range count {
		s.tick++
		s.net.deliverDue(s.tick)
		for _, n := range step {
			n.rt.Step()
		}
		for _, b := range s.check() {
			out = append(out, fmt.Sprintf("tick %d: %s", s.tick, b))
		}
	}
	if len(out) == 0 {
		return fmt.Sprintf("ok (tick %d)", s.tick), nil
	}
	return strings.Join(slices.Compact(out), "\n"), nil
}

// check is Run's properties at this tick, as lines.
func (s *Scenario) check() []string {
	var out []string
	maxE := uint64(0)
	for e := range s.ents {
		maxE = max(maxE, e)
	}
	ids := make([]ecs.ID, maxE)
	for i := range ids {
		ids[i] = entID(uint64(i + 1))
	}
	for _, name := range s.names {
		if s.leases.Lost(name) {
			continue
		}
		if err := s.nodes[name].rt.CheckInvariants(); err != nil {
			for _, l := range strings.Split(err.Error(), "\n") {
				out = append(out, "invariant: "+l)
			}
		}
	}
	chunks := make([]torus.ChunkPos, len(ids))
	held := make([]bool, len(ids))
	for k, id := range ids {
		if !s.ents[uint64(k+1)] {
			continue
		}
		var sims, real []string
		for _, name := range s.names {
			r := s.nodes[name].rt
			if s.leases.Lost(name) {
				continue
			}
			if r.Simulated(id) {
				sims = append(sims, name)
			}
			if r.World().Alive(id) && !r.Ghosts().Has(id) {
				real = append(real, name)
				if p, ok := r.Positions().Get(id); ok && !held[k] {
					chunks[k], held[k] = s.geo.ChunkOf(p.Pos), true
				}
			}
		}
		if len(sims) > 1 {
			out = append(out, fmt.Sprintf("one simulator: e%d is simulated on %v", k+1, sims))
		}
		switch e := uint64(k + 1); {
		case len(real) == 0 && !s.gone[e]:
			s.gone[e] = true
			out = append(out, fmt.Sprintf("entities conserved: e%d exists on no live node", e))
		case len(real) > 0 && s.gone[e]:
			delete(s.gone, e)
			out = append(out, fmt.Sprintf("e%d is back, on %s", e, strings.Join(real, ",")))
		}
	}
	cols := newColumns(s.geo, chunks, held)
	var visit bitset
	for _, c := range s.clients {
		if s.leases.Lost(s.names[c.node]) {
			continue
		}
		c.sight(s.tick, s.geo, ids, chunks, held, cols, false, nil, &visit)
		if c.bad != nil {
			out = append(out, c.bad.Error())
			c.bad = nil
		}
	}
	return out
}

// rule is a step's from=, to= and kind=.
func (s *Scenario) rule(st Step) (msgRule, error) {
	r := msgRule{from: st.Str("from", ""), to: st.Str("to", ""), kind: st.Str("kind", "")}
	for _, n := range []string{r.from, r.to} {
		if n != "" && s.nodes[n] == nil {
			return r, fmt.Errorf("no node %q", n)
		}
	}
	if !knownKind(r.kind) {
		return r, fmt.Errorf("no message kind %q", r.kind)
	}
	return r, nil
}

// messages: flight lists the messages in flight that match; deliver
// hands them to their receivers now (n=K: the first K; copy: a copy,
// the message stays in flight; reverse: last first); drop loses them.
func (s *Scenario) messages(st Step) (string, error) {
	r, err := s.rule(st)
	if err != nil {
		return "", err
	}
	count, err := st.Int("n", 0)
	if err != nil {
		return "", err
	}
	var ms []scriptMsg
	switch {
	case st.Name == "flight" || st.Name == "deliver" && st.Has("copy"):
		for _, m := range s.net.flying {
			if r.matches(m) && (count == 0 || len(ms) < count) {
				ms = append(ms, m)
			}
		}
	default:
		ms = s.net.take(r, count)
	}
	if st.Has("reverse") {
		slices.Reverse(ms)
	}
	var out []string
	for _, m := range ms {
		out = append(out, s.net.describe(m))
		if st.Name == "deliver" {
			s.net.hand(m)
		}
	}
	if len(out) == 0 {
		return "none", nil
	}
	return strings.Join(out, "\n"), nil
}

// state [e=N,…] prints, per entity, what every node holds of it:
// sim@EPOCH (simulated), frozen@EPOCH (in a handoff), ghost<SOURCE@EPOCH
// (a render ghost, +sim for a simulation ghost, +parked, +held, +fenced), each
// with its chunk.
func (s *Scenario) state(st Step) (string, error) {
	var es []uint64
	for _, v := range st.Vals("e") {
		var e uint64
		if _, err := fmt.Sscan(v, &e); err != nil {
			return "", err
		}
		es = append(es, e)
	}
	if es == nil {
		for e := range s.ents {
			es = append(es, e)
		}
		slices.Sort(es)
	}
	var lines []string
	for _, e := range es {
		id := entID(e)
		parts := []string{fmt.Sprintf("e%d:", e)}
		for _, name := range s.names {
			r := s.nodes[name].rt
			if s.leases.Lost(name) {
				parts = append(parts, name+"=fenced")
				continue
			}
			if g, ok := r.RenderGhost(id); ok {
				p := fmt.Sprintf("%s=ghost<%s@%d%s", name, g.Source, g.Epoch, chunkStr(g.Chunk))
				for _, f := range []struct {
					on   bool
					name string
				}{{r.Ghosts().Has(id), "+sim"}, {g.Parked, "+parked"}, {g.Held, "+held"}, {g.Fenced, "+fenced"}} {
					if f.on {
						p += f.name
					}
				}
				parts = append(parts, p)
				continue
			}
			ep, ok := r.Epoch(id)
			if !ok {
				continue
			}
			what := "sim"
			if r.Frozen().Has(id) {
				what = "frozen"
			}
			ch, _ := r.ChunkOf(id)
			parts = append(parts, fmt.Sprintf("%s=%s@%d%s", name, what, ep, chunkStr(ch)))
		}
		lines = append(lines, strings.Join(parts, " "))
	}
	return strings.Join(lines, "\n"), nil
}

// showClients prints each client's shown entities, and the appears (+)
// and vanishes (-) it was sent since the last print, with their ticks.
func (s *Scenario) showClients() string {
	var lines []string
	for _, c := range s.clients {
		shown := c.shownIDs()
		var b strings.Builder
		fmt.Fprintf(&b, "acct %d on %s: shown", c.acct, s.names[c.node])
		for _, e := range shown {
			fmt.Fprintf(&b, " e%d", e)
		}
		if len(c.events) > 0 {
			fmt.Fprintf(&b, "; since: %s", strings.Join(c.events, " "))
			c.events = c.events[:0]
		}
		lines = append(lines, b.String())
	}
	if len(lines) == 0 {
		return "no clients"
	}
	return strings.Join(lines, "\n")
}
