package game

import (
	"math"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/torus"
)

// eachWithin calls fn for every indexed entity within radius r of p
// (wrap-aware, inclusive), with its squared distance. It walks the chunks
// of the visibility index within ceil(r / chunk edge) columns of p's chunk
// on p's slab, so the result is as of the last reindex (the end of the
// previous tick) for membership and current for distance.
func (g *Game) eachWithin(p torus.Pos, r float64, fn func(id ecs.ID, d2 float64)) {
	rc := int(math.Ceil(r / g.geo.ChunkEdge()))
	r2 := r * r
	for c := range g.geo.ChunksWithin(g.geo.ChunkOf(p), rc, 0) {
		g.residents = g.vis.AppendResidents(g.residents[:0], c)
		for _, id := range g.residents {
			q, ok := g.c.pos.Get(id)
			if !ok {
				continue
			}
			if d2 := g.geo.DistanceSq(p, q.Pos); d2 <= r2 {
				fn(id, d2)
			}
		}
	}
}

// nearest returns the entity having component kind that is closest to p
// within r; ties go to the smaller id so the answer never depends on
// index order.
func (g *Game) nearest(p torus.Pos, r float64, kind ecs.Component) (ecs.ID, bool) {
	best, bestD2, found := ecs.ID(0), math.Inf(1), false
	g.eachWithin(p, r, func(id ecs.ID, d2 float64) {
		if !kind.Has(id) {
			return
		}
		if d2 < bestD2 || (d2 == bestD2 && id < best) {
			best, bestD2, found = id, d2, true
		}
	})
	return best, found
}

// playerGrid indexes player masters by chunk, the one kind every
// perception and den asks about; walking it instead of every resident
// keeps a mob's look-around to a handful of map probes.
type playerGrid struct {
	cells map[torus.ChunkPos][]ecs.ID
	at    map[ecs.ID]torus.ChunkPos
}

func newPlayerGrid() playerGrid {
	return playerGrid{cells: make(map[torus.ChunkPos][]ecs.ID), at: make(map[ecs.ID]torus.ChunkPos)}
}

func (p *playerGrid) move(id ecs.ID, c torus.ChunkPos) {
	if old, ok := p.at[id]; ok {
		if old == c {
			return
		}
		p.drop(id, old)
	}
	p.at[id] = c
	p.cells[c] = append(p.cells[c], id)
}

func (p *playerGrid) remove(id ecs.ID) {
	if old, ok := p.at[id]; ok {
		p.drop(id, old)
		delete(p.at, id)
	}
}

func (p *playerGrid) drop(id ecs.ID, c torus.ChunkPos) {
	ids := p.cells[c]
	for i, x := range ids {
		if x == id {
			ids[i] = ids[len(ids)-1]
			ids = ids[:len(ids)-1]
			break
		}
	}
	if len(ids) == 0 {
		delete(p.cells, c)
		return
	}
	p.cells[c] = ids
}

// nearestPlayer is nearest(p, r, masters) over the player grid.
func (g *Game) nearestPlayer(p torus.Pos, r float64) (ecs.ID, bool) {
	rc := int(math.Ceil(r / g.geo.ChunkEdge()))
	r2 := r * r
	best, bestD2, found := ecs.ID(0), math.Inf(1), false
	for c := range g.geo.ChunksWithin(g.geo.ChunkOf(p), rc, 0) {
		for _, id := range g.players.cells[c] {
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
