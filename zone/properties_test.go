package zone_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// This file holds one test per claim of the cluster runtime about what a
// client sees (zone/doc.go, zone/cluster.go); faults_test.go holds the
// claims under link faults and lease loss. The wander runs share one
// harness (wanderRun): the truth as every owner holds it, tick by tick, a
// model of every client's held chunks, and a strict client (observer).

// ---- the strict client ----

// observer is one account's client that checks, on every batch, what a
// game client relies on: an entity appears once per sighting (no second
// appear without a vanish between), a vanish is of an entity shown,
// public updates come only while it is shown, and owner-only components
// are only of the account's own entities. The first breach is kept in
// bad.
type observer struct {
	acct    account.ID
	ownerOf func(e uint64) account.ID // nil: the account owns nothing
	private map[outbox.ComponentType]bool
	shown   map[uint64]map[outbox.ComponentType]string
	own     map[uint64]map[outbox.ComponentType]string
	// positions lists, in arrival order, the position payloads received
	// since the harness last looked (wanderRun.resolve).
	positions []seenPos
	// appears and vanishes count every appear and vanish received;
	// batches every batch.
	appears, vanishes, batches int
	bad                        error
}

type seenPos struct {
	entity  uint64
	payload string
}

func newObserver(a account.ID, ownerOf func(uint64) account.ID, private ...outbox.ComponentType) *observer {
	o := &observer{acct: a, ownerOf: ownerOf, private: map[outbox.ComponentType]bool{},
		shown: map[uint64]map[outbox.ComponentType]string{}, own: map[uint64]map[outbox.ComponentType]string{}}
	for _, t := range private {
		o.private[t] = true
	}
	return o
}

func (o *observer) fail(format string, args ...any) {
	if o.bad == nil {
		o.bad = fmt.Errorf("account %d: "+format, append([]any{o.acct}, args...)...)
	}
}

func (o *observer) Deliver(tick uint64, frames [][]byte) {
	o.batches++
	err := outbox.DecodeBatch(bytes.Join(frames, nil), func(m outbox.Message) error {
		switch m.Kind {
		case outbox.KindAppear:
			if _, ok := o.shown[m.Entity]; ok {
				o.fail("tick %d: entity %d appeared again without a vanish since its last appear", tick, m.Entity)
			}
			o.shown[m.Entity] = make(map[outbox.ComponentType]string)
			o.appears++
		case outbox.KindVanish:
			if _, ok := o.shown[m.Entity]; !ok {
				o.fail("tick %d: vanish of entity %d, which it was not shown", tick, m.Entity)
			}
			delete(o.shown, m.Entity)
			o.vanishes++
		case outbox.KindComponent:
			if o.private[m.Component] {
				if o.ownerOf == nil || o.ownerOf(m.Entity) != o.acct {
					owner := account.ID(0)
					if o.ownerOf != nil {
						owner = o.ownerOf(m.Entity)
					}
					o.fail("tick %d: owner-only type %d of entity %d, owned by account %d, leaked to it", tick, m.Component, m.Entity, owner)
				}
				if o.own[m.Entity] == nil {
					o.own[m.Entity] = make(map[outbox.ComponentType]string)
				}
				o.own[m.Entity][m.Component] = string(m.Payload)
				return nil
			}
			comps, ok := o.shown[m.Entity]
			if !ok {
				o.fail("tick %d: update of type %d of entity %d, which it is not shown", tick, m.Component, m.Entity)
				return nil
			}
			comps[m.Component] = string(m.Payload)
			if m.Component == wander.WirePosition {
				o.positions = append(o.positions, seenPos{m.Entity, string(m.Payload)})
			}
		}
		return nil
	})
	if err != nil {
		o.fail("malformed batch at tick %d: %v", tick, err)
	}
}

// ---- the model of a client's held chunks ----

// heldModel is the set of chunks an account's client holds, kept as the
// runtime keeps it (Runtime.refreshView with interest's ViewManifest):
// when the viewer's chunk changes, every chunk of the view around it is
// added and every held chunk past the release margin released. changed
// is the tick each chunk's membership last flipped.
type heldModel struct {
	held    map[torus.ChunkPos]bool
	changed map[torus.ChunkPos]int
	anchor  torus.ChunkPos
	started bool
}

func newHeldModel() *heldModel {
	return &heldModel{held: map[torus.ChunkPos]bool{}, changed: map[torus.ChunkPos]int{}}
}

