package zone

import (
	"slices"

	"github.com/shardwise/shardwise/cells"
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
//   - every live simulator of its chunk, and every node whose adoption
//     query named it, has sent a snapshot of the chunk without it under
//     a table that names the dead peer nowhere near the chunk (the
//     failover table, or one that moved the region away): the adopters
//     answer a subscription only once their adoption is over (publish),
//     so the entity is not there (it was adopted elsewhere, where this
//     node does not look, or not at all), and it vanishes, unless one of
//     them still owes this node a snapshot of a chunk next to it, or
//     is the standby of a region a move in flight took from the dead
//     peer whose adoption query has not been answered here yet
//     (notThere; the table's arrival asks those simulators for the chunk
//     again);
//   - Timers.FenceHold ticks pass (nobody had it: it never comes back),
//     or this node stops holding its chunk (nobody here sees it): then it
//     vanishes.

// fenceHeld is a ghost held at its source's fence: from whom, and the
// last tick it may wait; once armed (the table, version armedAt, names
// peer nowhere near its chunk), the nodes whose snapshot of its chunk,
// sent under that table or a later one, did not list it.
type fenceHeld struct {
	peer    string
	until   uint64
	armed   bool
	armedAt uint64
	unlists []string
	// askers are the nodes whose adoption query, answered here, named
	// the entity: each adopts it unless another claims it, and may
	// hand it on to the chunk's owner after its snapshot went.
	askers []string
	// movers are the standbys of the regions within reach of its chunk
	// that a move in flight took from peer (the table before the held
	// one named peer, the held one another node): each holds peer's
	// records there and adopts them at the lease's end, to hand them on
	// (movedStandbys); heard are the nodes whose adoption query for
	// peer was answered here, naming it or not.
	movers []string
	heard  []string
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
		if _, filed, ok := c.rep.Has(uint64(e.id)); ok && e.fence != nil {
			e.fence.movers = c.movedStandbys(peer, filed)
		}
		c.stats.FenceHeld++
	}
}

