package game

import (
	"math"
	"slices"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/torus"
)

// nearest returns the entity that looks like kind (local or a ghost) closest to p
// within r; ties go to the smaller id so the answer never depends on
// index order.
func (g *Game) nearest(p torus.Pos, r float64, kind Kind) (ecs.ID, bool) {
	best, bestD2, found := ecs.ID(0), math.Inf(1), false
	g.r.EachWithin(p, r, func(id ecs.ID, d2 float64) {
		if v, ok := g.c.visual.Get(id); !ok || v.Kind != kind {
			return
		}
		if d2 < bestD2 || (d2 == bestD2 && id < best) {
			best, bestD2, found = id, d2, true
		}
	})
	return best, found
}

// playerGrid indexes player masters by block of gridBlock × gridBlock
// columns, the one kind every perception and den asks about; walking it
// instead of every resident keeps a mob's look-around to a few map probes.
// Blocks rather than chunks, because most probes find nobody: a den's
// 11 × 11-chunk stocking window is 9–16 block probes instead of 121, a
// mob's 3 × 3 perception window 1–4 instead of 9. A block key is the block's
// column packed into a uint64 (Go maps hash that on their fast 64-bit path;
// ChunkPos keys went through the generic hasher). Each entry keeps its
// chunk, so a query filters to exactly the chunks of its window.
type playerGrid struct {
	cells map[uint64][]gridEntry
	at    map[ecs.ID]torus.ChunkPos
}

type gridEntry struct {
	id    ecs.ID
	chunk torus.ChunkPos
}

// gridBlock is the side of a grid block in chunks.
const gridBlock = 4

// blockKey packs the block of a normalised chunk (X, Y ≥ 0).
func blockKey(c torus.ChunkPos) uint64 {
	return uint64(uint32(c.X)/gridBlock)<<32 | uint64(uint32(c.Y)/gridBlock)
}

func newPlayerGrid() playerGrid {
	return playerGrid{cells: make(map[uint64][]gridEntry), at: make(map[ecs.ID]torus.ChunkPos)}
}

func (p *playerGrid) move(id ecs.ID, c torus.ChunkPos) {
	if old, ok := p.at[id]; ok {
		if old == c {
			return
		}
		p.drop(id, old)
	}
	p.at[id] = c
	k := blockKey(c)
	p.cells[k] = append(p.cells[k], gridEntry{id: id, chunk: c})
}

func (p *playerGrid) remove(id ecs.ID) {
	if old, ok := p.at[id]; ok {
		p.drop(id, old)
		delete(p.at, id)
	}
}

func (p *playerGrid) drop(id ecs.ID, c torus.ChunkPos) {
	k := blockKey(c)
	ids := p.cells[k]
	for i, x := range ids {
		if x.id == id {
			ids[i] = ids[len(ids)-1]
			ids = ids[:len(ids)-1]
			break
		}
	}
	if len(ids) == 0 {
		delete(p.cells, k)
		return
	}
	p.cells[k] = ids
}

// nearestPlayer is nearest(p, r, masters) over the player grid: the same
// candidates (masters indexed in a chunk of the window around p's chunk),
// the same distance test and tie-break.
func (g *Game) nearestPlayer(p torus.Pos, r float64) (ecs.ID, bool) {
	rc := int(math.Ceil(r / g.geo.ChunkEdge()))
	r2 := r * r
	center := g.geo.ChunkOf(p)
	best, bestD2, found := ecs.ID(0), math.Inf(1), false
	var probedBuf [16]uint64
	probed := probedBuf[:0]
	for c := range g.geo.ChunksWithin(center, rc, 0) {
		k := blockKey(c)
		if slices.Contains(probed, k) {
			continue
		}
		probed = append(probed, k)
		for _, pl := range g.players.cells[k] {
			if pl.chunk.Slab != center.Slab || g.geo.ChunkDistance(center, pl.chunk) > rc {
				continue // in the block, outside the window
			}
			id := pl.id
			q, ok := g.c.pos.Get(id)
			if !ok {
				continue
			}
			d2 := g.geo.DistanceSq(p, q.Pos)
			if d2 <= r2 && (d2 < bestD2 || (d2 == bestD2 && id < best)) {
				best, bestD2, found = id, d2, true
			}
		}
	}
	return best, found
}
