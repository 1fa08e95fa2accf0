package zone

import (
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
)

// RenderGhost is what a node holds of a foreign entity it shows its
// clients: who sends it, at which epoch, and where it stands.
type RenderGhost struct {
	// Source is the peer that sends the ghost (the entity's simulator as
	// far as this node knows).
	Source string
	// Epoch is the epoch of the last update applied.
	Epoch uint64
	// Chunk is the chunk it is filed under.
	Chunk torus.ChunkPos
	// Pos is its position as its owner last sent it, when the module
	// syncs positions (SyncPosition) and one came; HasPos says so.
	Pos    torus.Pos
	HasPos bool
	// Parked says the ghost's chunk is no longer held here and the ghost
	// waits, unseen, in case its source still sends a delta (parkChunk);
	// Held says a vanish of it (or a snapshot that left it out) is held
	// back until the source's snapshot of a chunk next to it comes
	// (holdVanish, holdUnlisted); Fenced says its source's lease ended and
	// it stands as it was until a live node sends it at a higher epoch
	// (a standby's adoption) or Timers.FenceHold passes (fencehold.go).
	// For scenario scripts (zonesim).
	Parked, Held, Fenced bool
}

// RenderGhost returns this node's render ghost of id, and false when id is
// not one here (a local entity, or unknown). Like the world, it is read on
// the goroutine that steps the runtime.
func (r *Runtime) RenderGhost(id ecs.ID) (RenderGhost, bool) {
	if r.cluster == nil {
		return RenderGhost{}, false
	}
	src, ok := r.cluster.sourceOf(id)
	if !ok {
		return RenderGhost{}, false
	}
	stamp, ch, ok := r.cluster.rep.Has(uint64(id))
	if !ok {
		return RenderGhost{}, false
	}
	g := RenderGhost{Source: src, Epoch: stamp.Epoch, Chunk: ch}
	g.Parked, g.Held, g.Fenced = r.cluster.isParked(id), r.cluster.isHeld(id), r.cluster.isFenceHeld(id)
	for _, s := range r.synced {
		if s.store != r.pos {
			continue
		}
		f, ok := r.cluster.rep.Frame(uint64(id), s.wire)
		if !ok {
			break
		}
		m, _, err := outbox.ReadFrame(f)
		if err != nil {
			break
		}
		if p, err := DecodePos(m.Payload); err == nil {
			g.Pos, g.HasPos = p, true
		}
	}
	return g, true
}