// follow moves the model's anchor; flip is called with each chunk whose
// membership changes.
func (m *heldModel) follow(geo torus.World, view interest.View, anchor torus.ChunkPos, tick int, flip func(c torus.ChunkPos, held bool)) {
	anchor = geo.NormaliseChunk(anchor)
	if m.started && anchor == m.anchor {
		return
	}
	m.started, m.anchor = true, anchor
	for c := range geo.ChunksWithin(anchor, view.Radius, view.Slabs) {
		if !m.held[c] {
			m.held[c], m.changed[c] = true, tick
			flip(c, true)
		}
	}
	for c := range m.held {
		if !view.Keeps(geo, anchor, c) {
			delete(m.held, c)
			m.changed[c] = tick
			flip(c, false)
		}
	}
}

// stable reports whether c's membership has not changed in ticks
// tick-1 and tick: a chunk added at T gets its foreign ghosts by T+2 (the
// subscribe goes out at the end of T, the owner's snapshot at the end of
// T+1 at the latest).
func (m *heldModel) stable(c torus.ChunkPos, tick int) bool {
	t, ok := m.changed[c]
	return !ok || t <= tick-2
}

// ---- the wander harness ----

// wanderState is one wanderer at the end of one tick, as its owner holds
// it, its payloads encoded as the module encodes them.
type wanderState struct {
	node              string
	chunk             torus.ChunkPos
	pos, mood, secret string
}

// wanderRun is a wander cluster under test: the truth per tick, every
// account's strict client on its viewer's node, and the model of the
// chunks each client holds.
type wanderRun struct {
	t    *testing.T
	c    *zonetest.Cluster
	cfg  wander.Config
	geo  torus.World
	view interest.View
	ids  []uint64
	// tick is how many cluster ticks ran; truth[T] is the state at the end
	// of tick T (truth[0]: after Setup).
	tick  int
	truth []map[uint64]wanderState
	// posTick maps an entity's position payload to the tick its owner
	// first held it (positions never repeat: a wanderer always moves).
	posTick map[uint64]map[string]int
	lastPos map[*observer]map[uint64]int

	obs   []*observer // by account; [0] unused
	home  []*zonetest.Node
	model []*heldModel
	// union is, per node, how many of its accounts hold each chunk, and
	// unionChanged the tick its node-level membership last flipped.
	union        map[string]map[torus.ChunkPos]int
	unionChanged map[string]map[torus.ChunkPos]int
}

func startWander(t *testing.T, cfg wander.Config, zc zonetest.Config) *wanderRun {
	t.Helper()
	cfg = cfg.WithDefaults()
	zc.Grid = clusterGrid()
	if zc.Nodes == 0 {
		zc.Nodes = 4
	}
	if zc.Module == nil {
		zc.Module = func(int, string) (zone.Module, error) { return wander.New(cfg) }
	}
	c := zonetest.Start(t, zc)
	geo := c.Nodes[0].Runtime.Geometry()
	w := &wanderRun{t: t, c: c, cfg: cfg, geo: geo, view: interest.DefaultView(),
		posTick: map[uint64]map[string]int{}, lastPos: map[*observer]map[uint64]int{},
		obs: make([]*observer, cfg.Accounts+1), home: make([]*zonetest.Node, cfg.Accounts+1),
		model: make([]*heldModel, cfg.Accounts+1),
		union: map[string]map[torus.ChunkPos]int{}, unionChanged: map[string]map[torus.ChunkPos]int{}}
	for i := range cfg.Entities {
		id, _ := wander.ID(i)
		w.ids = append(w.ids, uint64(id))
	}
	for _, n := range c.Nodes {
		w.union[n.Name] = map[torus.ChunkPos]int{}
		w.unionChanged[n.Name] = map[torus.ChunkPos]int{}
	}
	for a := 1; a <= cfg.Accounts; a++ {
		o := newObserver(account.ID(a), w.ownerOf, wander.WireSecret)
		for _, n := range c.Nodes {
			if _, ok := n.Runtime.Viewer(account.ID(a)); ok {
				n.Runtime.Attach(account.ID(a), o)
				w.home[a] = n
			}
		}
		if w.home[a] == nil {
			t.Fatalf("account %d has a viewer on no node", a)
		}
		w.obs[a], w.model[a] = o, newHeldModel()
		w.lastPos[o] = map[uint64]int{}
	}
	w.record()
	return w
}

