package zone

import (
	"errors"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

// Players and a node that died.
//
// A node that dies may take a player's master and pet with it where no
// checkpoint of them reached its standby (it spawned them, or took them
// by handoff, after its last checkpoint), and a login may be waiting for
// its answer. The gateway's node goes on for both once the dead node's
// lease has ended (its fence: it simulates nothing from then on, and its
// standby holds all there is of it):
//
//   - a search for a player (findPlayer) counts the dead node's answer as
//     NotHere. A node whose lease has not ended is waited for, up to the
//     wait of a save: it may still simulate the player, or its standby
//     may adopt the player once it has ended (a standby that holds
//     checkpoint records of the player answers Saving until it has).
//   - every session served here whose master is not simulated here asks
//     every live node where its master is, as a takeover of its own
//     session does (answerTakeover answers it alike). A node that
//     simulates it answers Taken, the standby that holds its records
//     Saving and then Taken once it adopted them. If every node answers
//     NotHere it asks once more, verifyAgain ticks later (a master in a
//     handoff between two live nodes can miss both answers, never two
//     askings that far apart); if every node answers NotHere again, the
//     master and pet are gone with the dead node and the session brings
//     the player in again from the world store (its last save), under new
//     ids (the client gets a new You).
//   - a player brought in at a position whose owner in the table is a
//     dead node waits for the failover's table (spawnFor).
//
// And a player whose session ended while its node was dead: the leave (a
// logout, or a socket that closed) is an intent to the master's node, and
// one sent to a dead node before the standby adopted the master is lost.
// The adopted master would stay in the world with nobody to play it. So
// the node that adopts a client player's master keeps it unclaimed for
// Config.Timers.Unclaimed ticks (checkUnclaimed). A session claims it by
// a takeover this node answers Taken (answerTakeover: the gateway that
// asked sends its intents, its leave included, here from then on), by
// playing it from this node's own gateway, or by a newer session epoch
// reaching it (tellPlayer). At the end of the wait, a session of the
// account still looking for its player here, or a live peer that routes
// the account (its gateway serves a session that has not asked yet),
// starts the wait again: a master a live session may play is never taken
// out. Otherwise it is saved and taken out as a logout does (logoutHere:
// the same save fence, so a login meanwhile waits for the save and loads
// it, never an older record; a takeover that reaches the master first
// takes it over). A master that leaves this node within the wait (a
// handoff) is no longer watched here.
//
// And a player that logged out on the dead node after its last
// checkpoint: its logout saved it (a final record, worldstore.Player.Final)
// and took it out, but the standby holds it as it was at that checkpoint,
// older, under the same session, and adopts it. The store refuses every
// save of a session after its final one, so nothing the adopter saves can
// put the older state over the logout's. And the adopter does not let the
// master be played either: it asks the store about each client player's
// master it adopts (checkSession, a load on the saver's queue) and until
// the answer the master is unchecked — no takeover finds it (masterOf)
// and a login of the account waits as for checkpoint records
// (holdsPlayerRecords). If the store holds the final record of the
// master's session, the master and pet are taken out unsaved (a
// logged-out player is not in the world) and the login loads the
// logout's record; otherwise the wait for a claim goes on as above.

// sessionEnd, after the session in a logout's Data, says the session
// ended (its gateway's leave): its save is final. A logout without it
// (one that takes out a master a session no longer plays) saves as a
// periodic save does.
const sessionEnd byte = 1

// endsSession reports whether a logout's Data says its session ended.
func endsSession(data []byte) bool { return len(data) > 8 && data[8] == sessionEnd }

// verifyAgain is how long after every node said NotHere of a session's
// master the session asks again: longer than a handoff takes to be
// applied by its target once sent (a tick or two).
const verifyAgain = 10

// lostPlayers is the runtime's memory of dead peers for its players.
type lostPlayers struct {
	// seen are the fences of peers this node's sessions have checked
	// their masters against: a new entry starts the check.
	seen map[string]int64
	// abandoned: the sessions' ends hand nothing to the world
	// (AbandonSessions).
	abandoned atomic.Bool

	// adopted is CheckpointStats.Adopted when the adopted entities were
	// last looked at; from the first tick whose adoptions are not looked
	// at yet.
	adopted int
	from    uint64
	// unclaimed are the client players' masters adopted here that no
	// session has claimed yet.
	unclaimed map[ecs.ID]unclaimedMaster
}

// unclaimedMaster is an adopted master awaiting a session: the account
// and session it answered to when adopted, the tick its wait ends, and
// whether the store's answer about its session is still to come
// (checkSession).
type unclaimedMaster struct {
	account  account.ID
	session  uint64
	until    uint64
	checking bool
}

// AbandonSessions makes the gateway role let go of its sessions the way a
// process that died does: from now on a session that ends hands nothing
// to the world (no logout, no save); its player stays where it is, for
// the client's next login or resume to take over. It is for a harness
// that kills a node inside a process (package demo's zone node kill); a
// node that stops in order never calls it. Safe for concurrent use.
func (r *Runtime) AbandonSessions() { r.lost.abandoned.Store(true) }

// answered drops node from the answers g awaits; false if g did not await
// it (it answered already, or died).
func (g *gwSession) answered(node string) bool {
	i := slices.Index(g.awaiting, node)
	if i < 0 {
		return false
	}
	g.awaiting = slices.Delete(g.awaiting, i, i+1)
	return true
}

// deadAwaited drops from g's awaited answers the nodes whose lease has
// ended: they answer nothing, and hold nothing any more. It reports
// whether it dropped one.
func (r *Runtime) deadAwaited(g *gwSession) bool {
	if r.cluster == nil || len(g.awaiting) == 0 {
		return false
	}
	n := len(g.awaiting)
	g.awaiting = slices.DeleteFunc(g.awaiting, func(p string) bool { return !r.cluster.maybeLive(p) })
	return len(g.awaiting) < n
}

// seeDeadPeers marks every session with a master for the check of where
// it is, once a peer's lease has ended (a new fence since the last call).
func (r *Runtime) seeDeadPeers() {
	c := r.cluster
	if c == nil {
		return
	}
	l := &r.lost
	if len(c.fenced) == 0 && len(l.seen) == 0 {
		return
	}
	fresh := false
	for p, lease := range c.fenced {
		if seen, ok := l.seen[p]; !ok || seen != lease {
			fresh = true
		}
	}
	if len(l.seen) != len(c.fenced) || fresh {
		l.seen = maps.Clone(c.fenced)
	}
	if !fresh {
		return
	}
	for _, g := range r.gw {
		if g.master != 0 && !g.closed {
			g.verify, g.verifyAt, g.askedAgain = true, 0, false
		}
	}
}

// verifyMaster asks every live node where g's master is, unless this node
// simulates it. While this node holds checkpoint records of the account
// (it is the dead node's standby and has not adopted them yet) it asks
// again next tick.
func (r *Runtime) verifyMaster(g *gwSession) {
	if g.master == 0 || g.closed || g.reattachAt != 0 {
		g.verify = false
		return
	}
	if r.holdsReal(g.master) {
		g.verify, g.verifying, g.awaiting = false, false, g.awaiting[:0]
		return
	}
	a := g.s.Account()
	if r.cluster.holdsPlayerRecords(a, nil) {
		return // adopted, or dropped, at a later tick
	}
	g.verify, g.verifying, g.awaiting = false, true, g.awaiting[:0]
	m := wire.Player{Fence: r.cluster.fence(), Op: wire.PlayerTakeover, Account: a, Session: uint64(g.s.Epoch())}
	payload := m.Append(nil)
	for _, n := range r.Table().Nodes() {
		if n != r.Name() && r.cluster.maybeLive(n) {
			r.cluster.queue(n, wire.KindPlayer, payload)
			g.awaiting = append(g.awaiting, n)
		}
	}
	if len(g.awaiting) == 0 {
		r.nobodyHas(g)
	}
}

// verifyAnswer handles a node's answer to verifyMaster.
func (r *Runtime) verifyAnswer(from string, g *gwSession, m wire.Player) {
	switch m.Op {
	case wire.PlayerTaken:
		g.verifying, g.awaiting = false, g.awaiting[:0]
		if master := m.Master; master != uint64(g.master) {
			// Not the master this session has: answerTakeover made it
			// answer to this session; log it out (saved), as a late
			// takeover answer's (takeoverAnswer).
			r.cluster.sendIntent(from, Intent{Kind: intentLogout, Source: ecs.ID(master), Target: ecs.ID(master), Data: appendSession(nil, m.Session)}, 0)
			return
		}
		g.on = from // its intents go there until this node sees it
		if _, ok := r.vis.ChunkOf(g.master); !ok {
			r.viewHint[m.Account] = m.Chunk
		}
	case wire.PlayerNotHere:
		if g.answered(from) && len(g.awaiting) == 0 {
			r.nobodyHas(g)
		}
	case wire.PlayerSaving:
		// Its records are on from, to be adopted: it answers again.
	}
}

// nobodyHas is every node's NotHere to g's asking: the first time, it
// asks again verifyAgain ticks later; the second, the master is lost.
func (r *Runtime) nobodyHas(g *gwSession) {
	g.verifying, g.awaiting = false, g.awaiting[:0]
	if !g.askedAgain {
		g.askedAgain, g.verify, g.verifyAt = true, true, r.w.CurrentTick().N+verifyAgain
		return
	}
	r.masterLost(g)
}

// masterLost brings the player of g in again from the world store: no
// live node has its master, nor a record of it, and the nodes that had
// not answered are dead.
func (r *Runtime) masterLost(g *gwSession) {
	a := g.s.Account()
	r.cfg.Logger.Warn("zone: a player's master and pet were lost with a dead node: bringing the player in again from the world store",
		"account", a, "session", g.s.Epoch(), "master", g.master, "pet", g.pet)
	r.pstats.Lost++
	g.verifying, g.awaiting = false, g.awaiting[:0]
	g.master, g.pet, g.on = 0, 0, ""
	g.rec, g.found = worldstore.Player{}, false
	r.clearViewer(a)
	r.Attach(a, g)
	r.loadFor(g)
}

// checkUnclaimed files the client players' masters adopted since the
// last call, and takes out (saved) those no session claimed in time.
func (r *Runtime) checkUnclaimed(tick uint64) {
	c := r.cluster
	if c == nil || r.players == nil || r.fencedNow() {
		return
	}
	l := &r.lost
	wait := ticks(r.cfg.Timers.Unclaimed)
	if n := c.ckpt.stats.Adopted; n != l.adopted {
		l.adopted = n
		now := r.w.CurrentTick().N
		for id, at := range c.ckpt.restored {
			if at < l.from {
				continue
			}
			o, ok := r.owner.Get(id)
			if !ok || o.Session == 0 {
				continue
			}
			if _, ok := r.petOf(id); !ok {
				continue // a pet: it goes with its master
			}
			if l.unclaimed == nil {
				l.unclaimed = make(map[ecs.ID]unclaimedMaster)
			}
			l.unclaimed[id] = unclaimedMaster{account: o.Account, session: o.Session, until: tick + wait,
				checking: r.checkSession(id, o.Account, o.Session)}
		}
		l.from = now + 1
	}
	if len(l.unclaimed) == 0 {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(l.unclaimed)) {
		u := l.unclaimed[id]
		if r.w.Alive(id) && r.w.Leaving(id) {
			continue // a handoff in flight: watched again once it ends
		}
		o, ok := r.owner.Get(id)
		g := r.gw[u.account]
		if !ok || !r.holdsReal(id) || o.Session > u.session || g != nil && g.master == id {
			// Gone or handed on; taken over by a newer session; or
			// played from this node's gateway.
			delete(l.unclaimed, id)
			continue
		}
		if tick < u.until {
			continue
		}
		if g != nil && g.master == 0 && !g.closed || c.sessionRouted(u.account) {
			// A session of the account may claim it yet.
			u.until = tick + wait
			l.unclaimed[id] = u
			continue
		}
		delete(l.unclaimed, id)
		r.cfg.Logger.Info("zone: an adopted player's master has no session: saved and taken out",
			"account", u.account, "session", u.session, "master", id)
		if r.logoutHere(id, o, false) {
			r.pstats.Unclaimed++
		}
	}
}

// checkSession asks the world store whether the session of master id,
// adopted here, has ended (sessionChecked answers); false if it cannot
// ask (no store, or its queue is full).
func (r *Runtime) checkSession(id ecs.ID, a account.ID, session uint64) bool {
	if r.saver.store == nil {
		return false
	}
	return r.saver.queue(saveJob{who: a, load: func(rec worldstore.Player, err error) {
		r.Post(func() { r.sessionChecked(id, session, rec, err) })
	}})
}

// sessionChecked is the store's answer about the session of master id,
// adopted here: if it holds that session's final record, the player
// logged out after the checkpoint this node adopted it from, and the
// master (with its pet) is taken out unsaved.
func (r *Runtime) sessionChecked(id ecs.ID, session uint64, rec worldstore.Player, err error) {
	l := &r.lost
	u, ok := l.unclaimed[id]
	if !ok || u.session != session || !u.checking {
		return
	}
	u.checking = false
	l.unclaimed[id] = u
	if err != nil && !errors.Is(err, worldstore.ErrNotFound) {
		r.cfg.Logger.Warn("zone: an adopted player's session could not be checked: it waits for a claim",
			"account", u.account, "session", session, "master", id, "err", err)
		return
	}
	if err != nil || !rec.Final || rec.Epoch != session {
		return
	}
	if o, ok := r.owner.Get(id); !ok || o.Session != session || !r.holdsReal(id) {
		return
	}
	delete(l.unclaimed, id)
	r.cfg.Logger.Info("zone: an adopted player had logged out after the checkpoint it was adopted from: taken out unsaved",
		"account", u.account, "session", session, "master", id)
	r.players.Remove(id)
	r.pstats.Removed++
	r.pstats.Ended++
}

// unchecked reports whether id is a client player's master adopted here
// whose session the store has not cleared yet: adopted in a drain whose
// adoptions checkUnclaimed has not filed yet, or filed and checking.
func (r *Runtime) unchecked(id ecs.ID) bool {
	l := &r.lost
	if u, ok := l.unclaimed[id]; ok {
		return u.checking
	}
	c := r.cluster
	if c == nil || c.ckpt.stats.Adopted == l.adopted {
		return false
	}
	at, ok := c.ckpt.restored[id]
	return ok && at >= l.from
}

// uncheckedAccount reports whether a master of account a is unchecked.
func (r *Runtime) uncheckedAccount(a account.ID) bool {
	l := &r.lost
	for _, u := range l.unclaimed {
		if u.account == a && u.checking {
			return true
		}
	}
	c := r.cluster
	if c == nil || c.ckpt.stats.Adopted == l.adopted {
		return false
	}
	for id, at := range c.ckpt.restored {
		if at < l.from {
			continue
		}
		if o, ok := r.owner.Get(id); ok && o.Account == a && o.Session != 0 {
			return true
		}
	}
	return false
}

// claimed ends the wait of an adopted master: a session plays it.
func (r *Runtime) claimed(master ecs.ID) { delete(r.lost.unclaimed, master) }

// sessionRouted reports whether a live peer's gateway serves a session
// of a (its routes).
func (c *cluster) sessionRouted(a account.ID) bool {
	p, ok := c.routes[a]
	return ok && c.maybeLive(p)
}
