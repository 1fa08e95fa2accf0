package zone

import (
	"slices"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

// What becomes of an intent a node took (its module's, or a peer's) when
// it cannot deliver it. Every such intent is dropped and counted
// (ClusterStats.IntentsDropped, split by reason), never lost in silence;
// the one class a node cannot tell apart is an intent it sent to a peer
// that died before confirming it: the peer may have applied it just
// before dying (its confirmation died with it), so it is counted lost
// (IntentsUnconfirmed) though it may have been applied once. No intent is
// ever applied twice: nothing is sent again.
//
// Confirmations. Every node tells each peer, on the ordered control
// stream, how many of that peer's intents it has taken in so far under
// the peer's current lease (wire.IntentsAck, cumulative; one a tick at
// most, only when the count moved). The sender keeps, per peer
// incarnation, how many it sent and how many are confirmed; when that
// incarnation ends (its lease seen lost: the fence; or a new lease seen)
// the difference is counted lost.
//
// Intents for a fenced peer's entities. An intent whose route leads to a
// peer already fenced here (the ghost held at its fence, or a went record
// naming it) is not sent into the void: it was never sent to the dead
// node, so it cannot have been applied there, and it waits here, at most
// heldIntents an entity and Timers.FenceHold ticks, for the entity to come
// back: simulated here (this node adopted it), the ghost of a live node
// (a standby's adoption, in place), or handed on to a live node. Then it
// is routed as any intent (so applied once, by the adopter); past the
// wait it is dropped (IntentsUnadopted).
//
// Heirs. The entity may come back where this node never sees it: its
// adopter simulates it in a chunk this node does not receive (a pet past
// the border of its master's region, within the handoff margin, is in
// no band: seed 652 of TestPlayersAcrossAFailover), and the route here
// keeps naming the dead peer (a went record) until the wait is over.
// But every adopter asks every live node about the entities it is about
// to adopt (checkpoint.go's adoption query) before it adopts any: a node
// that answers, and does not take the entity itself, notes the asker as
// its heir (of two askers, the one with the newer claim, as claims
// orders them: the other one gives way). An intent whose route leads to
// the fenced peer then goes to the heir, at once or released from its
// wait, instead of waiting for a ghost; the heir holds an intent for an
// entity its open adoption round may create until the round ends
// (holdForAdoption: then it applies it, or routes it as any intent). A
// wrong guess (a third live node held the entity) costs the intent, as
// a lapse at the heir, never a second application: it is sent once.
// An heir is kept for Timers.FenceHold ticks.

// intentLedger is one peer incarnation's intents, both ways: those this
// node sent it and those it confirmed, and those it took from it.
type intentLedger struct {
	lease       int64  // the peer's lease these counts are for
	sent, acked uint64 // sent to it; confirmed by it
	taken       uint64 // taken from it (what this node's acks say)
	ackDue      bool   // taken moved since the last ack
}

// awaitedIntents are the intents waiting for a fenced peer's entity to
// come back, in the order they were sent, and the last tick they wait.
type awaitedIntents struct {
	list  []Intent
	until uint64
}

// intentFate is the cluster's part of the above.
type intentFate struct {
	ledgers  map[string]*intentLedger
	awaiting map[ecs.ID]*awaitedIntents
	held     int // intents in awaiting
	heirs    map[ecs.ID]heir
}

// heir is the live node whose adoption query named a fenced peer's
// entity: its claim (the checkpoint tick of its record) and the last
// tick it is kept.
type heir struct {
	peer  string
	claim uint64
	until uint64
}

// ledger returns peer p's intent ledger, opening one for its current
// lease.
func (c *cluster) ledger(p string) *intentLedger {
	if c.ifate.ledgers == nil {
		c.ifate.ledgers = make(map[string]*intentLedger)
	}
	l := c.ifate.ledgers[p]
	if l == nil {
		l = &intentLedger{lease: c.leaseOf[p]}
		c.ifate.ledgers[p] = l
	}
	return l
}

// dropIntents counts n intents dropped for a reason (a field of stats).
func (c *cluster) dropIntents(reason *int, n int) {
	*reason += n
	c.stats.IntentsDropped += n
}

// intentsTaken notes n intents taken in from peer (under the lease its
// fence named): the next control flush confirms them.
func (c *cluster) intentsTaken(peer string, lease int64, n int) {
	l := c.ledger(peer)
	switch {
	case l.lease == 0:
		l.lease = lease // opened before this node knew the peer's lease
	case l.lease != lease:
		c.closeLedger(peer) // an incarnation whose end this node missed
		l = c.ledger(peer)
		l.lease = lease
	}
	l.taken += uint64(n)
	l.ackDue = true
}

// receiveIntentsAck takes a peer's confirmation of the intents sent it.
func (c *cluster) receiveIntentsAck(from string, m wire.IntentsAck) {
	if !c.r.accept(from, m.Fence) {
		c.stats.Refused++
		return
	}
	if m.For != c.r.lease() {
		return // for an incarnation of this node before its current lease
	}
	l := c.ledger(from)
	if l.lease == 0 {
		l.lease = m.Fence.Lease
	}
	if l.lease == m.Fence.Lease {
		l.acked = max(l.acked, min(m.Taken, l.sent))
	}
}

// flushIntentAcks confirms to each peer the intents taken from it since
// the last confirmation.
func (c *cluster) flushIntentAcks(fence wire.Fence) {
	for _, p := range sortedKeys(c.ifate.ledgers) {
		l := c.ifate.ledgers[p]
		if !l.ackDue {
			continue
		}
		l.ackDue = false
		c.queue(p, wire.KindIntentsAck, wire.IntentsAck{Fence: fence, For: l.lease, Taken: l.taken}.Append(nil))
	}
}

// closeLedger ends peer p's incarnation here: the intents sent it and not
// confirmed are lost with it (it may have applied some before it died,
// and nothing sends them again: at most once).
func (c *cluster) closeLedger(p string) {
	l := c.ifate.ledgers[p]
	if l == nil {
		return
	}
	if l.sent > l.acked && !c.bugs.noUnconfirmed {
		c.dropIntents(&c.stats.IntentsUnconfirmed, int(l.sent-l.acked))
	}
	delete(c.ifate.ledgers, p)
}

// awaitOwner keeps in, whose route leads to a fenced peer, until its
// target comes back on a live node (releaseAwaited).
func (c *cluster) awaitOwner(in Intent) {
	if c.bugs.noAwait {
		return // the planted bug: sent into the void, uncounted
	}
	if c.ifate.awaiting == nil {
		c.ifate.awaiting = make(map[ecs.ID]*awaitedIntents)
	}
	a := c.ifate.awaiting[in.Target]
	if a == nil {
		a = &awaitedIntents{until: c.r.w.CurrentTick().N + ticks(c.r.cfg.Timers.FenceHold)}
		c.ifate.awaiting[in.Target] = a
	}
	c.stats.IntentsAwaited++
	if len(a.list) >= heldIntents {
		c.dropIntents(&c.stats.IntentsHoldFull, 1)
		return
	}
	a.list = append(a.list, in)
	c.ifate.held++
}

// noteHeir notes that asker's adoption query named id, with its claim,
// and this node does not take id: when id's route here leads to a
// fenced peer, asker is its heir (unless another asker's claim is newer:
// an asker gives way to a newer claim, as claims says).
func (c *cluster) noteHeir(asker string, id ecs.ID, claim uint64) {
	if c.bugs.noHeir || !c.routesToFenced(id) {
		return
	}
	if h, ok := c.ifate.heirs[id]; ok && (h.claim > claim || h.claim == claim && h.peer > asker) {
		return
	}
	if c.ifate.heirs == nil {
		c.ifate.heirs = make(map[ecs.ID]heir)
	}
	c.ifate.heirs[id] = heir{peer: asker, claim: claim, until: c.r.w.CurrentTick().N + ticks(c.r.cfg.Timers.FenceHold)}
}

// heirOf returns id's heir, if it has a live one.
func (c *cluster) heirOf(id ecs.ID) (string, bool) {
	h, ok := c.ifate.heirs[id]
	if !ok || c.r.w.CurrentTick().N > h.until || c.isFenced(h.peer) {
		return "", false
	}
	return h.peer, true
}

// routesToFenced reports whether this node's route for id names a fenced
// peer: a ghost from it, or, gone from here, a went record naming it.
func (c *cluster) routesToFenced(id ecs.ID) bool {
	fenced, known := c.fencedRoute(id)
	return fenced && known
}

// holdForAdoption holds in, for an entity this node does not simulate, if
// one of its open adoption rounds may create it: an heir's intent may
// arrive before the round ends. It waits as an intent for a fenced
// peer's entity does (released once the entity is here, or routed on
// if it comes back elsewhere).
func (c *cluster) holdForAdoption(in Intent) bool {
	if c.bugs.noHeir || c.r.Simulated(in.Target) || !c.awaitsAdoption(in.Target) {
		return false
	}
	c.awaitOwner(in)
	return true
}

// leadsToFenced reports whether an intent for id would go to a fenced
// peer: its ghost's source, or, gone from here, where it went; or it is
// nowhere known yet (it may come back).
func (c *cluster) leadsToFenced(id ecs.ID) bool {
	fenced, known := c.fencedRoute(id)
	return fenced || !known
}

// fencedRoute reports whether this node's route for id names a fenced
// peer (a ghost's source, or, id gone from here, its went record), and
// whether this node knows a route for id at all.
func (c *cluster) fencedRoute(id ecs.ID) (fenced, known bool) {
	if src, ok := c.sourceOf(id); ok {
		return c.isFenced(src), true
	}
	if c.r.w.Alive(id) {
		return false, true
	}
	if w, ok := c.wentOf(id); ok {
		return c.isFenced(w.peer), true
	}
	return false, false
}

// releaseAwaited puts the awaited intents whose target came back on a
// live node (or here) in front of batch, to be routed as any intent, and
// drops those whose wait is over.
func (c *cluster) releaseAwaited(batch []Intent) []Intent {
	if len(c.ifate.awaiting) == 0 && len(c.ifate.heirs) == 0 {
		return batch
	}
	tick := c.r.w.CurrentTick().N
	var out []Intent
	for _, id := range sortedIDs(c.ifate.awaiting) {
		a := c.ifate.awaiting[id]
		switch h, heir := c.heirOf(id); {
		case !c.leadsToFenced(id):
			out = append(out, a.list...)
		case heir && !c.awaitsAdoption(id):
			for _, in := range a.list {
				c.sendIntent(h, in, 0)
				c.stats.IntentsToHeir++
			}
		case tick > a.until:
			c.dropIntents(&c.stats.IntentsUnadopted, len(a.list))
		default:
			continue
		}
		c.ifate.held -= len(a.list)
		delete(c.ifate.awaiting, id)
	}
	for id, h := range c.ifate.heirs {
		if tick > h.until {
			delete(c.ifate.heirs, id)
		}
	}
	if len(out) == 0 {
		return batch
	}
	return append(out, slices.Clone(batch)...)
}

// awaitsAdoption reports whether one of this node's open adoption
// rounds may create id.
func (c *cluster) awaitsAdoption(id ecs.ID) bool {
	for _, a := range c.ckpt.rounds {
		if _, ok := a.cands[id]; ok {
			return true
		}
	}
	return false
}

// intentsInFlight is how many intents this node sent to live peers that
// they have not confirmed yet.
func (c *cluster) intentsInFlight() int {
	n := 0
	for _, l := range c.ifate.ledgers {
		n += int(l.sent - l.acked)
	}
	return n
}
