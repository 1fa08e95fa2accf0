package zone

import (
	"encoding/binary"
	"slices"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/handoff"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/link/replication"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/replica"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

// Entity handoff. An entity that stands more than the handoff margin past
// its node's territory (cells.Table.HandoffTarget, checked in the reindex
// after movement and, while it stands in another node's region, at every
// tick), or that stands in a region a new table gave another node
// (whatever the margin: the margin is for walking over a border), is
// frozen (out of every system), encoded with every
// component's handoff codec, and sent to the owner of its position on the
// ordered control stream at epoch e+1. The target creates it under the
// same id — taking over its own ghost of it, so its clients see no appear —
// and acks; the source then evicts it (no vanish) and keeps it as a render
// ghost from the target, so its own clients, and the views that follow it,
// see no vanish either. Observers on third nodes switch to the sender of
// the higher epoch. Intents that reach the source afterwards go to the
// target, on the same ordered stream, because the ghost names its source.
//
// Bounded freeze: without an answer within Timers.HandoffTimeout ticks the
// source asks the target again (KindAbort): a target that took the entity answers
// with an Ack, one that did not with a Refuse (ReasonAborted), and only a
// Refuse — or the target losing its lease — unfreezes the entity at the
// source, at epoch e+2. So at no tick do both simulate it, and nothing the
// target simulated is rolled back. Intents that reach a frozen entity wait
// for the answer (at most heldIntents of them), then follow it or are
// applied where it stayed.

// KindAbort is the control message of a source that waited too long: the
// target answers whether it took the entities (Ack) or not (Refuse with
// ReasonAborted). Its payload is a handoff.Refuse.
const KindAbort uint32 = 0x5A13

// ReasonAborted is the code of an abort and of its answer.
const ReasonAborted = "HANDOFF.ABORTED"

const (
	// handoffsPerTick bounds the entities a node sends per tick (a region
	// move is spread over ticks).
	handoffsPerTick = 128
	// heldIntents bounds the intents a frozen entity buffers; more are
	// dropped and counted.
	heldIntents = 64
)

// wentTo is where a handed-over entity went.
type wentTo struct {
	peer  string
	epoch uint64
	until uint64 // the last tick the record is used
	// handed says this node handed it over (rather than saw its ghost
	// leave sight); chunk and burst are then where it stood and what it
	// was when the target took it, for a snapshot of that chunk while no
	// ghost is kept, to the node subscribers in seen: those that saw it
	// there from this node then and have held the chunk from it since.
	handed bool
	chunk  torus.ChunkPos
	burst  []byte
	seq    uint64
	seen   []Subscriber
	// rechecked says a snapshot of the taker's that left it out was held
	// once already (holdUnlisted).
	rechecked bool
}

// appendWent adds to a snapshot of its chunk for node subscriber sub the
// entities this node handed over lately that sub saw here then and has
// not stopped seeing (wentTo.seen), as they were when the target took
// them, at the epoch they had here: an observer whose ghost of one came
// from here and that has not heard from the new owner yet (a message
// lost, a resync) keeps it instead of seeing it vanish; the new owner's
// higher epoch replaces it, and an observer that already heard from the
// new owner ignores the older epoch. (Never the frames of the ghost this
// node may keep of it: they are the new owner's, newer than that epoch;
// while it keeps one, the entry is listed as wentListed says.) Never to
// another subscriber: it holds no ghost to keep, would make one of the
// entity where it was handed over, and nothing would ever move or remove
// it (this node no longer sends it, and the new owner does not know that
// subscriber sees it).
func (c *cluster) appendWent(s wire.Snapshot, sub Subscriber) wire.Snapshot {
	ids := c.handedIn[s.Chunk]
	kept := ids[:0]
	for _, id := range ids {
		w, ok := c.wentOf(id)
		if !ok || !w.handed || w.chunk != s.Chunk {
			continue // expired, or a newer record elsewhere
		}
		kept = append(kept, id)
		if c.wentListed(id, sub) && slices.Contains(w.seen, sub) {
			s.Entries = append(s.Entries, wire.SnapshotEntry{Entity: uint64(id), Epoch: w.epoch - 1, Seq: w.seq, Frames: w.burst})
		}
	}
	if len(kept) == 0 {
		delete(c.handedIn, s.Chunk)
	} else {
		c.handedIn[s.Chunk] = kept
	}
	return s
}

// wentListed reports whether a snapshot for node subscriber sub lists
// handed-over entity id from its went record: while it is gone from
// here, or while the ghost kept here of it stands in a chunk sub
// receives from here (it is still in sub's sight; sub may not hear from
// the new owner yet, a cut or a lagging table, and without the entry it
// removed its ghost and its clients saw a blink: zonesim FourWays seed
// 10). Not once the kept ghost walked out of sub's chunks here: the
// entry would leave sub a ghost nothing removes (seed 33). Never while
// it is local here again: the snapshot lists it at its new epoch.
func (c *cluster) wentListed(id ecs.ID, sub Subscriber) bool {
	if !c.r.w.Alive(id) && !c.isGhost(id) {
		return true
	}
	if !c.isGhost(id) {
		return false
	}
	_, filed, ok := c.rep.Has(uint64(id))
	return ok && c.r.subs.IsSent(sub, filed)
}

// unseeWent forgets that node subscriber sub saw the entities handed over
// from chunk ch: it stopped holding the chunk, so it holds no ghost of
// them from here any more.
func (c *cluster) unseeWent(sub Subscriber, ch torus.ChunkPos) {
	for _, id := range c.handedIn[ch] {
		c.unsee(id, sub)
	}
}

// atName is the pseudo-component of a snapshot that says when it was
// taken: the source's simulated wall time, in Unix milliseconds, of the
// last tick that simulated the entity. The target simulates it only in
// ticks after that, so no interval of simulated time runs twice (the two
// nodes' ticks are not in step).
const atName = "zone.handoff.at"

// codec is one handed-over component's handoff codec, type-erased.
type codec struct {
	name string
	enc  func(id ecs.ID) ([]byte, bool)
	app  func(dst []byte, id ecs.ID) ([]byte, bool) // enc appending to dst (the checkpoint's reused buffer)
	dec  func(id ecs.ID, b []byte) error
}

// outgoing is an entity frozen for a handoff.
type outgoing struct {
	target   string
	epoch    uint64 // the epoch it has on the target
	deadline uint64 // the tick after which the source asks to abort
	sent     uint64 // the tick it was sent
	aborting bool
	intents  []Intent      // arrived while frozen: sent after the snapshot, or applied here if it stays
	early    []earlyUpdate // the target's updates that overtook its ack
}

// earlyUpdate is a replication update of a frozen entity from its target,
// kept until the ack.
type earlyUpdate struct {
	entry  replication.Entry
	update wire.Update
}

// HandoffStats count handoffs since New.
type HandoffStats struct {
	Sent, Acked, Refused, Aborted, Adopted int
	// Companions counts entities sent with another (SetCompanions) rather
	// than for standing past the margin themselves; Sent includes them.
	Companions int
	// Asked counts handoffs whose source, without an answer in time,
	// asked the target again (KindAbort); Aborted counts those the target
	// then said it had not taken.
	Asked int
	// Stale counts handoff messages that named an epoch this node does not
	// expect (a late ack, a repeated transfer).
	Stale int
	// AckTicks is the acked handoffs by the ticks from send to ack on the
	// source's tick counter: AckTicks[k] were acked k ticks after they
	// were sent; the last element also counts every longer one.
	AckTicks [AckTickBuckets]int
}

// AckTickBuckets is the length of HandoffStats.AckTicks.
const AckTickBuckets = defaultHandoffTimeout + 1

// AckQuantile returns the smallest k such that at least q (0 < q ≤ 1) of
// the acked handoffs took at most k ticks, and false when none was acked.
// A k of AckTickBuckets-1 means that many or more.
func (s HandoffStats) AckQuantile(q float64) (int, bool) {
	total := 0
	for _, n := range s.AckTicks {
		total += n
	}
	if total == 0 {
		return 0, false
	}
	need, seen := q*float64(total), 0
	for k, n := range s.AckTicks {
		seen += n
		if float64(seen) >= need {
			return k, true
		}
	}
	return len(s.AckTicks) - 1, true
}

// Plus returns the sum of s and o, counter by counter (for totals over
// nodes).
func (s HandoffStats) Plus(o HandoffStats) HandoffStats {
	return HandoffStats{
		Sent: s.Sent + o.Sent, Acked: s.Acked + o.Acked, Refused: s.Refused + o.Refused,
		Aborted: s.Aborted + o.Aborted, Adopted: s.Adopted + o.Adopted,
		Companions: s.Companions + o.Companions, Asked: s.Asked + o.Asked, Stale: s.Stale + o.Stale,
		AckTicks: addBuckets(s.AckTicks, o.AckTicks),
	}
}

func addBuckets(a, b [AckTickBuckets]int) [AckTickBuckets]int {
	for i := range a {
		a[i] += b[i]
	}
	return a
}

// HandoffStats returns the handoff counters.
func (r *Runtime) HandoffStats() HandoffStats {
	if r.cluster == nil {
		return HandoffStats{}
	}
	return r.cluster.hstats
}

// epochOf is the replication epoch of a local entity.
func (c *cluster) epochOf(id ecs.ID) uint64 {
	if e := c.ents.get(id); e != nil && e.epoch != 0 {
		return e.epoch
	}
	if p, ok := c.parting[id]; ok {
		return p.epoch // gone this tick: its vanish goes out at its epoch
	}
	return firstEpoch
}

// considerHandoff queues id for a handoff if it stands past the margin,
// or in a region a new table moved (rehomed). An entity standing in a
// region another node owns is remembered (outside) and checked again at
// every tick until it stands in this node's territory or leaves: borders
// are chunk-aligned and the margin is a chunk, so the check at a chunk
// change alone let one that entered the chunk beyond the margin exactly
// at its edge be simulated a whole chunk past the margin.
func (c *cluster) considerHandoff(id ecs.ID, p torus.Pos) {
	r := c.r
	if r.cfg.NoHandoff {
		return
	}
	table := r.terr.Table()
	if table.OwnerOf(p) == r.cfg.Name || !r.w.Alive(id) || r.ghost.Has(id) || r.isGhost(id) {
		c.setOutside(id, false)
		return
	}
	c.setOutside(id, true)
	if !r.Simulated(id) || c.outgoingOf(id) != nil {
		return
	}
	if !c.retryDue(id, r.w.CurrentTick().N) {
		return
	}
	if target, ok := c.handoffTarget(table, id, p); ok {
		if _, fenced := c.fenced[target]; !fenced {
			c.toHand = append(c.toHand, id)
		}
	}
}

// handoffTarget is where local entity id, standing at p, goes, if it
// goes: to the owner of p's region, past the margin
// (cells.Table.HandoffTarget: the hysteresis of a walk over a border) or,
// when a new table moved that region (rehomed), at once: nothing
// walked, and the margin would leave an entity standing within it of a
// region its node keeps on that node for good.
func (c *cluster) handoffTarget(table *cells.Table, id ecs.ID, p torus.Pos) (string, bool) {
	if c.isRehomed(id) {
		if owner := table.OwnerOf(p); owner != c.r.cfg.Name {
			return owner, true
		}
		return "", false
	}
	return table.HandoffTarget(c.r.cfg.Name, p, c.r.cfg.Bands.HandoffMargin)
}

// newTable notes, for a table the handoff has not seen yet, the local
// entities standing in a region whose owner it changed (to a node other
// than this one), and checks every local entity: a region move hands
// them all over, over several ticks.
func (c *cluster) newTable(table *cells.Table) {
	old := c.handTable
	c.handTable = table
	self := c.r.cfg.Name
	c.r.pos.Each(func(id ecs.ID, p *Position) {
		if old != nil {
			if owner := table.OwnerOf(p.Pos); owner != self && (old.Grid() != table.Grid() || old.OwnerOf(p.Pos) != owner) &&
				!c.r.ghost.Has(id) && !c.isGhost(id) { // considerHandoff clears a ghost's at once
				c.rehome(id)
			}
		}
		c.considerHandoff(id, p.Pos)
	})
}

// settleAdopted finishes, after the tick's reindex, what a reindex does
// for the entities adopted this tick where their ghost was filed: the
// module's reindex hooks, and the handoff check (one may already stand
// past another border). Not the view of an account they are the viewer
// of: that is already around their chunk, and recomputing it for each of
// a region move's viewers would cost more than all the rest of the tick.
func (c *cluster) settleAdopted() {
	r := c.r
	for _, id := range c.settle {
		p, ok := r.pos.Get(id)
		if !ok {
			continue // destroyed in its first tick here
		}
		ch := r.geo.ChunkOf(p.Pos)
		for _, fn := range r.onReindex {
			fn(id, ch)
		}
		c.considerHandoff(id, p.Pos)
	}
	c.settle = c.settle[:0]
}

// sendHandoffs freezes and sends this tick's candidates, grouped by
// target, at most handoffsPerTick.
func (c *cluster) sendHandoffs(tick uint64) {
	r := c.r
	c.settleAdopted()
	if r.cfg.NoHandoff {
		return
	}
	table := r.terr.Table()
	if c.handTable == nil || table.Version() != c.handTable.Version() {
		c.newTable(table)
	}
	for id := range c.ents.outside { // past a border: the margin is checked at every tick
		if p, ok := r.pos.Get(id); ok {
			c.considerHandoff(id, p.Pos)
		} else {
			c.setOutside(id, false)
		}
	}
	if len(c.toHand) == 0 {
		return
	}
	slices.Sort(c.toHand)
	c.toHand = slices.Compact(c.toHand)
	n := min(len(c.toHand), handoffsPerTick)
	batch := make(map[string]*handoff.Transfer)
	var later, mates []ecs.ID
	send := func(id ecs.ID, target string) {
		epoch := c.epochOf(id) + 1
		snap, err := r.handoffSnapshot(id, epoch, tick)
		if err != nil {
			r.cfg.Logger.Error("zone: entity cannot be handed over", "entity", id, "err", err)
			c.retryAfter(id, tick+ticks(c.r.cfg.Timers.HandoffRetry))
			return
		}
		if !c.send(id, &outgoing{target: target, epoch: epoch, deadline: tick + ticks(c.r.cfg.Timers.HandoffTimeout), sent: tick}) {
			return
		}
		t := batch[target]
		if t == nil {
			t = &handoff.Transfer{}
			batch[target] = t
		}
		t.Entities = append(t.Entities, snap)
		c.hstats.Sent++
	}
	for _, id := range c.toHand[:n] {
		p, ok := r.pos.Get(id)
		if !ok || !r.Simulated(id) || c.outgoingOf(id) != nil {
			continue
		}
		target, ok := c.handoffTarget(table, id, p.Pos)
		if !ok {
			continue
		}
		if c.peerTable[target] < table.Version() {
			// The target has not shown it holds this table yet (a region
			// move): it would refuse an entity of a region it does not
			// know it owns. Sent once it has.
			later = append(later, id)
			continue
		}
		send(id, target)
		if r.companions == nil || c.outgoingOf(id) == nil {
			continue
		}
		mates = r.companions(mates[:0], id)
		for _, m := range mates {
			mp, ok := r.pos.Get(m)
			if ok && r.Simulated(m) && c.outgoingOf(m) == nil && table.OwnerOf(mp.Pos) == target {
				send(m, target)
				c.hstats.Companions++
			}
		}
	}
	c.toHand = append(append(c.toHand[:0], c.toHand[n:]...), later...)
	for _, p := range sortedKeys(batch) {
		c.queue(p, handoff.KindTransfer, batch[p].Append(nil))
	}
}

// Epoch returns the epoch at which this node holds entity id (simulated,
// or frozen in a handoff), and whether it holds it: it starts at 1 and
// grows by one with every handoff (two for one given up). Two nodes hold
// an entity for a moment during a handoff; the higher epoch is its owner.
func (r *Runtime) Epoch(id ecs.ID) (uint64, bool) {
	if !r.w.Alive(id) || r.ghost.Has(id) || r.isGhost(id) {
		return 0, false
	}
	if r.cluster == nil {
		return firstEpoch, true
	}
	return r.cluster.epochOf(id), true
}

// HandoffSnapshot returns the snapshot a handoff of id would send now:
// every component with a handoff codec, at the next epoch, stamped with
// the current tick. It changes nothing; it is for measuring snapshot sizes
// and for debugging a module's codecs.
func (r *Runtime) HandoffSnapshot(id ecs.ID) (handoff.Snapshot, error) {
	if !r.w.Alive(id) || r.isGhost(id) || r.ghost.Has(id) {
		return handoff.Snapshot{}, ErrNotLocal.Wrap("entity %d", id)
	}
	epoch := uint64(firstEpoch)
	if r.cluster != nil {
		epoch = r.cluster.epochOf(id)
	}
	return r.handoffSnapshot(id, epoch+1, r.w.CurrentTick().N)
}

// handoffSnapshot encodes local entity id for a handoff at epoch, taken at
// the end of tick.
func (r *Runtime) handoffSnapshot(id ecs.ID, epoch, tick uint64) (handoff.Snapshot, error) {
	s := handoff.Snapshot{Entity: uint64(id), Epoch: epoch, Table: r.terr.Table().Version(),
		Components: make([]handoff.Component, 0, len(r.codecs)+1)}
	at := handoff.Component{Name: atName, Data: binary.LittleEndian.AppendUint64(nil, r.tickMillis(tick))}
	for _, cd := range r.codecs { // sorted by name, as a snapshot's components must be
		if at.Name != "" && at.Name < cd.name {
			s.Components, at.Name = append(s.Components, at), ""
		}
		if b, ok := cd.enc(id); ok {
			if len(b) == 0 {
				b = nil
			}
			s.Components = append(s.Components, handoff.Component{Name: cd.name, Data: b})
		}
	}
	if at.Name != "" {
		s.Components = append(s.Components, at)
	}
	return s, s.Check()
}

// checkHandoffs asks targets that did not answer in time to abort, and
// unfreezes entities whose target lost its lease.
func (c *cluster) checkHandoffs(tick uint64) {
	c.expireWent(tick)
	aborts := make(map[string]*handoff.Refuse)
	for _, id := range sortedIDs(c.ents.outgoing) {
		o := c.outgoingOf(id)
		if _, fenced := c.fenced[o.target]; fenced {
			c.unfreeze(id)
			// Nobody refused it: its target died. It waits only for this
			// node's next checkpoint, which records its raised epoch, and
			// then goes to whoever the table names (the failover table
			// gives the dead target's region to its standby). After
			// HandoffRetry it stood that long in a region this node does
			// not own, and observers, who subscribe to the table's
			// simulators of a chunk, did not see it (zonesim nodes6 seed
			// 16). One give-up between two checkpoints keeps the
			// adoption's epoch margin (checkpoint.go: e+1, e+2, then e+3
			// after the checkpoint).
			if !c.bugs.fenceRetry {
				c.retryAfter(id, c.nextCheckpoint(tick)+1)
			}
			continue
		}
		if o.aborting || tick <= o.deadline {
			continue
		}
		o.aborting = true
		c.hstats.Asked++
		a := aborts[o.target]
		if a == nil {
			a = &handoff.Refuse{Code: ReasonAborted}
			aborts[o.target] = a
		}
		a.Entities = append(a.Entities, handoff.Ref{Entity: uint64(id), Epoch: o.epoch})
	}
	for _, p := range sortedKeys(aborts) {
		c.queue(p, KindAbort, aborts[p].Append(nil))
	}
}

// nextCheckpoint is the first tick after tick at which this node's
// checkpoint is due (checkpoint's phase).
func (c *cluster) nextCheckpoint(tick uint64) uint64 {
	every := ticks(c.r.cfg.Timers.CheckpointEvery)
	t := tick + 1
	if r := (t + uint64(c.r.cfg.Node)) % every; r != 0 {
		t += every - r
	}
	return t
}

// unfreeze gives a handoff up: the entity stays here, simulated again at
// an epoch above the one it was offered at, and the intents it held are
// applied here next tick.
func (c *cluster) unfreeze(id ecs.ID) {
	if o := c.giveUp(id); o != nil {
		c.r.intents = append(c.r.intents, o.intents...)
	}
}

// holdIntent keeps an intent for a local entity frozen in a handoff, and
// reports whether it did: on the source until the target answers (then it
// is sent after the snapshot, on the same ordered stream, or applied here
// if the entity stays), on the target until the entity thaws (then it is
// applied). Past heldIntents per entity an intent is dropped and counted.
func (c *cluster) holdIntent(in Intent) bool {
	if o := c.outgoingOf(in.Target); o != nil {
		if len(o.intents) >= heldIntents {
			c.dropIntents(&c.stats.IntentsHoldFull, 1)
		} else {
			o.intents = append(o.intents, in)
		}
		return true
	}
	if c.thawing(in.Target) {
		c.r.intents = append(c.r.intents, in) // the next tick, thawed or not
		return true
	}
	if w, ok := c.wentOf(in.Target); ok && !c.r.w.Alive(in.Target) {
		c.sendIntent(w.peer, in, w.epoch)
		return true
	}
	return c.holdForAdoption(in) // an heir's, before its round ends
}

// expireWent forgets the "where it went" records past their time.
func (c *cluster) expireWent(tick uint64) {
	if !c.expireWentRecords(tick) {
		return
	}
	for ch, ids := range c.handedIn {
		ids = slices.DeleteFunc(ids, func(id ecs.ID) bool { w, ok := c.wentOf(id); return !ok || !w.handed || w.chunk != ch })
		if len(ids) == 0 {
			delete(c.handedIn, ch)
		} else {
			c.handedIn[ch] = ids
		}
	}
}

// receiveTransfer takes over the entities of a Transfer.
func (c *cluster) receiveTransfer(from string, m handoff.Transfer) {
	r := c.r
	var acks []handoff.Ref
	refused := make(map[string][]handoff.Ref)
	byName := make(map[string]codec, len(r.codecs))
	for _, cd := range r.codecs {
		byName[cd.name] = cd
	}
	for _, s := range m.Entities {
		id := ecs.ID(s.Entity)
		ref := handoff.Ref{Entity: s.Entity, Epoch: s.Epoch}
		reason := c.adopt(id, s, byName)
		if reason != "" {
			refused[reason] = append(refused[reason], ref)
			continue
		}
		acks = append(acks, ref)
		c.superseded(id, s.Epoch, nil)
		c.hstats.Adopted++
		c.ckpt.fresh = append(c.ckpt.fresh, id)
	}
	c.checkpointTaken() // before the ack lets the source's copy go
	if len(acks) > 0 {
		c.queue(from, handoff.KindAck, handoff.Ack{Entities: acks}.Append(nil))
	}
	for _, code := range sortedKeys(refused) {
		c.queue(from, handoff.KindRefuse, handoff.Refuse{Code: code, Entities: refused[code]}.Append(nil))
	}
}

// adopt creates one handed-over entity, or says why not.
func (c *cluster) adopt(id ecs.ID, s handoff.Snapshot, byName map[string]codec) string {
	r := c.r
	var pos []byte
	var at uint64
	for _, comp := range s.Components {
		if comp.Name == atName {
			if len(comp.Data) != 8 {
				return handoff.ReasonMalformed
			}
			at = binary.LittleEndian.Uint64(comp.Data)
			continue
		}
		if _, ok := byName[comp.Name]; !ok {
			return handoff.ReasonUnknownComponent
		}
		if comp.Name == positionName {
			pos = comp.Data
		}
	}
	p, err := FixedCodec[Position]().Decode(pos)
	if err != nil {
		return handoff.ReasonMalformed
	}
	if r.terr.Table().OwnerOf(p.Pos) != r.cfg.Name {
		return handoff.ReasonNotOwner
	}
	if r.w.Alive(id) && !r.ghost.Has(id) {
		return handoff.ReasonLive
	}
	if st, _, ok := c.rep.Has(uint64(id)); ok && st.Epoch >= s.Epoch && !c.bugs.noEpochGuard {
		return handoff.ReasonLive // its ghost is already newer: a stale transfer
	}
	// Take over the ghost without touching the visibility index: whoever
	// sees it here goes on seeing it, now as a local entity.
	filed, wasIndexed := r.vis.ChunkOf(id)
	if r.ghost.Has(id) {
		_ = r.w.Evict(id) // a simulation ghost: the forget hook keeps the index
	}
	c.dropRenderGhost(id)
	c.takeOver(id)
	if err := r.w.CreateEntity(id); err != nil {
		return handoff.ReasonLive
	}
	for _, comp := range s.Components {
		if comp.Name == atName {
			continue
		}
		if err := byName[comp.Name].dec(id, comp.Data); err != nil {
			_ = r.w.Evict(id)
			if wasIndexed {
				r.vis.Evict(id)
			}
			return handoff.ReasonMalformed
		}
	}
	if wasIndexed && filed == r.geo.ChunkOf(p.Pos) {
		// Filed where it stands (as its ghost was), so nothing that
		// follows it moves (its account's view is already around it):
		// the rest of a reindex runs at the end of the tick (settle).
		c.settle = append(c.settle, id)
	} else {
		r.w.MarkMoved(id)
	}
	r.markLocalDirty(id)
	c.adopted = append(c.adopted, id)
	if wasIndexed {
		obs := r.vis.AppendObserversOf(nil, id)
		c.wasGhost[id] = slices.DeleteFunc(obs, func(s Subscriber) bool { return !isNode(s) })
	}
	c.noteHandedSeen(id, r.geo.ChunkOf(p.Pos))
	// Frozen as it came (its Frozen marker is local, so not in the
	// snapshot) until this node's ticks are past the source's last one.
	c.freezeAdopted(id, s.Epoch, at)
	return ""
}

// thaw unfreezes the adopted entities whose source's last simulated tick
// is before the tick about to run.
func (c *cluster) thaw() {
	if len(c.ents.adopted) == 0 {
		return
	}
	c.thawDue(c.r.tickMillis(c.r.w.CurrentTick().N + 1))
}

// announceAdopted makes the nodes that observe an adopted entity receive
// its whole state from here: their ghost came from the old owner, and the
// visibility index, which saw a ghost become local in place, raises no
// appear for them.
//
// A node that holds the chunk the entity was handed over in, but not the
// one it stands in now, and did not observe its ghost here (handedSeen),
// is sent its out-of-sight vanish, at the new epoch: it may hold a ghost
// of it from the source, which handed it over without a word (the new
// owner's state supersedes it) and will never tell it more. Without the
// vanish, an entity that walked out of that node's sight before this
// node's first flush of it left it a ghost standing where it was handed
// over, at the old epoch, for good (TestClusterWithHandoffsIsOneNodeOnRandomTables,
// table-0 of seed 15465355954984300310; testdata/scenarios/handed_on_ghost.txt).
// One that receives the chunk it stands in gets its appear instead.
func (c *cluster) announceAdopted() {
	var obs []Subscriber
	for _, id := range c.adopted {
		if !c.r.w.Alive(id) {
			continue
		}
		obs = c.r.vis.AppendObserversOf(obs[:0], id)
		for _, s := range obs {
			if s.Kind == interest.NodeSubscriber {
				c.r.out.Appear(s, id)
			}
		}
		if c.bugs.noHandedVanish {
			continue
		}
		for _, s := range c.handedSeen[id] {
			if !slices.Contains(obs, s) {
				c.r.out.Vanish(s, id, interest.OutOfSight)
			}
		}
	}
	c.adopted = c.adopted[:0]
	clear(c.handedSeen)
}

// noteHandedSeen records, for an entity adopted from a handoff in chunk
// ch, the node subscribers that hold ch and did not observe its ghost
// here (handedSeen; announceAdopted).
func (c *cluster) noteHandedSeen(id ecs.ID, ch torus.ChunkPos) {
	var seen []Subscriber
	for _, s := range c.r.subs.AppendSubscribers(nil, ch) {
		if isNode(s) && !slices.Contains(c.wasGhost[id], s) {
			seen = append(seen, s)
		}
	}
	if len(seen) > 0 {
		c.handedSeen[id] = seen
	}
}

// unanswered reports whether node subscriber sub subscribed to ch and
// has not had its first snapshot of it yet (it waits for this tick's
// publish, or for the end of an adoption; asked): it holds no ghost of
// what stands there from here. (A snapshot asked for again, a Resync, is
// no such sign: that subscriber saw the chunk.)
// A went record does not count it as having seen the entity: its snapshot
// entry would make such a subscriber a ghost where the entity was handed
// over, which nothing would ever move or remove (a subscription taken in
// the drain that took the ack: TestClusterWithHandoffsIsOneNodeOnRandomTables,
// table-1 of seed 4; testdata/scenarios/went_unseen.txt).
func (c *cluster) unanswered(sub Subscriber, ch torus.ChunkPos) bool {
	if c.bugs.wentUnanswered {
		return false
	}
	name, ok := c.nameOf[sub.ID]
	if !ok {
		return false
	}
	_, asked := c.asked[peerChunk{name, c.r.geo.NormaliseChunk(ch)}]
	return asked
}

// receiveAck completes the handoffs the target took.
func (c *cluster) receiveAck(from string, m handoff.Ack) {
	for _, ref := range m.Entities {
		id := ecs.ID(ref.Entity)
		o := c.outgoingOf(id)
		if o == nil || o.target != from || o.epoch != ref.Epoch {
			c.hstats.Stale++
			continue
		}
		c.part(id)
		c.handedOver(id)
		c.hstats.AckTicks[min(c.r.w.CurrentTick().N-o.sent, uint64(len(c.hstats.AckTicks)-1))]++
		// What arrived for it meanwhile follows it, after the snapshot on
		// the same ordered stream; so does what arrives for a while yet.
		for _, in := range o.intents {
			c.sendIntent(from, in, o.epoch)
		}
		ch, _ := c.r.vis.ChunkOf(id)
		burst := c.r.appendBurst(nil, id)
		seen := slices.DeleteFunc(c.r.vis.AppendObserversOf(nil, id), func(s Subscriber) bool { return !isNode(s) || c.unanswered(s, ch) })
		c.wentOn(id, wentTo{peer: from, epoch: o.epoch, until: c.r.w.CurrentTick().N + ticks(c.r.cfg.Timers.Went), handed: true, chunk: ch, burst: burst, seq: c.r.seq(), seen: seen})
		if !slices.Contains(c.handedIn[ch], id) {
			c.handedIn[ch] = append(c.handedIn[ch], id)
		}
		// From now on it is a ghost of the target's: the forget hook keeps
		// its visibility entry, views and anchors, and what arrives for it
		// (intents) goes to the target. Until the target's first update
		// arrives the ghost holds the entity's last state here, at the old
		// epoch, so a client that starts seeing it meanwhile gets it whole.
		if !c.needs(ch) {
			// This node does not need that chunk, so it does not receive it
			// from the target and nothing would update or remove a ghost
			// there: it leaves sight here (no client of this node holds
			// the chunk). Not to node subscribers: the entity did not
			// leave their sight, it changed hands; they keep their ghost
			// until the target's epoch replaces it, or the went record's
			// snapshot entry, as when a ghost is kept here. A peer whose
			// table lags does not receive the chunk from the target yet,
			// and with this vanish its clients saw the entity blink
			// (testdata/scenarios/region_move_lagging.txt).
			c.goneGhosts[id] = struct{}{}
			c.r.vis.Remove(id, interest.OutOfSight)
			_ = c.r.w.Evict(id)
			c.hstats.Acked++
			continue
		}
		_, _ = c.rep.Apply(replica.Update{Entity: uint64(id), Stamp: replica.Stamp{Epoch: o.epoch - 1, Seq: c.r.seq()}, Chunk: ch, Frames: burst})
		c.becomeGhost(id, from)
		_ = c.r.w.Evict(id)
		for _, x := range o.early {
			c.applyUpdate(from, x.entry, x.update)
		}
		c.hstats.Acked++
	}
	c.applyEvents()
}

// receiveRefuse gives the refused entities back to the simulation.
func (c *cluster) receiveRefuse(from string, m handoff.Refuse) {
	for _, ref := range m.Entities {
		id := ecs.ID(ref.Entity)
		o := c.outgoingOf(id)
		if o == nil || o.target != from || o.epoch != ref.Epoch {
			c.hstats.Stale++
			continue
		}
		c.unfreeze(id)
		if m.Code == ReasonAborted {
			c.hstats.Aborted++
		} else {
			c.hstats.Refused++
		}
	}
}

// receiveAbort answers a source that got no answer in time. On the
// ordered stream its transfer came first, so this node either took the
// entity (it holds it at that epoch or later, or handed it on since) and
// answers with an Ack again, or refused it and answers Refuse
// (ReasonAborted). The source stays frozen until it hears which: nothing
// this node simulated is ever rolled back, and the two never both
// simulate.
func (c *cluster) receiveAbort(from string, m handoff.Refuse) {
	var took, not []handoff.Ref
	for _, ref := range m.Entities {
		if c.took(ecs.ID(ref.Entity), ref.Epoch) {
			took = append(took, ref)
		} else {
			not = append(not, ref)
		}
	}
	if len(took) > 0 {
		c.queue(from, handoff.KindAck, handoff.Ack{Entities: took}.Append(nil))
	}
	if len(not) > 0 {
		c.queue(from, handoff.KindRefuse, handoff.Refuse{Code: ReasonAborted, Entities: not}.Append(nil))
	}
}

// took reports whether this node adopted id at epoch (or a later one):
// it holds it, or handed it on since.
func (c *cluster) took(id ecs.ID, epoch uint64) bool {
	if c.r.w.Alive(id) && !c.r.ghost.Has(id) && !c.r.isGhost(id) {
		return c.epochOf(id) >= epoch
	}
	w, ok := c.wentOf(id)
	return ok && w.handed && w.epoch > epoch
}

// dropRenderGhost removes id's render ghost from the replica without a
// lifecycle event (the visibility index keeps its entry: the entity goes
// on under the same id, made here), by a vanish one step after its
// stamp, so the replica refuses the old sender's later messages about it.
func (c *cluster) dropRenderGhost(id ecs.ID) {
	if st, _, ok := c.rep.Has(uint64(id)); ok {
		_, _ = c.rep.Apply(replica.Update{Entity: uint64(id), Stamp: replica.Stamp{Epoch: st.Epoch, Seq: st.Seq + 1},
			Frames: outbox.AppendVanishFrame(nil, uint64(id), interest.Gone)})
		c.rep.Drain(nil)
	}
}

func sortedIDs[V any](m map[ecs.ID]V) []ecs.ID {
	ids := make([]ecs.ID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
