package zonesim

import (
	"bytes"
	"fmt"

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
	shown  map[uint64]bool
	// vanished are this tick's vanishes, checked against the truth after
	// the steps.
	vanished  []uint64
	in        []int32        // per entity index: consecutive ticks within inside, not shown
	out       []int32        // per entity index: consecutive ticks beyond, shown
	vchunk    torus.ChunkPos // the viewer's chunk
	still     int            // ticks the viewer has stood in vchunk
	bad       error
	badEntity ecs.ID
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
	err := outbox.DecodeBatch(bytes.Join(frames, nil), func(m outbox.Message) error {
		switch m.Kind {
		case outbox.KindAppear:
			if c.shown[m.Entity] {
				c.fail(tick, m.Entity, "entity %d appeared again without a vanish", m.Entity)
			}
			c.shown[m.Entity] = true
		case outbox.KindVanish:
			if !c.shown[m.Entity] {
				c.fail(tick, m.Entity, "vanish of entity %d, which it was not shown", m.Entity)
			}
			delete(c.shown, m.Entity)
			c.vanished = append(c.vanished, m.Entity)
		case outbox.KindComponent:
			if m.Component != wander.WireSecret && !c.shown[m.Entity] {
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
// for real): no vanish of an entity deep in its view, and, when calm, no
// entity in its view unshown and none far away shown for missingTicks
// ticks.
//
// In a failover (recovering), the dead node's entities vanish at its
// fence and come back on the standby, while an entity a live node held
// frozen for a handoff to it comes back at once: its vanish is no blink.
func (c *client) sight(tick uint64, geo torus.World, ids []ecs.ID, chunks []torus.ChunkPos, ok []bool, calm, recovering bool) {
	defer func() { c.vanished = c.vanished[:0] }()
	if c.in == nil {
		c.in, c.out = make([]int32, len(ids)), make([]int32, len(ids))
	}
	vi := index(ids, c.viewer)
	if vi < 0 || !ok[vi] {
		return
	}
	vc := chunks[vi]
	for _, e := range c.vanished {
		if i := index(ids, ecs.ID(e)); !recovering && i >= 0 && ok[i] && !c.shown[e] && geo.ChunkDistance(vc, chunks[i]) <= deepInside {
			c.fail(tick, e, "entity %d vanished %d chunks from the viewer: a blink", e, geo.ChunkDistance(vc, chunks[i]))
		}
	}
	if vc == c.vchunk {
		c.still++
	} else {
		c.vchunk, c.still = vc, 0
	}
	still := calm && c.still >= stillTicks
	for i, id := range ids {
		if !ok[i] || !calm {
			c.in[i], c.out[i] = 0, 0
			continue
		}
		d := geo.ChunkDistance(vc, chunks[i])
		if d > radius && d < beyond {
			c.in[i], c.out[i] = 0, 0
			continue
		}
		e := uint64(id)
		shown := c.shown[e]
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
		if c.in[i] >= missingTicks {
			c.fail(tick, e, "entity %d stands %d chunks from the viewer and was not shown for %d ticks", e, d, c.in[i])
		}
		if c.out[i] >= missingTicks {
			c.fail(tick, e, "entity %d stands %d chunks from the viewer and is still shown after %d ticks: a zombie", e, d, c.out[i])
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
