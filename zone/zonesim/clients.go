package zonesim

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
)

// Sight thresholds, in chunks from the client's viewer (the view's radius
// is 5): an entity within deepInside is in sight even if the node's idea
// of either position is a cut's worth of ticks stale, so its vanish is a
// blink; one within inside for missingTicks ticks of a calm network must
// be shown.
//
// Once the viewer has stood in one chunk for stillTicks ticks of a calm
// network, every chunk of its view (radius 5) is held and answered: an
// entity within the radius unshown for missingTicks ticks is missing,
// and one shown past the release margin (7 chunks or more) for as long
// is a zombie.
const (
	deepInside   = 2
	inside       = 4
	radius       = 5
	beyond       = 7
	missingTicks = 6
	stillTicks   = 8
	calmTicks    = 15 // ticks without a fault before "missing" is checked
)

// client is one account's client: what it was shown, decoded from its
// batches, checked for well-formedness as they come.
type client struct {
	acct   account.ID
	node   int
	viewer ecs.ID
	shown  map[uint64]bool // the shown entities that are not wanderers (isShown)
	// vanished are this tick's vanishes, checked against the truth after
	// the steps.
	vanished []uint64
	// failedOver are the dead node's entities this client was sent a
	// vanish of during a failover, near its viewer, not back yet: the
	// tick of the vanish (checkVanishes).
	failedOver map[uint64]uint64
	in         []int32        // per entity index: consecutive ticks within inside, not shown
	out        []int32        // per entity index: consecutive ticks beyond, shown
	vchunk     torus.ChunkPos // the viewer's chunk
	still      int            // ticks the viewer has stood in vchunk
	bad        error
	badEntity  ecs.ID
	// shownIdx holds the shown wanderers by index (id − 1, wander.ID),
	// and counting marks the indices whose in or out is above zero: with
	// the entities near the viewer they are all sight has to visit.
	shownIdx bitset
	counting bitset
	batch    []byte // deliver's buffer
}

// bitset is a set of entity indices.
type bitset []uint64

func (b *bitset) set(i int) {
	for i>>6 >= len(*b) {
		*b = append(*b, 0)
	}
	(*b)[i>>6] |= 1 << (i & 63)
}

func (b bitset) unset(i int) {
	if i>>6 < len(b) {
		b[i>>6] &^= 1 << (i & 63)
	}
}

func (b bitset) has(i int) bool { return i>>6 < len(b) && b[i>>6]&(1<<(i&63)) != 0 }

// columns files the entities the live nodes hold by chunk column, once a
// tick for every client's sight (near): the entity indices of column
// x, y are idx[start[x*ny+y]:start[x*ny+y+1]], in rising order. With
// fewer entities held than a view has chunks (the short mode's 48 against
// 121) near scans them instead and the filing is never built: it cost
// more than the sight (a 1,025-column count, prefix sum and copy a tick,
// under -race a call into the detector for each).
type columns struct {
	geo    torus.World
	chunks []torus.ChunkPos
	ok     []bool
	held   int // how many ok
	// scanBelow is the count of entities held below which near scans
	// them; below zero, the chunks of a view (geo.ChunkCount).
	scanBelow int
	built     bool
	ny        int
	start     []int32
	fill      []int32
	idx       []int32
}

func newColumns(geo torus.World, chunks []torus.ChunkPos, ok []bool) *columns {
	c := &columns{scanBelow: -1}
	c.reset(geo, chunks, ok)
	return c
}

// reset files a new tick's entities (chunks[i] where ok[i]), keeping the
// buffers; the filing is built when near first needs it.
func (c *columns) reset(geo torus.World, chunks []torus.ChunkPos, ok []bool) {
	c.geo, c.chunks, c.ok, c.built, c.held = geo, chunks, ok, false, 0
	for _, o := range ok {
		if o {
			c.held++
		}
	}
}

