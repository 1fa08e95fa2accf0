package zone

import (
	"fmt"
	"math"
	"slices"

	"github.com/shardwise/shardwise/ecs"
)

// One record per entity. What the protocol knows of an entity on this
// node (its epoch, a handoff in flight, the peer that sends its ghost, a
// hold on that ghost, where it went) is one record in one table, with a
// phase; the transitions below are the only code that changes a record,
// and each checks the phase it leaves. The package doc draws the phases.
//
// A local entity at the first epoch with nothing pending has no record
// (most of a node's entities): the table holds what differs from that, and
// a record goes as soon as nothing is left in it, so the table is bounded
// by the entities and ghosts the node holds plus the went records.
//
// Per-tick scratch is not entity state and stays out of the table
// (cluster.parting, goneGhosts, wasGhost: filled during one tick, read by
// that tick's flush and cleared by it; clearTick).

// phase is where an entity stands on this node.
type phase uint8

const (
	// phaseGone: no protocol phase here (no ghost, no local entity the
	// protocol knows of); the record lives only for its went record
	// (where intents follow it). A module may create a local entity
	// under the id meanwhile (a den's derived id): its first local
	// transition makes the record simulated (created).
	phaseGone phase = iota
	// phaseSimulated: a local entity that systems write (no Frozen
	// marker); a record only when it differs from a fresh one (an epoch
	// above the first, a retry wait, outside or rehomed).
	phaseSimulated
	// phaseOutgoing: a local entity frozen while its handoff waits for
	// the target's answer (entity.out).
	phaseOutgoing
	// phaseAdopted: a handed-over entity this node took, frozen until its
	// ticks are past the source's last one (entity.thawAt).
	phaseAdopted
	// phaseGhost: a render ghost from entity.source; a simulation ghost
	// too (the ECS Ghost marker) while it stands in the interaction band,
	// and possibly parked (entity.park) or with a vanish held
	// (entity.held).
	phaseGhost
)