// ownerOf is the account of wanderer e (id i+1 is wanderer i).
func (w *wanderRun) ownerOf(e uint64) account.ID {
	if e == 0 || e > uint64(w.cfg.Entities) {
		return 0
	}
	return w.cfg.AccountOf(int(e - 1))
}

// step runs one cluster tick (with a Sync after it when sync is set),
// records the truth, follows the clients' views and checks every client's
// batches and the order of the positions it was shown.
func (w *wanderRun) step(sync bool) {
	w.t.Helper()
	w.c.Step()
	if sync {
		w.c.Sync(10 * time.Second)
	}
	w.tick++
	w.record()
	for a := 1; a <= w.cfg.Accounts; a++ {
		n := w.home[a]
		viewer, _ := n.Runtime.Viewer(account.ID(a))
		ch, ok := n.Runtime.ChunkOf(viewer)
		if !ok {
			w.t.Fatalf("tick %d: account %d's viewer %d is not indexed on %s", w.tick, a, viewer, n.Name)
		}
		union, changed := w.union[n.Name], w.unionChanged[n.Name]
		w.model[a].follow(w.geo, w.view, ch, w.tick, func(c torus.ChunkPos, held bool) {
			if held {
				if union[c]++; union[c] == 1 {
					changed[c] = w.tick
				}
				return
			}
			if union[c]--; union[c] == 0 {
				delete(union, c)
				changed[c] = w.tick
			}
		})
	}
	w.resolve()
}

// record appends the truth of this tick.
func (w *wanderRun) record() {
	now := make(map[uint64]wanderState, len(w.ids))
	epochs := make(map[uint64]uint64, len(w.ids))
	for _, n := range w.c.Nodes {
		r := n.Runtime
		moods, _ := ecs.StoreOf[wander.Mood](r.World())
		secrets, _ := ecs.StoreOf[wander.Secret](r.World())
		for _, u := range w.ids { // any node may simulate any of them, after handoffs
			id := ecs.ID(u)
			epoch, ok := r.Epoch(id)
			if !ok {
				continue
			}
			if _, ok := now[u]; ok && epoch < epochs[u] {
				continue // in flight, held by two nodes: the truth is the newer one's
			}
			epochs[u] = epoch
			p, _ := r.Positions().Get(id)
			ch, _ := r.ChunkOf(id)
			m, _ := moods.Get(id)
			s, _ := secrets.Get(id)
			e := uint64(id)
			st := wanderState{node: n.Name, chunk: w.geo.NormaliseChunk(ch), pos: string(zone.AppendPos(nil, p.Pos)),
				mood: string([]byte{m.Value}), secret: string(binary.LittleEndian.AppendUint32(nil, s.Value))}
			now[e] = st
			if w.posTick[e] == nil {
				w.posTick[e] = map[string]int{}
			}
			if _, ok := w.posTick[e][st.pos]; !ok {
				w.posTick[e][st.pos] = w.tick
			}
		}
	}
	w.truth = append(w.truth, now)
}

// resolve checks every client's malformed-or-out-of-order flag and that
// the positions it was shown of each entity are positions its owner held,
// in the order the owner held them: a client never sees a position older
// than one it saw before (no stale message was applied), across sightings
// too (a tombstone keeps a late update from bringing a ghost back old).
func (w *wanderRun) resolve() {
	w.t.Helper()
	for a := 1; a <= w.cfg.Accounts; a++ {
		o := w.obs[a]
		if o.bad != nil {
			w.t.Fatalf("tick %d (on %s): %v", w.tick, w.home[a].Name, o.bad)
		}
		last := w.lastPos[o]
		for _, sp := range o.positions {
			at, ok := w.posTick[sp.entity][sp.payload]
			switch {
			case !ok:
				w.t.Fatalf("tick %d: account %d (on %s) was shown a position of entity %d that its owner never held", w.tick, a, w.home[a].Name, sp.entity)
			case at < last[sp.entity]:
				w.t.Fatalf("tick %d: account %d (on %s) was shown entity %d at its position of tick %d after the one of tick %d: a stale update was applied",
					w.tick, a, w.home[a].Name, sp.entity, at, last[sp.entity])
			}
			last[sp.entity] = at
		}
		o.positions = o.positions[:0]
	}
}

