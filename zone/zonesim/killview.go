package zonesim

import (
	"slices"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/torus"
)

// checkVanishes checks this tick's vanishes against the truth: none of
// an entity a live node holds within deepInside chunks of the viewer (a
// blink), and, once a node is killed (Config.Kill), none of an entity
// the dead node held within deepInside chunks of the viewer that comes
// back (adopted by a standby, or taken back by the live node that had
// offered it to the dead one) within deepInside chunks of it: a client
// whose view covers one of the dead node's entities sees it stand still
// through the failover and go on, never vanish and appear again. The
// viewer's chunk is where a live node holds it, or, while it is one of
// the dead node's entities not back yet, where the dead node had it.
func (c *client) checkVanishes(tick uint64, geo torus.World, ids []ecs.ID, chunks []torus.ChunkPos, ok []bool, kill *killState) {
	var vc torus.ChunkPos
	if vi := index(ids, c.viewer); vi >= 0 && ok[vi] {
		vc = chunks[vi]
	} else if p, dead := kill.deadPos(c.viewer); dead {
		vc = geo.ChunkOf(p)
	} else {
		return
	}
	for _, e := range c.vanished {
		i := index(ids, ecs.ID(e))
		if i < 0 || c.isShown(e) {
			continue
		}
		if ok[i] {
			if d := geo.ChunkDistance(vc, chunks[i]); d <= deepInside {
				c.fail(tick, e, "entity %d vanished %d chunks from the viewer: a blink", e, d)
			}
			continue
		}
		if p, dead := kill.deadPos(ecs.ID(e)); dead && geo.ChunkDistance(vc, geo.ChunkOf(p)) <= deepInside {
			if c.failedOver == nil {
				c.failedOver = make(map[uint64]uint64)
			}
			c.failedOver[e] = tick
		}
	}
	if len(c.failedOver) == 0 {
		return
	}
	for _, e := range slices.Sorted(func(yield func(uint64) bool) {
		for e := range c.failedOver {
			if !yield(e) {
				return
			}
		}
	}) {
		i := index(ids, ecs.ID(e))
		if i < 0 || !ok[i] {
			continue // not back (yet, or ever: the dead node took it after its last checkpoint)
		}
		at := c.failedOver[e]
		delete(c.failedOver, e)
		if d := geo.ChunkDistance(vc, chunks[i]); d <= deepInside {
			c.fail(tick, e, "entity %d of the dead node vanished at tick %d, near the viewer, and is back on a live node %d chunks from it: a blink across the failover", e, at, d)
		}
	}
}

// deadPos returns where the dead node had id when it was killed, for an
// entity it held for real then.
func (k *killState) deadPos(id ecs.ID) (torus.Pos, bool) {
	if k == nil || !k.on || !k.dead {
		return torus.Pos{}, false
	}
	p, ok := k.pos[id]
	return p, ok
}
