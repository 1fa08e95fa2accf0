package zone

import (
	"slices"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/handoff"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

// A login's takeover and the checkpoints of its player.
//
// A player's master lives only as checkpoint records on the standby of
// its region from the moment its node dies until the standby adopts it:
// nobody answers Taken meanwhile. A login (or a resume) of the account in
// that window that loaded the player from the store would make a second
// master when the adoption creates the first one again, from a state
// newer than the store's. So a node that holds checkpoint records of a
// client player of the account (in a stream, or in an adoption round)
// does not answer NotHere: it answers Saving (the login waits, as for a
// save on its way) and answers again once the records it answered for
// are adopted or gone: Taken if it adopted the master, NotHere if not
// (another node adopted it, the owner said the player is gone, or the
// stream moved). A login on this node waits the same way for its own
// records.
//
// The records it answered for are those of the streams that held the
// account's when the login came (their owner may be the node that died
// and has not been fenced yet), and those of any owner whose lease this
// node no longer accepts (they are adopted next). Not the records that
// come later from live owners: an adoption makes the adopter the owner
// of a new stream, and when a dead node's master and pet are adopted by
// two nodes that are each other's standby, each holds the other's new
// records of the account for as long as the player stands there. Had
// each waited for those, neither would answer again, and the login,
// left to its timeout, would bring a second player in from the store
// (issue 30: the demo's player twice after a zone node kill).

// ownerName is the Owner component's name in a record (Register in New).
const ownerName = "zone.owner"

// adoptionWaiter is a login waiting for this node's records of its
// account: a takeover from node (m), or this node's own session (""),
// and the streams whose records of the account it waits for.
type adoptionWaiter struct {
	node string
	m    wire.Player
	from []streamOwner
}

// streamOwner is the owner of a stream a standby holds: a node under one
// lease.
type streamOwner struct {
	name  string
	lease int64
}

// holdsPlayerRecords reports whether this node holds a checkpoint record
// of a client player's entity of account a (in a stream, as a moved
// record, or in an adoption round), or a master of a it adopted whose
// session the store has not cleared yet (lostplayers.go). counts, if not
// nil, says which streams' records count (by their owner); the rounds'
// and the unchecked masters always do.
func (c *cluster) holdsPlayerRecords(a account.ID, counts func(streamOwner) bool) bool {
	if c.r.uncheckedAccount(a) {
		return true
	}
	for _, in := range c.ckpt.in {
		if counts != nil && !counts(streamOwner{in.owner, in.lease}) {
			continue
		}
		if c.streamHolds(in, a) {
			return true
		}
	}
	for _, rd := range c.ckpt.rounds {
		for _, cd := range rd.cands {
			if recordAccount(cd.snap) == a {
				return true
			}
		}
	}
	return false
}

// streamHolds reports whether in holds a record of a client player's
// entity of account a (moved ones too: a round adopts them).
func (c *cluster) streamHolds(in *ckptIn, a account.ID) bool {
	for _, s := range in.recs {
		if recordAccount(s) == a {
			return true
		}
	}
	for _, mv := range in.moved {
		if recordAccount(mv.snap) == a {
			return true
		}
	}
	return false
}

// deadOwner reports whether this node no longer accepts o: its records
// are adopted next, by this node or by the standby of their region.
func (c *cluster) deadOwner(o streamOwner) bool { return !c.peerLive(o.name, o.lease) }

// recordAccount is the account of a record's client player (0: none).
func recordAccount(s handoff.RawSnapshot) account.ID {
	data, ok := s.Component(ownerName)
	if !ok {
		return 0
	}
	o, err := FixedCodec[Owner]().Decode(data)
	if err != nil || o.Session == 0 {
		return 0
	}
	return o.Account
}

// awaitAdoption makes the login of m (from node, "" for this one) wait
// for this node's records of its account; false if it holds none.
func (c *cluster) awaitAdoption(node string, m wire.Player) bool {
	if !c.holdsPlayerRecords(m.Account, nil) {
		return false
	}
	w := adoptionWaiter{node: node, m: m}
	for _, in := range c.ckpt.in {
		if o := (streamOwner{in.owner, in.lease}); !slices.Contains(w.from, o) && c.streamHolds(in, m.Account) {
			w.from = append(w.from, o)
		}
	}
	c.ckpt.waiters = append(c.ckpt.waiters, w)
	return true
}

// awaited reports whether this node still holds records w waits for.
func (c *cluster) awaited(w adoptionWaiter) bool {
	return c.holdsPlayerRecords(w.m.Account, func(o streamOwner) bool {
		return slices.Contains(w.from, o) || c.deadOwner(o)
	})
}

// releaseWaiters answers the logins whose records this node holds no
// more (awaited; ckptTick, after the adoptions it finished).
func (c *cluster) releaseWaiters() {
	ck := &c.ckpt
	if len(ck.waiters) == 0 {
		return
	}
	r := c.r
	var due []adoptionWaiter
	kept := ck.waiters[:0]
	for _, w := range ck.waiters {
		switch {
		case w.node != "" && !c.maybeLive(w.node):
			// The asker died.
		case c.awaited(w):
			kept = append(kept, w)
		default:
			due = append(due, w)
		}
	}
	clear(ck.waiters[len(kept):])
	ck.waiters = kept
	for _, w := range due {
		if w.node != "" {
			c.queue(w.node, wire.KindPlayer, r.answerTakeover(w.node, w.m).Append(nil))
			continue
		}
		r.localAdoptionDone(w.m.Account, w.m.Session)
	}
}

// localAdoptionDone goes on with this node's own login of a (session)
// that waited for its records: it takes the adopted master over, or
// loads the player once no other node is still to answer.
func (r *Runtime) localAdoptionDone(a account.ID, session uint64) {
	g := r.gw[a]
	if g == nil || uint64(g.s.Epoch()) != session || !g.localWait || g.master != 0 {
		return
	}
	g.localWait = false
	if master, pet, ok := r.masterOf(a, session); ok {
		r.Attach(a, nil)
		r.clearViewer(a)
		r.tellPlayer(session, master, pet)
		g.master, g.pet, g.waitUntil = master, pet, 0
		g.reattachAt = r.w.CurrentTick().N + 2
		return
	}
	if g.waitUntil != 0 && len(g.awaiting) == 0 {
		r.loadFor(g)
	}
}