// chunkSettled returns the chunk e stood in at the end of ticks
// tick-3 … tick, if it stood in one chunk all along: what any client may
// know of it (up to a tick behind its owner) then agrees on its chunk.
func (w *wanderRun) chunkSettled(e uint64, tick int) (torus.ChunkPos, bool) {
	c := w.truth[tick][e].chunk
	for back := 1; back <= 3; back++ {
		if w.truth[tick-back][e].chunk != c {
			return c, false
		}
	}
	return c, true
}

// checkSight checks, at the current tick, what every client and every
// node holds against the truth, where the truth is settled (the entity's
// chunk unchanged for 3 ticks, the chunk's membership in the client's or
// node's held set unchanged for 2):
//   - a client is shown exactly the entities standing in the chunks it
//     holds, local or foreign (no zombie, none missing), each with its
//     owner's public values of this tick (local) or this or the previous
//     tick (foreign: the owner's batch of tick T is applied at the start
//     of T+1, or already in T by a node stepped after the owner);
//   - nothing shown stands past the view plus its release margin;
//   - a node holds a render ghost of exactly the foreign entities standing
//     in the chunks its clients hold.
//
// It returns how many (client, entity) pairs were checked strictly.
func (w *wanderRun) checkSight() int {
	w.t.Helper()
	T := w.tick
	if T < 4 {
		return 0
	}
	checked := 0
	for a := 1; a <= w.cfg.Accounts; a++ {
		o, m, n := w.obs[a], w.model[a], w.home[a]
		for e, comps := range o.shown {
			now, ok := w.truth[T][e]
			if !ok {
				w.t.Fatalf("tick %d: account %d (on %s) is shown entity %d, which no node simulates", T, a, n.Name, e)
			}
			p, err := zone.DecodePos([]byte(comps[wander.WirePosition]))
			if err != nil {
				w.t.Fatalf("tick %d: account %d (on %s) holds entity %d without a position: %v", T, a, n.Name, e, err)
			}
			// The chunk the owner had the entity in at that position: the
			// wire's float32 can round a position near a chunk edge into
			// the next chunk.
			c := w.geo.ChunkOf(p)
			if at, ok := w.posTick[e][comps[wander.WirePosition]]; ok {
				c = w.truth[at][e].chunk
			}
			if !w.view.Keeps(w.geo, m.anchor, c) {
				w.t.Fatalf("tick %d: account %d (on %s) is shown entity %d (of %s) in chunk %v, %d chunks from its viewer's %v: past the view %d + release margin %d",
					T, a, n.Name, e, now.node, c, w.geo.ChunkDistance(m.anchor, c), m.anchor, w.view.Radius, w.view.ReleaseMargin)
			}
		}
		for _, e := range w.ids {
			ch, settled := w.chunkSettled(e, T)
			if !settled || !m.stable(ch, T) {
				continue
			}
			checked++
			now := w.truth[T][e]
			comps, shown := o.shown[e]
			switch want := m.held[ch]; {
			case want && !shown:
				w.t.Fatalf("tick %d: account %d (on %s) is not shown entity %d (of %s) standing in chunk %v, which it holds since tick %d",
					T, a, n.Name, e, now.node, ch, m.changed[ch])
			case !want && shown:
				w.t.Fatalf("tick %d: account %d (on %s) is shown entity %d (of %s) standing in chunk %v, which it does not hold (a zombie)",
					T, a, n.Name, e, now.node, ch)
			case !shown:
				continue
			}
			prev := w.truth[T-1][e]
			foreign := now.node != n.Name
			for _, f := range []struct {
				typ       outbox.ComponentType
				now, prev string
			}{{wander.WirePosition, now.pos, prev.pos}, {wander.WireMood, now.mood, prev.mood}} {
				got := comps[f.typ]
				if got != f.now && (!foreign || got != f.prev) {
					w.t.Fatalf("tick %d: account %d (on %s) holds type %d of entity %d (of %s) = %x; its owner holds %x (previous tick %x)",
						T, a, n.Name, f.typ, e, now.node, got, f.now, f.prev)
				}
			}
		}
	}
	for _, n := range w.c.Nodes {
		want, sure := 0, true
		union, changed := w.union[n.Name], w.unionChanged[n.Name]
		for _, e := range w.ids {
			st := w.truth[T][e]
			if st.node == n.Name {
				continue
			}
			ch, settled := w.chunkSettled(e, T)
			held := union[ch] > 0
			if t, ok := changed[ch]; !settled || (ok && t > T-2) {
				// Unsettled: sure only if it stood nowhere the node holds
				// or held lately.
				for back := 0; back <= 3; back++ {
					c := w.truth[T-back][e].chunk
					if t, ok := changed[c]; union[c] > 0 || (ok && t > T-4) {
						sure = false
					}
				}
				continue
			}
			if held {
				want++
			}
		}
		if got := n.Runtime.RenderGhosts(); sure && got != want {
			w.t.Fatalf("tick %d: %s holds %d render ghosts; %d foreign wanderers stand in the chunks its clients hold", T, n.Name, got, want)
		}
	}
	return checked
}

