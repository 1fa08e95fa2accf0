package interest

import (
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

// View is the volume a subscriber holds around its anchor chunk.
type View struct {
	// Radius in columns (ring distance): a chunk is wanted when it is at
	// most Radius columns from the anchor. Default 5 (11 × 11 columns).
	Radius int
	// Slabs above and below the anchor's slab that are wanted. Default 1.
	Slabs int
	// ReleaseMargin: a held chunk is released only when it is more than
	// Radius+ReleaseMargin columns or Slabs+ReleaseMargin slabs away, so an
	// anchor pacing on a chunk edge does not make chunks flicker. Default 1.
	ReleaseMargin int
}

// DefaultView is radius 5, ±1 slab, release margin 1.
func DefaultView() View { return View{}.WithDefaults() }

// WithDefaults returns v with zero fields set to their defaults. Because
// zero means "default", a view of a single slab or with no margin is not
// expressible; no caller needs one (the spatial specification, seed 002,
// fixes ±1 slab and margin 1).
func (v View) WithDefaults() View {
	if v.Radius == 0 {
		v.Radius = 5
	}
	if v.Slabs == 0 {
		v.Slabs = 1
	}
	if v.ReleaseMargin == 0 {
		v.ReleaseMargin = 1
	}
	return v
}

// Validate checks v on world.
func (v View) Validate(world torus.World) error {
	switch {
	case v.Radius < 0:
		return errcode.Config("View.Radius", v.Radius, "must be >= 0")
	case 2*(v.Radius+v.ReleaseMargin)+1 > min(world.ChunksX(), world.ChunksY()):
		return errcode.Config("View.Radius", v.Radius, "view plus release margin wider than the torus")
	case v.Slabs < 0:
		return errcode.Config("View.Slabs", v.Slabs, "must be >= 0")
	case v.ReleaseMargin < 0:
		return errcode.Config("View.ReleaseMargin", v.ReleaseMargin, "must be >= 0")
	}
	return nil
}

// Wants reports whether a chunk at c belongs in the view around anchor.
func (v View) Wants(world torus.World, anchor, c ChunkPos) bool {
	dx, dy, ds := world.ChunkDelta(anchor, c)
	return max(abs(dx), abs(dy)) <= v.Radius && abs(ds) <= v.Slabs
}

// Keeps reports whether a held chunk at c is still inside the release
// margin around anchor.
func (v View) Keeps(world torus.World, anchor, c ChunkPos) bool {
	dx, dy, ds := world.ChunkDelta(anchor, c)
	m := v.ReleaseMargin
	return max(abs(dx), abs(dy)) <= v.Radius+m && abs(ds) <= v.Slabs+m
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// ViewManifest fills m (reusing its slices) with the change that moves
// key's announced set to view around anchor: Added holds the wanted chunks
// not yet announced, Removed the announced chunks past the release margin,
// both in a fixed order. Apply it with Apply. Wrap-aware: an anchor at
// column 0 wants columns 3995…3999 of a 4000-column torus. It costs O(view
// volume): call it when the anchor's chunk changes, not every tick.
func (s *Subscriptions[S]) ViewManifest(key S, anchor ChunkPos, view View, m *Manifest) {
	m.Reset = false
	m.Added = m.Added[:0]
	m.Removed = m.Removed[:0]
	anchor = s.world.NormaliseChunk(anchor)
	var held *chunkTable[int32]
	if i := s.lookup(key); i >= 0 {
		held = &s.states[i].held
	} else {
		held = &chunkTable[int32]{} // nothing announced
	}
	for c := range s.world.ChunksWithin(anchor, view.Radius, view.Slabs) {
		if held.get(c) == 0 {
			m.Added = append(m.Added, c)
		}
	}
	planted := s.plant != (plantedBugs{})
	for c := range held.all {
		var keep bool
		if planted {
			keep = s.plantedKeeps(view, anchor, c)
		} else {
			keep = view.Keeps(s.world, anchor, c)
		}
		if !keep {
			m.Removed = append(m.Removed, c)
		}
	}
	sortChunks(m.Removed)
}