// movedStandbys returns the live nodes, other than this one, that hold
// dead peer's checkpoint records of a region within reach of ch (as
// simulators counts) that the held table moved away from peer: the
// table before it named peer the owner. At peer's lease end each adopts
// what peer had there and hands it on to the region's owner; it is no
// simulator of ch, and its adoption query, which names the entity, may
// still be on the wire when the chunk's simulators have already left
// the held ghost out (zonesim nodes6 seed 31).
func (c *cluster) movedStandbys(peer string, ch torus.ChunkPos) []string {
	table := c.r.terr.Table()
	edge := c.r.geo.ChunkEdge()
	o := c.r.geo.ChunkOrigin(ch)
	centre := torus.Pos{X: o.X + edge/2, Y: o.Y + edge/2}
	reach := c.r.cfg.Bands.HandoffMargin + edge*0.7072
	var regs []cells.RegionID
	for _, d := range [][2]float64{{0, 0}, {-1, -1}, {0, -1}, {1, -1}, {-1, 0}, {1, 0}, {-1, 1}, {0, 1}, {1, 1}} {
		p := c.r.geo.Normalise(torus.Pos{X: centre.X + d[0]*reach, Y: centre.Y + d[1]*reach})
		if reg := c.r.grid.RegionOf(p); !slices.Contains(regs, reg) {
			regs = append(regs, reg)
		}
	}
	var live []string
	var out []string
	for _, reg := range regs {
		if table.Owner(reg) == peer || c.namedOwner(table, reg, peer) != peer {
			continue // peer's still (the failover table's standby simulates it), or never peer's
		}
		if live == nil {
			live = c.liveNodes()
		}
		if s := Standby(reg, peer, live); s != "" && s != c.r.cfg.Name && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// heardFrom notes that asker's adoption query for the dead nodes dead
// was answered here: a mover among them that did not name a held ghost
// does not adopt it.
func (c *cluster) heardFrom(asker string, dead []string) {
	for _, e := range c.ents.fenceHeld {
		if h := e.fence; slices.Contains(dead, h.peer) && !slices.Contains(h.heard, asker) {
			h.heard = append(h.heard, asker)
		}
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
		case c.notThere(h, filed):
			c.endFenceHold(e)
			c.stats.FenceHeldUnlisted++
			_ = c.rep.Replace(filed, c.asIs(nil, filed, func(e uint64) bool { return e != uint64(id) }))
		case !h.armed && !c.namesNear(h.peer, filed):
			// The failover table is here: the chunk's simulators are
			// asked for it again, and their answers say whether it is
			// there.
			e.fence.armed, e.fence.armedAt = true, c.r.terr.Table().Version()
			for _, p := range c.wants[filed] {
				c.resyncChunk(p, filed)
			}
		}
	}
	c.applyEvents()
}

// namesNear reports whether the held table names peer as the owner of a
// region within reach of ch (as simulators counts, fenced or not).
func (c *cluster) namesNear(peer string, ch torus.ChunkPos) bool {
	edge := c.r.geo.ChunkEdge()
	o := c.r.geo.ChunkOrigin(ch)
	centre := torus.Pos{X: o.X + edge/2, Y: o.Y + edge/2}
	owners := c.r.terr.Table().AppendOwnersWithin(nil, centre, c.r.cfg.Bands.HandoffMargin+edge*0.7072, "")
	return slices.Contains(owners, peer)
}

// unlistedAtFence notes that from's snapshot of its chunk, sent under
// table version table, does not list id, a ghost held at a fence there
// since the failover table came: once every simulator of the chunk has
// said so under that table or a later one, sweepFenceHeld ends it. A
// snapshot sent under an older table may come from a node that has not
// started its adoption yet.
func (c *cluster) unlistedAtFence(from string, id ecs.ID, table uint64) {
	e := c.ents.fenceHeld[id]
	if e == nil {
		return
	}
	h := e.fence
	if !h.armed || table < h.armedAt || slices.Contains(h.unlists, from) {
		return
	}
	h.unlists = append(h.unlists, from)
}

// notThere reports whether every simulator of ch, the chunk where the
// held ghost h stands, has sent ch without it since the failover table,
// and none of them still owes this node a snapshot of a chunk next to
// ch (the adopter restores an entity where its checkpoint has it, up to
// a few ticks' walk away: one it sends there takes the ghost over).
func (c *cluster) notThere(h fenceHeld, ch torus.ChunkPos) bool {
	if !h.armed || len(h.unlists) == 0 || c.bugs.noHeldEnd || c.adopting() {
		return false // (this node may be the one to adopt it)
	}
	// The table's simulators, not the wants: the re-plan after the
	// failover table reaches a chunk some ticks later, and until then
	// the wants may lack the adopter.
	sims := c.simulators(nil, ch)
	if len(sims) == 0 {
		return false
	}
	for _, p := range sims {
		if !slices.Contains(h.unlists, p) || c.pendingNear(p, ch) || c.awaitingNear(p, ch) {
			return false
		}
	}
	// An adopter that is no simulator here (the standby of a region a
	// move gave away as its owner died: it hands what it adopts on)
	// sends no snapshot of ch: the hold waits for its entity (or for
	// Timers.FenceHold).
	for _, p := range h.askers {
		if !slices.Contains(h.unlists, p) && c.peerLive(p, c.leaseOf[p]) {
			return false
		}
	}
	// A mover whose query has not come yet may name it (then it is an
	// asker, above).
	for _, p := range h.movers {
		if !slices.Contains(h.heard, p) && !slices.Contains(h.unlists, p) && c.peerLive(p, c.leaseOf[p]) && !c.bugs.noMoverWait {
			return false
		}
	}
	return true
}

// askedAbout notes that asker's adoption query named id: if it is held
// at a fence here, asker may adopt it (notThere).
func (c *cluster) askedAbout(asker string, id ecs.ID) {
	if e := c.ents.fenceHeld[id]; e != nil && !slices.Contains(e.fence.askers, asker) {
		e.fence.askers = append(e.fence.askers, asker)
	}
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