func (c *columns) build() {
	nx, ny := c.geo.ChunksX(), c.geo.ChunksY()
	c.ny = ny
	c.start = slices.Grow(c.start[:0], nx*ny+1)[:nx*ny+1]
	clear(c.start)
	for i, ch := range c.chunks {
		if c.ok[i] {
			c.start[int(ch.X)*ny+int(ch.Y)+1]++
		}
	}
	for k := 1; k < len(c.start); k++ {
		c.start[k] += c.start[k-1]
	}
	c.idx = slices.Grow(c.idx[:0], c.held)[:c.held]
	c.fill = append(c.fill[:0], c.start[:len(c.start)-1]...)
	for i, ch := range c.chunks {
		if c.ok[i] {
			k := int(ch.X)*ny + int(ch.Y)
			c.idx[c.fill[k]] = int32(i)
			c.fill[k]++
		}
	}
	c.built = true
}

func (c *columns) at(ch torus.ChunkPos) []int32 {
	k := int(ch.X)*c.ny + int(ch.Y)
	return c.idx[c.start[k]:c.start[k+1]]
}

// near adds to visit every entity held whose column is within radius of
// vc: the columns ChunksWithin(vc, radius, 0) yields are exactly those
// with ChunkDistance at most radius (torus), so the scan and the filing
// give one set.
func (c *columns) near(vc torus.ChunkPos, visit *bitset) {
	below := c.scanBelow
	if below < 0 {
		below = c.geo.ChunkCount(radius, 0)
	}
	if c.held < below {
		for i, o := range c.ok {
			if o && c.geo.ChunkDistance(vc, c.chunks[i]) <= radius {
				visit.set(i)
			}
		}
		return
	}
	if !c.built {
		c.build()
	}
	for ch := range c.geo.ChunksWithin(vc, radius, 0) {
		for _, i := range c.at(ch) {
			visit.set(int(i))
		}
	}
}

func newClient(a account.ID, node int) *client {
	v, _ := wander.ID(int(a) - 1)
	return &client{acct: a, node: node, viewer: v, shown: make(map[uint64]bool)}
}

func (c *client) fail(tick uint64, e uint64, format string, args ...any) {
	if c.bad == nil {
		c.badEntity = ecs.ID(e)
		c.bad = fmt.Errorf("client of account %d, tick %d: %s", c.acct, tick, fmt.Sprintf(format, args...))
	}
}

// deliver decodes one batch: an appear of an entity shown, a vanish or a
// public update of one not shown is a breach.
func (c *client) deliver(tick uint64, frames [][]byte) {
	c.batch = c.batch[:0]
	for _, f := range frames {
		c.batch = append(c.batch, f...)
	}
	err := outbox.DecodeBatch(c.batch, func(m outbox.Message) error {
		switch m.Kind {
		case outbox.KindAppear:
			if c.isShown(m.Entity) {
				c.fail(tick, m.Entity, "entity %d appeared again without a vanish", m.Entity)
			}
			c.setShown(m.Entity, true)
		case outbox.KindVanish:
			if !c.isShown(m.Entity) {
				c.fail(tick, m.Entity, "vanish of entity %d, which it was not shown", m.Entity)
			}
			c.setShown(m.Entity, false)
			c.vanished = append(c.vanished, m.Entity)
		case outbox.KindComponent:
			if m.Component != wander.WireSecret && !c.isShown(m.Entity) {
				c.fail(tick, m.Entity, "update of entity %d, which it is not shown", m.Entity)
			}
		}
		return nil
	})
	if err != nil {
		c.fail(tick, 0, "malformed batch: %v", err)
	}
}

