package zone

import (
	"slices"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/replica"
	"github.com/shardwise/shardwise/torus"
)

// Ghosts held at a fence. When a peer's lease ends, its ghosts here are
// not dropped: a failover's standby adopts its entities under the same
// ids a second or so later, and every client here that saw one would
// see it vanish at the fence and appear again. They stay as they stood,
// frozen (the fence refuses everything the dead node still sends), until
// either
//   - a live node sends the entity at a higher epoch (the standby's
//     adoption, or a live source that took it back after a handoff to
//     the dead node failed): the held ghost becomes that node's ghost in
//     place, as a handoff's new owner takes one over, with no vanish;
//   - this node adopts it itself (restore takes the ghost over in place);
//   - Timers.FenceHold ticks pass (nobody had it: it never comes back),
//     or this node stops holding its chunk (nobody here sees it): then it
//     vanishes.

// fenceHeld is a ghost held at its source's fence: from whom, and the
// last tick it may wait.
type fenceHeld struct {
	peer  string
	until uint64
}

// holdFenced holds every ghost that came from peer, whose lease just
// ended, except the parked ones (nobody sees them: sweepParked drops
// them). A vanish held from peer (holdVanish) becomes a fence hold: its
// sender will not send the snapshot it waited for.
func (c *cluster) holdFenced(peer string) {
	until := c.r.w.CurrentTick().N + ticks(c.r.cfg.Timers.FenceHold)
	for _, e := range c.ents.recs {
		if e.phase != phaseGhost || e.source != peer || e.park != nil {
			continue
		}
		c.holdAtFence(e, until)
		c.stats.FenceHeld++
	}
}

// sweepFenceHeld ends the holds whose ghost another node now sends (or
// this node adopted, or that went meanwhile), and vanishes those whose
// time is up or whose chunk this node no longer holds. Run at the end of
// the tick, after every arrival and the adoptions.
func (c *cluster) sweepFenceHeld() {
	if len(c.ents.fenceHeld) == 0 {
		return
	}
	tick := c.r.w.CurrentTick().N
	for _, id := range sortedIDs(c.ents.fenceHeld) {
		e := c.ents.fenceHeld[id]
		if e == nil {
			continue // dropped by a Replace earlier in this sweep
		}
		h := *e.fence
		_, filed, ok := c.rep.Has(uint64(id))
		switch {
		case !ok || e.source != h.peer:
			c.endFenceHold(e)
		case tick > h.until || !c.isFenced(h.peer) || !c.needs(filed):
			// Not fenced any more: the peer came back under a new lease,
			// and its new incarnation knows nothing of the old one's.
			c.endFenceHold(e)
			c.stats.FenceHeldVanished++
			_ = c.rep.Replace(filed, c.asIs(nil, filed, func(e uint64) bool { return e != uint64(id) }))
		}
	}
	c.applyEvents()
}

// takeOverGhost turns the render ghost id, if there is one, into room for
// a local entity of that id about to be created, without touching the
// visibility index: whoever sees it here goes on seeing it (as a
// handoff's target takes over a ghost). It returns where the ghost was
// filed in the index, if it was.
func (c *cluster) takeOverGhost(id ecs.ID) (filed torus.ChunkPos, wasIndexed bool) {
	r := c.r
	filed, wasIndexed = r.vis.ChunkOf(id)
	if r.ghost.Has(id) {
		_ = r.w.Evict(id) // a simulation ghost: the forget hook keeps the index
	}
	if st, _, ok := c.rep.Has(uint64(id)); ok {
		// A vanish one step after the ghost's stamp: the replica forgets
		// it; Drain drops the event, so the index keeps the entry.
		_, _ = c.rep.Apply(replica.Update{Entity: uint64(id), Stamp: replica.Stamp{Epoch: st.Epoch, Seq: st.Seq + 1},
			Frames: outbox.AppendVanishFrame(nil, uint64(id), interest.Gone)})
		c.rep.Drain(nil)
	}
	c.takeOver(id) // its ghost, holds and went record go
	return filed, wasIndexed
}

// adoptedInPlace finishes restore's take-over of a ghost: the adopted
// entity stays filed where its ghost was when it stands there (the rest
// of a reindex runs at the end of the tick), and the nodes that observe
// it get its whole state from here.
func (c *cluster) adoptedInPlace(id ecs.ID, filed torus.ChunkPos, wasIndexed bool) {
	r := c.r
	p, ok := r.pos.Get(id)
	if wasIndexed && ok && filed == r.geo.ChunkOf(p.Pos) {
		c.settle = append(c.settle, id)
	} else {
		r.w.MarkMoved(id)
	}
	c.adopted = append(c.adopted, id)
	if wasIndexed {
		obs := r.vis.AppendObserversOf(nil, id)
		c.wasGhost[id] = slices.DeleteFunc(obs, func(s Subscriber) bool { return !isNode(s) })
	}
}

// checkFenceHeld checks invariant 11: a ghost held at a fence is a render
// ghost of the peer it was held from, that peer is fenced here, and its
// bound is not past; every ghost of a fenced peer is held (or parked,
// unseen, until the same tick's sweep).
func (c *cluster) checkFenceHeld(breach func(int, ecs.ID, string, ...any)) {
	tick := c.r.w.CurrentTick().N
	for id, e := range c.ents.fenceHeld {
		h := *e.fence
		switch src, ok := c.sourceOf(id); {
		case !ok || src != h.peer:
			breach(11, id, "is held at %s's fence but its render ghost's source is %q", h.peer, src)
		case !c.isFenced(h.peer):
			breach(11, id, "is held at %s's fence but %s is not fenced here", h.peer, h.peer)
		case tick > h.until:
			breach(11, id, "is held at %s's fence past its bound (tick %d, now %d)", h.peer, h.until, tick)
		}
	}
	for id, e := range c.ents.recs {
		if e.phase == phaseGhost && e.fence == nil && c.isFenced(e.source) {
			breach(11, id, "is a render ghost of %s, which is fenced, and not held at its fence", e.source)
		}
	}
}