// foreignSightings counts, over every client, the entities shown now that
// another node simulates.
func (w *wanderRun) foreignSightings() int {
	k := 0
	for a := 1; a <= w.cfg.Accounts; a++ {
		for e := range w.obs[a].shown {
			if w.truth[w.tick][e].node != w.home[a].Name {
				k++
			}
		}
	}
	return k
}

// ---- 1. one writer ----

// TestClusterOneWriterPerWanderer: at every tick every wanderer is
// simulated (a real entity, not a ghost or frozen) on exactly one node,
// the node that the region table every node holds gives its position to,
// and every node holds the same table.
func TestClusterOneWriterPerWanderer(t *testing.T) {
	t.Parallel()
	seed := testseed.Seed(t)
	cfg := wanderConfig(seed)
	cfg.Area = 0 // the whole torus: every border, both seams
	cfg = cfg.WithDefaults()
	c := zonetest.Start(t, zonetest.Config{Nodes: 4, Grid: clusterGrid(), Memory: true,
		Module: func(int, string) (zone.Module, error) { return wander.New(cfg) }})
	var ids []ecs.ID
	for i := range cfg.Entities {
		id, _ := wander.ID(i)
		ids = append(ids, id)
	}
	perNode := map[string]int{}
	for tick := 1; tick <= 200; tick++ {
		c.StepSync(1)
		table := c.Nodes[0].Runtime.Table()
		for _, n := range c.Nodes[1:] {
			if !n.Runtime.Table().Equal(table) {
				t.Fatalf("tick %d: %s holds table v%d, %s v%d", tick, n.Name, n.Runtime.Table().Version(), c.Nodes[0].Name, table.Version())
			}
		}
		for _, id := range ids {
			var on []string
			var at torus.Pos
			for _, n := range c.Nodes {
				if n.Runtime.Simulated(id) {
					on = append(on, n.Name)
					p, _ := n.Runtime.Positions().Get(id)
					at = p.Pos
				}
			}
			if len(on) != 1 {
				t.Fatalf("tick %d: wanderer %d is simulated on %v, want exactly one node", tick, id, on)
			}
			if owner := table.OwnerOf(at); owner != on[0] {
				t.Fatalf("tick %d: wanderer %d at %v is simulated on %s; the table gives that position to %s", tick, id, at, on[0], owner)
			}
			if tick == 1 {
				perNode[on[0]]++
			}
		}
	}
	if len(perNode) != len(c.Nodes) {
		t.Fatalf("wanderers on %v: the run does not spread over every node", perNode)
	}
	t.Logf("wanderers per node: %v", perNode)
}

// ---- 2. sight across a border ----

// TestClusterClientsSeeForeignEntitiesOnceWithinView: over 240 ticks of
// wanderers crowding the corner where four nodes' bands meet across the
// seams, every client on every node sees each entity of another node
// appear once per sighting, get updates only while shown, never stand
// past its view plus the release margin, and in positions only moving
// forward; and, wherever the truth is settled, exactly the entities in
// the chunks it holds with their owners' values (checkSight), every tick.
func TestClusterClientsSeeForeignEntitiesOnceWithinView(t *testing.T) {
	t.Parallel()
	seed := testseed.Seed(t)
	w := startWander(t, wanderConfig(seed), zonetest.Config{Memory: true})
	checked, foreign := 0, 0
	for range 240 {
		w.step(true)
		checked += w.checkSight()
		foreign += w.foreignSightings()
	}
	appears, vanishes := 0, 0
	for a := 1; a <= w.cfg.Accounts; a++ {
		appears += w.obs[a].appears
		vanishes += w.obs[a].vanishes
	}
	if foreign == 0 || vanishes == 0 {
		t.Fatalf("%d foreign sightings, %d vanishes: the run exercises nothing across nodes", foreign, vanishes)
	}
	t.Logf("%d strict (client, entity, tick) checks; %d foreign sightings; %d appears, %d vanishes", checked, foreign, appears, vanishes)
}

