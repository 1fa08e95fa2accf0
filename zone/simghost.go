package zone

import (
	"math"
	"slices"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
)

// Simulation ghosts. Inside the interaction band (Bands.Interaction
// around the node's regions) a foreign entity is more than a render
// ghost: it is a real ECS entity with the same id, the Ghost marker and
// the decoded values of its public components, so perception and area
// queries find it, while every system's query excludes it. The runtime
// alone writes it, from its render ghost, after every update; it leaves
// the world (Evict: no vanish, the render ghost goes on) when the entity
// walks out of the band, and with its render ghost.

// computeBand returns the foreign chunks (slab 0) within the interaction
// band of the regions this node owns.
func (c *cluster) computeBand() map[torus.ChunkPos]bool {
	r := c.r
	t := r.terr.Table()
	band := make(map[torus.ChunkPos]bool)
	edge := r.geo.ChunkEdge()
	k := int32(math.Ceil(r.cfg.Bands.Interaction / edge))
	if k <= 0 {
		return band
	}
	for _, reg := range t.RegionsOf(r.cfg.Name) {
		minX, minY, maxX, maxY := r.grid.Bounds(reg)
		x0, y0 := int32(math.Floor(minX/edge)), int32(math.Floor(minY/edge))
		x1, y1 := int32(math.Ceil(maxX/edge))-1, int32(math.Ceil(maxY/edge))-1
		for y := y0 - k; y <= y1+k; y++ {
			for x := x0 - k; x <= x1+k; x++ {
				if x >= x0 && x <= x1 && y >= y0 && y <= y1 {
					if x == x0 && y > y0 && y < y1 { // skip the interior row by row
						x = x1 - 1
					}
					continue
				}
				ch := r.geo.NormaliseChunk(torus.ChunkPos{X: x, Y: y})
				if t.OwnerOfChunk(ch) != r.cfg.Name {
					band[ch] = true
				}
			}
		}
	}
	return band
}

// inBand reports whether a ghost standing in ch is to be simulated here.
func (c *cluster) inBand(ch torus.ChunkPos) bool { return c.band[c.r.geo.NormaliseChunk(ch)] }

// syncSimGhost makes the ECS side of ghost id match its render ghost:
// present with the current values while it stands in the band, absent
// otherwise.
func (c *cluster) syncSimGhost(id ecs.ID) {
	r := c.r
	_, ch, ok := c.rep.Has(uint64(id))
	if !ok || !c.inBand(ch) {
		if r.ghost.Has(id) {
			_ = r.w.Evict(id)
		}
		return
	}
	if !r.w.Alive(id) {
		if r.w.CreateEntity(id) != nil || r.ghost.Add(id, Ghost{}) != nil {
			return
		}
	} else if !r.ghost.Has(id) {
		return // a local entity of that id: never overwritten
	}
	for _, s := range r.synced {
		if s.decode == nil {
			continue
		}
		f, ok := c.rep.Frame(uint64(id), s.wire)
		if !ok {
			continue
		}
		m, _, err := outbox.ReadFrame(f)
		if err == nil {
			err = s.decode(id, m.Payload)
		}
		if err != nil {
			c.stats.Refused++
		}
	}
	for _, fn := range r.onReindex {
		fn(id, ch)
	}
}

// SimGhosts reports how many simulation ghosts the node holds.
func (r *Runtime) SimGhosts() int { return r.ghost.Len() }

// bandChanged makes next the band and returns the chunks that entered or
// left it (to re-plan).
func (c *cluster) bandChanged(next map[torus.ChunkPos]bool) []torus.ChunkPos {
	var diff []torus.ChunkPos
	for ch := range c.band {
		if !next[ch] {
			diff = append(diff, ch)
		}
	}
	for ch := range next {
		if !c.band[ch] {
			diff = append(diff, ch)
		}
	}
	c.band = next
	// Ghosts whose chunk entered or left the band (the others keep what
	// they are).
	var ids []ecs.ID
	var residents []uint64
	for _, ch := range diff {
		residents = c.rep.AppendResidents(residents[:0], ch)
		for _, e := range residents {
			if c.isGhost(ecs.ID(e)) {
				ids = append(ids, ecs.ID(e))
			}
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		c.syncSimGhost(id)
	}
	return diff
}

// ClaimID frees id for a local entity the module is about to create (a
// den of a column whose region this node just gained, under the id every
// node derives): a ghost of that id, sent by the node that had it, is
// dropped here (no vanish to local clients: the entity goes on under the
// same id). It reports false when a local entity already has the id.
func (r *Runtime) ClaimID(id ecs.ID) bool {
	if !r.isGhost(id) {
		return !r.w.Alive(id)
	}
	c := r.cluster
	c.dropRenderGhost(id)
	c.dropGhost(id)
	r.vis.Evict(id)
	if r.w.Alive(id) {
		_ = r.w.Evict(id)
	}
	return !r.w.Alive(id)
}