func (p phase) String() string {
	switch p {
	case phaseGone:
		return "gone"
	case phaseSimulated:
		return "simulated"
	case phaseOutgoing:
		return "outgoing"
	case phaseAdopted:
		return "adopted"
	case phaseGhost:
		return "ghost"
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// local reports whether the phase is a local entity's.
func (p phase) local() bool { return p == phaseSimulated || p == phaseOutgoing || p == phaseAdopted }

// entity is one entity's protocol state on this node.
type entity struct {
	id    ecs.ID
	phase phase

	// Local phases.
	epoch   uint64 // its replication epoch; 0 for firstEpoch
	retryAt uint64 // no handoff before this tick (after a refusal or a failed encoding); 0: none
	// outside: it stands in a region another node owns (within the
	// margin, or waiting to go): considerHandoff checks it at every tick.
	outside bool
	// rehomed: it stands in a region whose owner a table changed (to
	// another node): it goes whatever the margin (handoffTarget).
	rehomed bool
	out     *outgoing // phaseOutgoing; kept past the entity's destruction (the known hole, invariant 5)
	thawAt  uint64    // phaseAdopted: frozen until a tick after this time (ms)

	// phaseGhost.
	source string       // the peer that sends its render ghost
	park   *parkedGhost // parked: its chunk is held no more (parkChunk)
	held   *heldVanish  // its vanish held back (holdVanish, holdUnlisted)
	fence  *fenceHeld   // held as it stands: its source's lease ended (fencehold.go)

	// Any phase: handed on from here, or its ghost went out of sight;
	// intents follow it there until the record expires.
	went *wentTo
}

// entities is the table, with indexes of the records a tick walks. Only
// the methods of this file change it.
type entities struct {
	recs map[ecs.ID]*entity
	// Indexes: the records in phaseOutgoing and phaseAdopted, those
	// outside, parked, held, held at a fence, or with a went record.
	outgoing, adopted, outside, parked, held, fenceHeld, went map[ecs.ID]*entity
	ghosts                                                    int // records in phaseGhost
	spare                                                     []*entity

	// wentFrom is at most every went record's until (setWent lowers it,
	// expireWentRecords raises it to the least): before a tick past it no
	// record can expire, and the walk over them all is skipped.
	wentFrom uint64

	// first keeps the first transitions refused (ClusterStats.PhaseErrors
	// counts them all), for CheckInvariants (invariant 14).
	first []refusal
}

// refusal is one transition refused: the entity, and what it found.
type refusal struct {
	id  ecs.ID
	msg string
}

func newEntities() entities {
	return entities{
		recs:      make(map[ecs.ID]*entity),
		outgoing:  make(map[ecs.ID]*entity),
		adopted:   make(map[ecs.ID]*entity),
		outside:   make(map[ecs.ID]*entity),
		parked:    make(map[ecs.ID]*entity),
		held:      make(map[ecs.ID]*entity),
		fenceHeld: make(map[ecs.ID]*entity),
		went:      make(map[ecs.ID]*entity),
	}
}

// get returns id's record, or nil.
func (t *entities) get(id ecs.ID) *entity { return t.recs[id] }

// phaseOf returns id's phase as its record says: a local entity without a
// record is phaseSimulated as far as the caller knows it is local;
// phaseGone says no record.
func (t *entities) phaseOf(id ecs.ID) phase {
	if e := t.recs[id]; e != nil {
		return e.phase
	}
	return phaseGone
}

// ensure returns id's record, making one in phase p when there is none.
func (t *entities) ensure(id ecs.ID, p phase) *entity {
	if e := t.recs[id]; e != nil {
		return e
	}
	var e *entity
	if n := len(t.spare); n > 0 {
		e, t.spare = t.spare[n-1], t.spare[:n-1]
	} else {
		e = new(entity)
	}
	e.id, e.phase = id, p
	t.recs[id] = e
	if p == phaseGhost {
		t.ghosts++
	}
	return e
}

// tidy drops e if nothing is left in it: a gone record without a went
// record, a simulated one like a fresh entity.
func (t *entities) tidy(e *entity) {
	if e.went != nil {
		return
	}
	switch e.phase {
	case phaseGone:
	case phaseSimulated:
		if e.epoch != 0 || e.retryAt != 0 || e.outside || e.rehomed {
			return
		}
	default:
		return
	}
	delete(t.recs, e.id)
	*e = entity{}
	t.spare = append(t.spare, e)
}

// setPhase moves e to p, keeping the phase indexes.
func (t *entities) setPhase(e *entity, p phase) {
	switch e.phase {
	case phaseOutgoing:
		delete(t.outgoing, e.id)
		e.out = nil
	case phaseAdopted:
		delete(t.adopted, e.id)
		e.thawAt = 0
	case phaseGhost:
		t.ghosts--
		e.source = ""
		if e.park != nil {
			delete(t.parked, e.id)
			e.park = nil
		}
		if e.held != nil {
			delete(t.held, e.id)
			e.held = nil
		}
		if e.fence != nil {
			delete(t.fenceHeld, e.id)
			e.fence = nil
		}
	}
	if !p.local() {
		e.epoch, e.retryAt = 0, 0
		t.setOutside(e, false)
		e.rehomed = false
	}
	e.phase = p
	switch p {
	case phaseOutgoing:
		t.outgoing[e.id] = e
	case phaseAdopted:
		t.adopted[e.id] = e
	case phaseGhost:
		t.ghosts++
	}
}

func (t *entities) setOutside(e *entity, on bool) {
	if e.outside == on {
		return
	}
	e.outside = on
	if on {
		t.outside[e.id] = e
	} else {
		delete(t.outside, e.id)
	}
}

// refused notes a transition that found id in a phase it does not leave:
// a protocol error, counted and logged, the record left as it was; the
// first few are reported by CheckInvariants as breaches of invariant 14,
// so the tests and the simulation fail on it.
func (c *cluster) refused(id ecs.ID, op string, found phase) {
	t := &c.ents
	c.stats.PhaseErrors++
	if len(t.first) < maxBreaches {
		t.first = append(t.first, refusal{id: id, msg: fmt.Sprintf("%s found it %s", op, found)})
	}
	c.r.cfg.Logger.Error("zone: entity protocol error", "entity", id, "transition", op, "phase", found.String())
}

// ---- reads ----

// isGhost reports whether id is a render ghost here.
func (c *cluster) isGhost(id ecs.ID) bool {
	e := c.ents.recs[id]
	return e != nil && e.phase == phaseGhost
}

// sourceOf returns the peer that sends render ghost id.
func (c *cluster) sourceOf(id ecs.ID) (string, bool) {
	if e := c.ents.recs[id]; e != nil && e.phase == phaseGhost {
		return e.source, true
	}
	return "", false
}

// outgoingOf returns the handoff in flight of id, or nil.
func (c *cluster) outgoingOf(id ecs.ID) *outgoing {
	if e := c.ents.recs[id]; e != nil {
		return e.out
	}
	return nil
}

// thawing reports whether id is adopted and still frozen.
func (c *cluster) thawing(id ecs.ID) bool { return c.ents.phaseOf(id) == phaseAdopted }

// wentOf returns id's went record.
func (c *cluster) wentOf(id ecs.ID) (wentTo, bool) {
	if e := c.ents.recs[id]; e != nil && e.went != nil {
		return *e.went, true
	}
	return wentTo{}, false
}

// retryAtOf returns the tick before which id is not handed over again.
func (c *cluster) retryAtOf(id ecs.ID) uint64 {
	if e := c.ents.recs[id]; e != nil {
		return e.retryAt
	}
	return 0
}

// isOutside reports whether local entity id is checked at every tick.
func (c *cluster) isOutside(id ecs.ID) bool {
	e := c.ents.recs[id]
	return e != nil && e.outside
}

// isRehomed reports whether a table moved local entity id's region.
func (c *cluster) isRehomed(id ecs.ID) bool {
	e := c.ents.recs[id]
	return e != nil && e.rehomed
}

// parkedFrom reports whether id is a ghost parked here that came from peer.
func (c *cluster) parkedFrom(id ecs.ID, peer string) bool {
	e := c.ents.recs[id]
	return e != nil && e.park != nil && e.park.peer == peer
}

// isParked and isHeld report a ghost's holds (RenderGhost).
func (c *cluster) isParked(id ecs.ID) bool { e := c.ents.recs[id]; return e != nil && e.park != nil }
func (c *cluster) isHeld(id ecs.ID) bool   { e := c.ents.recs[id]; return e != nil && e.held != nil }

// isFenceHeld reports whether ghost id is held at its source's fence.
func (c *cluster) isFenceHeld(id ecs.ID) bool {
	e := c.ents.recs[id]
	return e != nil && e.fence != nil
}

// ---- local transitions ----

// created: gone → simulated for a local entity the module created under
// the id of a went record (a den recreated under its derived id): the
// module creates entities in the world, past the table, so the record
// learns of it at its first local transition.
func (c *cluster) created(e *entity) {
	if e.phase == phaseGone && c.r.w.Alive(e.id) && !c.r.ghost.Has(e.id) {
		c.ents.setPhase(e, phaseSimulated)
	}
}

// localRecord returns local entity id's record, making a simulated one.
// A record in a phase that is not local is refused (nil).
func (c *cluster) localRecord(id ecs.ID, op string) *entity {
	e := c.ents.ensure(id, phaseSimulated)
	c.created(e)
	if !e.phase.local() {
		c.refused(id, op, e.phase)
		return nil
	}
	return e
}

// setOutside marks local entity id as standing in another node's region,
// or not (inside: it stands in its own territory, or is no local entity).
func (c *cluster) setOutside(id ecs.ID, on bool) {
	if !on {
		if e := c.ents.recs[id]; e != nil && (e.outside || e.rehomed) {
			c.ents.setOutside(e, false)
			e.rehomed = false
			c.ents.tidy(e)
		}
		return
	}
	if e := c.localRecord(id, "outside"); e != nil {
		c.ents.setOutside(e, true)
	}
}

// rehome marks local entity id as standing in a region a table moved.
func (c *cluster) rehome(id ecs.ID) {
	if e := c.localRecord(id, "rehome"); e != nil {
		e.rehomed = true
	}
}

// retryAfter makes local entity id wait until tick before another handoff.
func (c *cluster) retryAfter(id ecs.ID, tick uint64) {
	if e := c.localRecord(id, "retry"); e != nil {
		e.retryAt = tick
	}
}

// retryDue clears a passed retry wait and reports whether id may be
// handed over at tick now.
func (c *cluster) retryDue(id ecs.ID, now uint64) bool {
	e := c.ents.recs[id]
	if e == nil || e.retryAt == 0 {
		return true
	}
	if now < e.retryAt {
		return false
	}
	e.retryAt = 0
	c.ents.tidy(e)
	return true
}

// send: simulated → outgoing. The entity is frozen (out of every system)
// until the target answers: the first trap of a handoff, two writers,
// is closed here.
func (c *cluster) send(id ecs.ID, o *outgoing) bool {
	e := c.ents.ensure(id, phaseSimulated)
	c.created(e)
	if e.phase != phaseSimulated {
		c.refused(id, "send", e.phase)
		return false
	}
	if !c.bugs.noFreeze {
		_ = c.r.frozen.Add(id, Frozen{})
	}
	c.ents.setPhase(e, phaseOutgoing)
	e.out = o
	return true
}

// giveUp: outgoing → simulated, at an epoch above the one offered (the
// target refused, or lost its lease), waiting HandoffRetry ticks before
// another try (checkHandoffs shortens the wait to the next checkpoint
// for a target that lost its lease). It returns the handoff given up.
func (c *cluster) giveUp(id ecs.ID) *outgoing {
	e := c.ents.recs[id]
	if e == nil || e.phase != phaseOutgoing {
		c.refused(id, "give up", c.ents.phaseOf(id))
		return nil
	}
	o := e.out
	c.ents.setPhase(e, phaseSimulated)
	c.r.frozen.Remove(id)
	e.epoch = o.epoch + 1
	e.retryAt = c.r.w.CurrentTick().N + ticks(c.r.cfg.Timers.HandoffRetry)
	return o
}

// handedOver: outgoing → gone (the target acked; the caller noted the
// entity's epoch and chunk for its vanish first: part). The caller then
// gives it a went record (wentOn), evicts it (no World.destroy: it lives
// on at the target, and a destroy would tell every client it vanished)
// and keeps a render ghost of it (becomeGhost) where this node still
// needs its chunk. It returns the handoff done.
func (c *cluster) handedOver(id ecs.ID) *outgoing {
	e := c.ents.recs[id]
	if e == nil || e.phase != phaseOutgoing {
		c.refused(id, "hand over", c.ents.phaseOf(id))
		return nil
	}
	o := e.out
	c.ents.setPhase(e, phaseGone)
	return o
}

// freezeAdopted: gone → adopted, frozen until its ticks pass thawAt
// (takeOver has dropped its ghost; the caller created the entity).
func (c *cluster) freezeAdopted(id ecs.ID, epoch, thawAt uint64) {
	e := c.ents.ensure(id, phaseGone)
	if e.phase != phaseGone {
		c.refused(id, "adopt", e.phase)
		return
	}
	c.ents.setPhase(e, phaseAdopted)
	e.epoch, e.thawAt = epoch, thawAt
	_ = c.r.frozen.Add(id, Frozen{})
}

// restored: gone → simulated at epoch, an entity brought back from a
// dead node's checkpoint (checkpoint.go restore; takeOver has dropped
// any ghost of it).
func (c *cluster) restored(id ecs.ID, epoch uint64) {
	e := c.ents.ensure(id, phaseGone)
	if e.phase != phaseGone {
		c.refused(id, "restore", e.phase)
		return
	}
	c.ents.setPhase(e, phaseSimulated)
	e.epoch = epoch
	c.ents.tidy(e)
}

// thawDue: adopted → simulated for every adopted entity whose source's
// last simulated tick is before now (ms), in id order.
func (c *cluster) thawDue(now uint64) {
	if len(c.ents.adopted) == 0 {
		return
	}
	for _, id := range sortedIDs(c.ents.adopted) {
		e := c.ents.adopted[id]
		if e.thawAt >= now {
			continue
		}
		c.ents.setPhase(e, phaseSimulated)
		c.r.frozen.Remove(id)
		c.ents.tidy(e)
	}
}

// forgetLocal drops what the record holds of a local entity that leaves
// the world here (destroyed, or evicted: Runtime.forget), after noting
// its epoch and chunk for this tick's vanish. An outgoing one keeps its
// handoff: it waits for its answer (the known hole of invariant 5).
func (c *cluster) forgetLocal(id ecs.ID) {
	if _, done := c.parting[id]; !done {
		c.part(id)
	}
	e := c.ents.recs[id]
	if e == nil || !e.phase.local() {
		return
	}
	e.epoch, e.retryAt, e.rehomed = 0, 0, false
	c.ents.setOutside(e, false)
	if e.phase != phaseOutgoing {
		c.ents.setPhase(e, phaseGone)
	}
	c.ents.tidy(e)
}

// ---- ghost transitions ----

// becomeGhost makes id a render ghost from peer, or changes the peer of
// one (a new owner's higher epoch, a snapshot's entry): gone or ghost →
// ghost.
func (c *cluster) becomeGhost(id ecs.ID, peer string) {
	e := c.ents.recs[id]
	if e != nil && e.phase == phaseGhost {
		e.source = peer
		return
	}
	e = c.ents.ensure(id, phaseGhost)
	switch e.phase {
	case phaseGhost: // new
	case phaseGone:
		c.ents.setPhase(e, phaseGhost)
	default:
		c.refused(id, "become ghost", e.phase)
		return
	}
	e.source = peer
}

// dropGhost: ghost → gone, its render ghost dropped with no vanish sent
// on (ClaimID: the entity goes on here under the same id). A went record
// stays.
func (c *cluster) dropGhost(id ecs.ID) {
	e := c.ents.recs[id]
	if e == nil || e.phase != phaseGhost {
		c.refused(id, "drop ghost", c.ents.phaseOf(id))
		return
	}
	c.ents.setPhase(e, phaseGone)
	c.ents.tidy(e)
	c.goneGhosts[id] = struct{}{}
}

// vanish: ghost → gone, its render ghost gone (applyEvents). Out of
// sight (not destroyed), a went record keeps where intents follow it.
func (c *cluster) vanish(id ecs.ID, w *wentTo) {
	e := c.ents.recs[id]
	if e == nil || e.phase != phaseGhost {
		return // not a ghost of ours (the replica and the table disagree: invariant 6 says so)
	}
	if w != nil {
		w.peer = e.source
		c.setWent(e, *w)
	}
	c.ents.setPhase(e, phaseGone)
	c.ents.tidy(e)
}

// takeOver: ghost or gone → gone without a went record, for an entity
// this node is about to create under the same id (adopt, restore,
// ClaimID). The caller has removed the render ghost from the replica
// without touching the visibility index.
func (c *cluster) takeOver(id ecs.ID) {
	e := c.ents.recs[id]
	if e == nil {
		return
	}
	switch e.phase {
	case phaseGhost, phaseGone:
		c.ents.setPhase(e, phaseGone)
		c.clearWent(e)
		c.ents.tidy(e)
	default:
		c.refused(id, "take over", e.phase)
	}
}

// park: a ghost from peer whose chunk this node no longer holds waits,
// unseen, until tick until (parkChunk; sweepParked ends it).
func (c *cluster) park(id ecs.ID, peer string, until uint64) {
	e := c.ents.recs[id]
	if e == nil || e.phase != phaseGhost || e.source != peer {
		c.refused(id, "park", c.ents.phaseOf(id))
		return
	}
	if e.park == nil {
		e.park = new(parkedGhost)
		c.ents.parked[id] = e
	}
	*e.park = parkedGhost{peer: peer, until: until}
}

// unpark ends a ghost's parking (it stays, or the caller drops it).
func (c *cluster) unpark(e *entity) {
	if e.park != nil {
		delete(c.ents.parked, e.id)
		e.park = nil
	}
}

// holdVanishOf holds a ghost's vanish back (holdVanish, holdUnlisted):
// the ghost stays, from h.peer, until resolveHeld settles it.
func (c *cluster) holdVanishOf(id ecs.ID, h heldVanish) bool {
	e := c.ents.recs[id]
	if e == nil || e.phase != phaseGhost {
		c.refused(id, "hold vanish", c.ents.phaseOf(id))
		return false
	}
	e.source = h.peer // what comes of it next comes from the sender
	if e.held == nil {
		e.held = new(heldVanish)
		c.ents.held[id] = e
	}
	*e.held = h
	return true
}

// unhold ends a held vanish (the ghost changed, or the vanish is applied).
func (c *cluster) unhold(e *entity) {
	if e.held != nil {
		delete(c.ents.held, e.id)
		e.held = nil
	}
}

// holdAtFence holds ghost e as it stands, its source's lease having
// ended, until tick until (fencehold.go): a vanish held from that source
// becomes this hold (its snapshot will not come).
func (c *cluster) holdAtFence(e *entity, until uint64) {
	if e.phase != phaseGhost {
		c.refused(e.id, "hold at fence", e.phase)
		return
	}
	c.unhold(e)
	if e.fence == nil {
		e.fence = new(fenceHeld)
		c.ents.fenceHeld[e.id] = e
	}
	*e.fence = fenceHeld{peer: e.source, until: until}
}

// endFenceHold ends a ghost's fence hold (another node sends it now, or
// the caller drops it).
func (c *cluster) endFenceHold(e *entity) {
	if e.fence != nil {
		delete(c.ents.fenceHeld, e.id)
		e.fence = nil
	}
}

// ---- went records ----

// wentOn gives id a went record: it was handed on from here (or its
// ghost went out of sight) to w.peer.
func (c *cluster) wentOn(id ecs.ID, w wentTo) {
	c.setWent(c.ents.ensure(id, phaseGone), w)
}

// unseeAll drops sub from the observers of every went record (sub's
// node is gone: its next incarnation holds no ghost from here).
func (c *cluster) unseeAll(sub Subscriber) {
	for id := range c.ents.went {
		c.unsee(id, sub)
	}
}

// unsee forgets that sub saw handed-over entity id here.
func (c *cluster) unsee(id ecs.ID, sub Subscriber) {
	e := c.ents.recs[id]
	if e == nil || e.went == nil || !e.went.handed || !slices.Contains(e.went.seen, sub) {
		return
	}
	e.went.seen = slices.DeleteFunc(slices.Clone(e.went.seen), func(s Subscriber) bool { return s == sub })
}

func (c *cluster) setWent(e *entity, w wentTo) {
	if e.went == nil {
		e.went = new(wentTo)
		c.ents.went[e.id] = e
	}
	*e.went = w
	c.ents.wentFrom = min(c.ents.wentFrom, w.until)
}

func (c *cluster) clearWent(e *entity) {
	if e.went != nil {
		delete(c.ents.went, e.id)
		e.went = nil
	}
}

// expireWentRecords drops the went records past their time and reports
// whether one of a handed-over entity went.
func (c *cluster) expireWentRecords(tick uint64) bool {
	if tick <= c.ents.wentFrom {
		return false
	}
	expired := false
	from := uint64(math.MaxUint64)
	for _, e := range c.ents.went {
		if tick > e.went.until {
			expired = expired || e.went.handed
			c.clearWent(e)
			c.ents.tidy(e)
		} else {
			from = min(from, e.went.until)
		}
	}
	c.ents.wentFrom = from
	return expired
}