// sight checks the client against where the entities truly stand
// (chunks[i], where ok[i], for ids[i]: every entity a live node holds
// for real; cols files them by column): no vanish of an entity deep in
// its view, and, when calm, no entity in its view unshown and none far
// away shown for missingTicks ticks.
//
// It visits only the entities within the view's radius, those shown and
// those whose counts are running, in rising index order: for any other
// the check of every entity would find it beyond the radius and not
// shown, and leave its counts at zero.
//
// A failover is no exemption (checkVanishes): the dead node's entities
// stay shown through it, whether the standby adopts them or a live node
// that held one frozen for a handoff to it takes it back.
func (c *client) sight(tick uint64, geo torus.World, ids []ecs.ID, chunks []torus.ChunkPos, ok []bool, cols *columns, calm bool, kill *killState, visit *bitset) {
	defer func() { c.vanished = c.vanished[:0] }()
	if c.in == nil {
		c.in, c.out = make([]int32, len(ids)), make([]int32, len(ids))
	}
	c.checkVanishes(tick, geo, ids, chunks, ok, kill)
	vi := index(ids, c.viewer)
	if vi < 0 || !ok[vi] {
		return
	}
	vc := chunks[vi]
	if vc == c.vchunk {
		c.still++
	} else {
		c.vchunk, c.still = vc, 0
	}
	if !calm {
		c.counting.each(len(ids), func(i int) { c.in[i], c.out[i] = 0, 0 })
		clear(c.counting)
		return
	}
	still := c.still >= stillTicks
	v := (*visit)[:0]
	v = append(v, c.counting...)
	for k, w := range c.shownIdx {
		if k < len(v) {
			v[k] |= w
		} else {
			v = append(v, w)
		}
	}
	*visit = v
	cols.near(vc, visit)
	visit.each(len(ids), func(i int) {
		id := ids[i]
		if !ok[i] {
			c.in[i], c.out[i] = 0, 0
			c.counting.unset(i)
			return
		}
		d := geo.ChunkDistance(vc, chunks[i])
		if d > radius && d < beyond {
			c.in[i], c.out[i] = 0, 0
			c.counting.unset(i)
			return
		}
		e := uint64(id)
		shown := c.isShown(e)
		if !shown && (d <= inside || still && d <= radius) {
			c.in[i]++
		} else {
			c.in[i] = 0
		}
		if shown && still && d >= beyond {
			c.out[i]++
		} else {
			c.out[i] = 0
		}
		if c.in[i] != 0 || c.out[i] != 0 {
			c.counting.set(i)
		} else {
			c.counting.unset(i)
		}
		if c.in[i] >= missingTicks {
			c.fail(tick, e, "entity %d stands %d chunks from the viewer and was not shown for %d ticks", e, d, c.in[i])
		}
		if c.out[i] >= missingTicks {
			c.fail(tick, e, "entity %d stands %d chunks from the viewer and is still shown after %d ticks: a zombie", e, d, c.out[i])
		}
	})
}

// isShown says whether entity e is shown: by its index for the ids of
// wanderers (1 … 2^24), in a map for any other.
func (c *client) isShown(e uint64) bool {
	if e >= 1 && e <= 1<<24 {
		return c.shownIdx.has(int(e - 1))
	}
	return c.shown[e]
}

// shownIDs returns the shown entities' ids, in rising order.
func (c *client) shownIDs() []uint64 {
	var out []uint64
	c.shownIdx.each(len(c.shownIdx)*64, func(i int) { out = append(out, uint64(i)+1) })
	for e := range c.shown {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

func (c *client) setShown(e uint64, on bool) {
	switch {
	case e < 1 || e > 1<<24:
		if on {
			c.shown[e] = true
		} else {
			delete(c.shown, e)
		}
	case on:
		c.shownIdx.set(int(e - 1))
	default:
		c.shownIdx.unset(int(e - 1))
	}
}

// each calls f with every index below n in the set, in rising order.
func (b bitset) each(n int, f func(i int)) {
	for k, w := range b {
		for w != 0 {
			i := k<<6 + bits.TrailingZeros64(w)
			if i >= n {
				return
			}
			f(i)
			w &= w - 1
		}
	}
}

// index is id's index in ids: wanderer i has id i+1 (wander.ID).
func index(ids []ecs.ID, id ecs.ID) int {
	i := int(id) - 1
	if i < 0 || i >= len(ids) || ids[i] != id {
		return -1
	}
	return i
}