// ---- 3. owner-only components ----

// TestClusterOwnerOnlyStaysWithItsOwner: a wanderer's secret (owner only)
// reaches its own account's client wherever the wanderer is simulated,
// and no other: no client is sent a secret of another account's entity
// (which also shows that no render ghost holds one: a ghost's components
// go to every local client that sees it, as public), and a client
// attached on each node for an account with no viewer and no entity
// receives nothing at all.
func TestClusterOwnerOnlyStaysWithItsOwner(t *testing.T) {
	t.Parallel()
	seed := testseed.Seed(t)
	w := startWander(t, wanderConfig(seed), zonetest.Config{Memory: true})
	var spies []*observer
	for i, n := range w.c.Nodes {
		s := newObserver(account.ID(1000+i), nil, wander.WireSecret)
		n.Runtime.Attach(s.acct, s)
		spies = append(spies, s)
	}
	for range 150 {
		w.step(true)
		for i, s := range spies {
			if s.bad != nil || s.batches > 0 {
				t.Fatalf("tick %d: the unrouted account %d on %s got %d batches (%v)", w.tick, s.acct, w.c.Nodes[i].Name, s.batches, s.bad)
			}
		}
	}
	// Every account knows every one of its wanderers' current secret (of
	// this tick, or the last one when the wanderer is on another node).
	remote := 0
	for i := range w.cfg.Entities {
		e := w.ids[i]
		a := w.cfg.AccountOf(i)
		now, prev := w.truth[w.tick][e], w.truth[w.tick-1][e]
		got, ok := w.obs[a].own[e][wander.WireSecret]
		if !ok || (got != now.secret && got != prev.secret) {
			t.Fatalf("account %d (on %s) holds secret %x of its wanderer %d (on %s), which holds %x (previous tick %x)",
				a, w.home[a].Name, got, e, now.node, now.secret, prev.secret)
		}
		if now.node != w.home[a].Name {
			remote++
		}
	}
	if remote == 0 {
		t.Fatal("no account owns a wanderer on another node: the run exercises no forwarding")
	}
	t.Logf("%d wanderers' secrets reach their account's node through a forward", remote)
}

// ---- 4. one entry per observing node ----

// pinValue is the pin module's one public component.
type pinValue struct{ N uint32 }

// pin is an entity of the pin module: it stands still at at; viewer,
// when set, is the account whose view follows it.
type pin struct {
	key    uint64
	at     torus.Pos
	viewer account.ID
}

// pinModule places entities exactly where a test wants them: each node
// creates the pins its table gives it. Nothing moves or changes unless
// the test writes a value (bump).
type pinModule struct {
	pins []pin
	r    *zone.Runtime
	val  *ecs.Store[pinValue]
}

const pinWireValue outbox.ComponentType = 2

func (m *pinModule) Setup(r *zone.Runtime) error {
	m.r = r
	if err := r.SyncPosition(1); err != nil {
		return err
	}
	var err error
	if m.val, err = zone.Register(r, zone.Spec[pinValue]{Name: "pin.value", Wire: pinWireValue,
		Handoff: zone.FixedCodec[pinValue](),
		Encode:  func(dst []byte, v *pinValue) []byte { return binary.LittleEndian.AppendUint32(dst, v.N) },
	}); err != nil {
		return err
	}
	for _, p := range m.pins {
		if r.Table().OwnerOf(p.at) != r.Name() {
			continue
		}
		id, err := zone.DerivedID(p.key)
		if err != nil {
			return err
		}
		if err := r.World().CreateEntity(id); err != nil {
			return err
		}
		if err := r.Positions().Add(id, zone.Position{Pos: p.at}); err != nil {
			return err
		}
		if err := m.val.Add(id, pinValue{}); err != nil {
			return err
		}
		r.World().MarkMoved(id)
		if p.viewer != 0 {
			r.SetViewer(p.viewer, id)
		}
	}
	return nil
}

// bump changes pin key's value, on the node that simulates it.
func (m *pinModule) bump(key uint64) bool {
	id, _ := zone.DerivedID(key)
	v, ok := m.val.Get(id)
	if !ok || !m.r.Simulated(id) {
		return false
	}
	v.N++
	m.val.MarkDirty(id)
	return true
}

// TestOneUpdateCostsOneEntryPerObservingNode: one public update of an
// entity watched by 30 clients on node B and one on node C costs its
// owner A exactly two replication entries (one per observing node, not
// one per client), in two batches, and reaches all 31 clients.
func TestOneUpdateCostsOneEntryPerObservingNode(t *testing.T) {
	t.Parallel()
	grid, err := cells.NewGrid(clusterGrid())
	if err != nil {
		t.Fatal(err)
	}
	const a, b, c = "zone-0", "zone-1", "zone-2"
	// A holds every region but the one east of (0,0), B's, and the one
	// north of it, C's; the watched pin stands in A's corner by both.
	table := func(g cells.Grid, _ []string) (*cells.Table, error) {
		owners := make([]string, g.Regions())
		for r := range owners {
			owners[r] = a
		}
		owners[g.RegionAt(1, 0)] = b
		owners[g.RegionAt(0, 1)] = c
		return cells.NewTable(g, 1, owners)
	}
	const watched = 0
	pins := []pin{{key: watched, at: torus.Pos{X: 2040, Y: 2040}}}
	for k := range 30 { // on B, all within 5 chunks of the watched pin's chunk (63, 63)
		pins = append(pins, pin{key: uint64(1 + k), at: torus.Pos{X: 2056 + 24*float64(k%6), Y: 1880 + 28*float64(k/6)}, viewer: account.ID(1 + k)})
	}
	pins = append(pins, pin{key: 31, at: torus.Pos{X: 1990, Y: 2070}, viewer: 31}) // on C
	cl := zonetest.Start(t, zonetest.Config{Nodes: 3, Grid: clusterGrid(), Table: table, Memory: true,
		Module: func(int, string) (zone.Module, error) { return &pinModule{pins: pins}, nil }})
	if got := cl.Node(a).Runtime.Table().OwnerOf(pins[0].at); got != a || grid.RegionOf(pins[1].at) != grid.RegionAt(1, 0) {
		t.Fatalf("the scene is not where the test means it: the watched pin's owner is %s", got)
	}
	watchedID, _ := zone.DerivedID(watched)
	clients := map[account.ID]*observer{}
	onNode := map[string]int{}
	for _, p := range pins[1:] {
		o := newObserver(p.viewer, nil)
		for _, n := range cl.Nodes {
			if _, ok := n.Runtime.Viewer(p.viewer); ok {
				n.Runtime.Attach(p.viewer, o)
				onNode[n.Name]++
			}
		}
		clients[p.viewer] = o
	}
	if onNode[b] != 30 || onNode[c] != 1 {
		t.Fatalf("viewers per node %v, want 30 on %s and 1 on %s", onNode, b, c)
	}
	cl.StepSync(6) // views, subscriptions, snapshots
	for acct, o := range clients {
		if _, ok := o.shown[uint64(watchedID)]; !ok || o.bad != nil {
			t.Fatalf("account %d is not shown the watched pin after the views settled (%v)", acct, o.bad)
		}
	}
	owner := cl.Node(a)
	before := owner.Runtime.ClusterStats()
	cl.StepSync(1)
	quiet := owner.Runtime.ClusterStats()
	if quiet.Entries != before.Entries || quiet.Batches != before.Batches {
		t.Fatalf("a tick where nothing changes cost %s %d entries in %d batches, want none",
			a, quiet.Entries-before.Entries, quiet.Batches-before.Batches)
	}
	if !owner.Module.(*pinModule).bump(watched) {
		t.Fatalf("%s does not simulate the watched pin", a)
	}
	cl.StepSync(1)
	after := owner.Runtime.ClusterStats()
	if d := after.Entries - quiet.Entries; d != 2 {
		t.Fatalf("one public update watched from 2 nodes (%d clients) cost its owner %d replication entries, want 2", len(clients), d)
	}
	if d := after.Batches - quiet.Batches; d != 2 {
		t.Fatalf("one public update watched from 2 nodes cost its owner %d batches, want 2", d)
	}
	cl.StepSync(1) // the observers apply it at their next tick
	want := string(binary.LittleEndian.AppendUint32(nil, 1))
	for acct, o := range clients {
		if got := o.shown[uint64(watchedID)][pinWireValue]; got != want || o.bad != nil {
			t.Fatalf("account %d holds value %x of the watched pin, want %x (%v)", acct, got, want, o.bad)
		}
	}
	t.Logf("%d clients on 2 nodes saw the update; it cost its owner 2 entries", len(clients))
}
