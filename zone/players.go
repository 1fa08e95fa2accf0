package zone

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/gateway/clientinput"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/internal/binread"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

// Players is what a module gives the runtime so that clients can play it
// through the gateway role (SetPlayers; package zone/zonegate serves the
// runtime to a gateway). Every function runs on the world goroutine
// except CheckInput.
type Players struct {
	// Spawn brings the account's player into the world on this node, which
	// owns pos: its master with id master and its pet (if it has one) with
	// id pet, from state (what Save returned when it last left; nil for a
	// new player). The runtime sets both entities' Owner afterwards.
	Spawn func(a account.ID, master, pet ecs.ID, pos torus.Pos, state []byte) error
	// Save returns the module state of the player whose master is master
	// (simulated here), stored with the master's position.
	Save func(master ecs.ID) (state []byte, ok bool)
	// Remove takes the player whose master is master out of the world (a
	// logout, after Save).
	Remove func(master ecs.ID)
	// Pet names the pet of the player whose master is master (0: none);
	// ok is false when master is no player's master. A new login finds
	// the account's player by it on the node that simulates the master,
	// whatever became of the gateway that brought it in. Optional: without
	// it a master is what Save accepts, and its pet is not found that way.
	Pet func(master ecs.ID) (pet ecs.ID, ok bool)
	// Home is where a new account's player starts.
	Home func(a account.ID) torus.Pos
	// CheckInput says whether the module takes in (its kind, point and
	// target), on a gateway goroutine: it must only read in. An error
	// should match clientinput.ErrBadInput (gateway.ErrBadInput is the
	// same sentinel).
	CheckInput func(in clientinput.Input) error
	// Input applies a client input to entity (the player's master or pet,
	// simulated here), at the start of a tick like any intent.
	Input func(entity ecs.ID, in clientinput.Input)
}

// Logger is the runtime's logger (Config.Logger), for its module.
func (r *Runtime) Logger() *slog.Logger { return r.cfg.Logger }

// SetPlayers lets clients play the module through the gateway role. A
// module calls it in Setup.
func (r *Runtime) SetPlayers(p Players) { r.players = &p }

// Intent kinds at and above FirstReservedIntent are the runtime's own: it
// applies them itself and never hands them to a module's intent handler.
const FirstReservedIntent uint16 = 0xFF00

const (
	intentInput   = FirstReservedIntent + iota // Data: session, then the input
	intentLogout                               // Data: session, then sessionEnd if the session ended (its save is final)
	intentSession                              // Data: session (a newer session takes the player over)
)

// PlayerStats count the gateway role's work on this node since New.
type PlayerStats struct {
	// Joined counts sessions that started here (this node their gateway);
	// Spawned the players this node brought into the world (for its own
	// sessions or another gateway's); TakenOver the sessions here that
	// took over a player already in the world.
	Joined, Spawned, TakenOver int
	// Inputs counts client inputs applied here; StaleSession counts inputs,
	// logouts and takeovers dropped because the player answers to a newer
	// session than theirs.
	Inputs, StaleSession int
	// Saved counts player records written to the world store; SaveErrors
	// those the store refused or could not take (a full queue included).
	Saved, SaveErrors int
	// Removed counts players taken out at logout.
	Removed int
	// AwaitedSaves counts the logins that found the account's player
	// logged out here with its record still on the way to the store, and
	// were answered only once it had landed.
	AwaitedSaves int
	// Lost counts the sessions served here whose master and pet were
	// lost with a node that died (no live node had them, nor a checkpoint
	// of them) and that brought their player in again from the store.
	Lost int
	// Unclaimed counts the players this node adopted on failover that no
	// session claimed within Config.Timers.Unclaimed, saved and taken out
	// as at logout (counted in Removed too).
	Unclaimed int
	// Ended counts the players this node adopted on failover whose
	// session the world store showed ended (a logout after the dead
	// node's last checkpoint): taken out unsaved (counted in Removed too).
	Ended int
}

// PlayerStats returns the gateway role's counters. Like the world, it is
// read on the world goroutine (or through Post).
func (r *Runtime) PlayerStats() PlayerStats {
	r.saver.mu.Lock()
	defer r.saver.mu.Unlock()
	s := r.pstats
	s.Saved, s.SaveErrors = r.saver.saved, r.saver.errors
	return s
}

// ---- the master's node: reserved intents ----

func appendSession(dst []byte, session uint64) []byte {
	return binary.LittleEndian.AppendUint64(dst, session)
}

// applyPlayerIntent applies one of the runtime's own intents to target,
// which this node simulates. The session fence: a player answers to the
// highest session epoch it has heard of (the directory issues them, and
// only the newest session's gateway knows the newest), and drops what
// names a lower one.
func (r *Runtime) applyPlayerIntent(in Intent) {
	o, ok := r.owner.Get(in.Target)
	if !ok || len(in.Data) < 8 {
		return
	}
	session := binary.LittleEndian.Uint64(in.Data)
	if session < o.Session {
		r.pstats.StaleSession++
		return
	}
	o.Session = session
	switch in.Kind {
	case intentInput:
		gi, err := decodeInput(in.Data[8:])
		if err != nil || r.players == nil {
			return
		}
		gi.Entity = uint64(in.Target)
		r.pstats.Inputs++
		r.players.Input(in.Target, gi)
	case intentLogout:
		if r.players != nil {
			r.logoutHere(in.Target, o, endsSession(in.Data))
		}
	}
}

// logoutHere saves the player whose master is id (simulated here, owned
// as o) and takes it out of the world; a login of the account meanwhile
// waits for the save to land (fenceSave). The save is final if the
// session ended (worldstore.Player.Final). False if id is no master.
func (r *Runtime) logoutHere(id ecs.ID, o *Owner, final bool) bool {
	a, session := o.Account, o.Session
	ok, queued := r.savePlayer(id, o, true, final)
	if !ok {
		return false
	}
	r.players.Remove(id)
	r.pstats.Removed++
	if queued {
		r.fenceSave(a, session)
	}
	return true
}

// savePlayer queues the record of the player whose master is id for the
// world store; ok false if id is not a master (the module saves nothing
// for it), queued whether the record is on its way. A record queued with
// landed reports back (saveLanded) once the store has answered; a final
// one is its session's last (worldstore.Player.Final).
func (r *Runtime) savePlayer(id ecs.ID, o *Owner, landed, final bool) (ok, queued bool) {
	state, ok := r.players.Save(id)
	if !ok {
		return false, false
	}
	p, ok := r.pos.Get(id)
	if !ok {
		return false, false
	}
	if r.saver.store == nil || o.Session == 0 {
		return true, false
	}
	var done func()
	if landed {
		a, session := o.Account, o.Session
		done = func() { r.Post(func() { r.saveLanded(a, session) }) }
	}
	return true, r.saver.queue(saveJob{save: worldstore.Player{Account: o.Account, Epoch: o.Session, Pos: p.Pos, State: state, Final: final}, done: done})
}

// ---- the save fence ----

// leavingPlayer is an account whose player logged out here and whose
// record is still on its way to the world store: a login meanwhile would
// load the record before it, so its takeover is answered only once the
// record has landed (or the store has refused it).
type leavingPlayer struct {
	session uint64 // the session the record was saved under
	waiters []takeoverWaiter
}

// takeoverWaiter is a login waiting for a save to land: on node (""
// for this one), of session.
type takeoverWaiter struct {
	node    string
	session uint64
}

// fenceSave holds logins of a off until the save of session has landed.
func (r *Runtime) fenceSave(a account.ID, session uint64) {
	if l := r.leaving[a]; l != nil {
		l.session = max(l.session, session)
		return
	}
	r.leaving[a] = &leavingPlayer{session: session}
}

// saveLanded lifts the fence of a's save under session and answers the
// logins that waited on it: the store now holds the record, so a load
// that follows the answer reads it.
func (r *Runtime) saveLanded(a account.ID, session uint64) {
	l := r.leaving[a]
	if l == nil || l.session != session {
		return // a later logout of the account saves after this one
	}
	delete(r.leaving, a)
	for _, w := range l.waiters {
		if w.node == "" {
			if g := r.gw[a]; g != nil && g.s.Epoch() == w.session && g.localWait {
				g.localWait = false
				if g.master == 0 && g.waitUntil != 0 && len(g.awaiting) == 0 {
					r.loadFor(g)
				}
			}
			continue
		}
		if r.cluster != nil {
			m := wire.Player{Fence: r.cluster.fence(), Op: wire.PlayerNotHere, Account: a, Session: w.session}
			r.cluster.queue(w.node, wire.KindPlayer, m.Append(nil))
		}
	}
}

// awaitSave makes the login of session wait for a's save if one is on
// its way here; false if none is.
func (r *Runtime) awaitSave(a account.ID, node string, session uint64) bool {
	l := r.leaving[a]
	if l == nil || l.session >= session {
		return false
	}
	l.waiters = append(l.waiters, takeoverWaiter{node: node, session: session})
	r.pstats.AwaitedSaves++
	return true
}

// displacement is the newest session of an account a takeover named here,
// kept until tick until: a login of an older session that reaches this
// node's world only now (it lost the race in the directory) brings no
// player in.
type displacement struct {
	session, until uint64
}

func (r *Runtime) noteDisplaced(a account.ID, session uint64) {
	if d, ok := r.displacedBy[a]; !ok || d.session < session {
		r.displacedBy[a] = displacement{session: session, until: r.w.CurrentTick().N + orphanWait}
	}
}

// masterOf finds a's player among the masters this node simulates (or
// holds frozen in a handoff: the intents that tell it follow it), one
// that answers to a session older than below, and not one it adopted
// whose session the store has not cleared yet (unchecked).
func (r *Runtime) masterOf(a account.ID, below uint64) (master, pet ecs.ID, ok bool) {
	r.owner.Each(func(id ecs.ID, o *Owner) {
		if ok || o.Account != a || o.Session == 0 || o.Session >= below || !r.holdsReal(id) || r.unchecked(id) {
			return
		}
		if pet, ok = r.petOf(id); ok {
			master = id
		}
	})
	return master, pet, ok
}

// petOf names the pet of the player whose master is id (Players.Pet, or
// without it no pet); ok false if id is no player's master.
func (r *Runtime) petOf(id ecs.ID) (pet ecs.ID, ok bool) {
	if r.players.Pet != nil {
		return r.players.Pet(id)
	}
	_, ok = r.players.Save(id)
	return 0, ok
}

// holdsReal reports whether id is simulated here, or would be but for a
// handoff in flight.
func (r *Runtime) holdsReal(id ecs.ID) bool {
	return r.w.Alive(id) && !r.w.Leaving(id) && !r.ghost.Has(id) && !r.fencedNow()
}

// tellPlayer makes master and pet answer to session from now on: at once
// if simulated here (an older session's logout or input already queued
// for this tick then changes nothing), and by an intent on the ordered
// path the older session's inputs took, so nothing of it overtakes this
// where the entity is simulated elsewhere.
func (r *Runtime) tellPlayer(session uint64, master, pet ecs.ID) {
	data := appendSession(nil, session)
	for _, id := range []ecs.ID{master, pet} {
		if id == 0 {
			continue
		}
		if o, ok := r.owner.Get(id); ok && r.Simulated(id) && o.Session < session {
			o.Session = session
		}
		r.Send(Intent{Kind: intentSession, Source: id, Target: id, Data: data})
	}
}

// savePeriodically saves every local player once every saveEvery ticks,
// spread over the ticks by each master's phase.
func (r *Runtime) savePeriodically(tick uint64) {
	if r.players == nil || r.saver.store == nil {
		return
	}
	every := r.saveEveryTicks
	r.owner.Each(func(id ecs.ID, o *Owner) {
		if o.Session == 0 || (r.Phase(id)+tick)%every != 0 || !r.Simulated(id) {
			return
		}
		r.savePlayer(id, o, false, false)
	})
}

// saver writes player records to the world store on its own goroutine, so
// that the world never waits on storage, and loads the records of logins
// in the same queue: a load comes after every save this node queued
// before it. Its queue is bounded: a record that finds it full is dropped
// and counted (the next periodic save or the logout writes a newer one).
type saver struct {
	store worldstore.Players
	ch    chan saveJob
	wg    sync.WaitGroup
	once  sync.Once

	mu     sync.Mutex
	saved  int
	errors int
	log    func(msg string, args ...any)
	post   func(func())
}

// saveJob is one save (done, if set, runs once the store has answered)
// or one load (load set).
type saveJob struct {
	save worldstore.Player
	done func()
	load func(worldstore.Player, error)
	who  account.ID // the account to load
}

const saveQueue = 4096

func (s *saver) start() {
	if s.store == nil {
		return
	}
	s.ch = make(chan saveJob, saveQueue)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for j := range s.ch {
			s.run(j)
		}
	}()
}

func (s *saver) run(j saveJob) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if j.load != nil {
		j.load(s.store.LoadPlayer(ctx, j.who))
		return
	}
	p := j.save
	err := s.store.SavePlayer(ctx, p)
	s.mu.Lock()
	if err == nil {
		s.saved++
	} else if !errors.Is(err, worldstore.ErrStaleEpoch) {
		s.errors++
		s.log("zone: save player", "account", p.Account, "err", err)
	}
	s.mu.Unlock()
	if j.done != nil {
		j.done()
	}
}

// queue queues j; false if the queue is full (a save is counted as an
// error).
func (s *saver) queue(j saveJob) bool {
	select {
	case s.ch <- j:
		return true
	default:
		if j.load == nil {
			s.mu.Lock()
			s.errors++
			s.mu.Unlock()
		}
		return false
	}
}

// close writes what is queued and stops.
func (s *saver) close() {
	s.once.Do(func() {
		if s.ch != nil {
			close(s.ch)
		}
		s.wg.Wait()
	})
}

// ---- the gateway's node ----

// Session is one client session this node is the gateway of, as the
// world side of the player protocol needs it: the port the runtime talks
// to the client through. Package zone/zonegate passes its adapter of a
// *gateway.Session; a test may pass its own. Its methods are called on
// the world goroutine and must not block. Two Sessions are the same
// session when they are equal (==): every call about one session must
// pass an equal value (a pointer, or a struct holding one).
type Session interface {
	// Account is the session's account; Epoch its epoch in the session
	// directory (directory.Epoch: a newer login's is higher).
	Account() account.ID
	Epoch() uint64
	// Deliver hands the client a tick's batch (outbox.Sink): called at
	// most once per tick, in tick order, with the frames of the tick.
	Deliver(tick uint64, frames [][]byte)
	// SetYou names the player's master and pet (0: none at the moment).
	SetYou(master, pet uint64)
	// SendTerrain hands the client one chunk's ground (package terrain's
	// encoding).
	SendTerrain(chunk []byte)
	// Fail ends the session because the world cannot serve it; its Leave
	// follows.
	Fail(message string)
	// Superseded reports whether the session ended because a newer login
	// of its account displaced it: the player then waits for the newer
	// session to take it over, rather than being logged out.
	Superseded() bool
}

// Gateway is what the runtime needs of the gateway serving its sessions
// (package zone/zonegate adapts a *gateway.Gateway): closing the socket
// of an account's session that a login on another node displaced.
type Gateway interface {
	// Displaced closes the socket of a's session here if its epoch is
	// below newer; the session's Leave follows.
	Displaced(a account.ID, newer uint64)
}

// gwSession is a session this node is the gateway of.
type gwSession struct {
	s           Session
	master, pet ecs.ID
	rec         worldstore.Player // loaded once no node had the player; Epoch 0: a new player
	found       bool
	waitUntil   uint64   // waiting for a takeover answer until this tick (0: not waiting)
	reattachAt  uint64   // a local takeover: attach and take the player over at this tick
	awaiting    []string // the nodes whose takeover answer is still expected
	findAt      uint64   // the tick the search for the player began
	localWait   bool     // waiting for a save to land here (saveLanded)
	loading     bool     // the record is being loaded (loaded)
	spawnWait   bool     // the record is loaded; its position's owner is dead (spawnFor)
	verify      bool     // a peer died: ask where the master is (lostplayers.go), at verifyAt
	verifyAt    uint64   // the tick to ask at
	verifying   bool     // asked: awaiting says who is still to answer
	askedAgain  bool     // every node said NotHere once: this is the second asking
	pending     [][]byte
	cols        map[column]uint64 // the terrain columns sent, at their revision
	on          string            // the node asked to bring the player in ("" for this one, or a takeover)
	closed      bool              // displaced, its socket gone: the player waits to be taken over
	orphanAt    uint64            // until this tick
}

// Deliver collects a tick's frames (outbox.Sink): local ones at the flush,
// forwarded ones as they arrive; flushSessions sends them as one batch.
func (g *gwSession) Deliver(_ uint64, frames [][]byte) { g.pending = append(g.pending, frames...) }

// Post queues fn to run on the world goroutine at the start of the next
// Step, before the tick: the way other goroutines (a gateway's, a host's,
// a test's) read or change the world. Safe for concurrent use.
func (r *Runtime) Post(fn func()) {
	r.opsMu.Lock()
	r.ops = append(r.ops, fn)
	r.opsMu.Unlock()
}

func (r *Runtime) runOps() {
	r.opsMu.Lock()
	ops := r.ops
	r.ops = nil
	r.opsMu.Unlock()
	for _, fn := range ops {
		fn()
	}
}

// flushSessions sends each session its tick's batch: one per tick,
// merging local frames and those forwarded from other nodes.
func (r *Runtime) flushSessions(tick uint64) {
	for _, g := range r.gw {
		if len(g.pending) > 0 {
			g.s.Deliver(tick, g.pending)
			clear(g.pending)
			g.pending = g.pending[:0]
		}
	}
}

// SetGateway gives the runtime the gateway whose sockets it closes when a
// login elsewhere takes a player over (nil: none).
func (r *Runtime) SetGateway(g Gateway) {
	r.opsMu.Lock()
	r.gateway = g
	r.opsMu.Unlock()
}

// Sessions is the world side of the gateway role: how the sessions a
// gateway serves come into this runtime's world. Its methods are safe for
// concurrent use and never wait for a tick: each posts its work to the
// world goroutine (Post). Package zone/zonegate adapts it to a
// gateway.World.
type Sessions struct {
	r *Runtime
}

// Sessions returns the runtime's world side of the gateway role: the
// players of the sessions come into this world from Config.WorldStore
// (or are taken over where they already are), inputs reach whichever node
// simulates the entity, and a logout saves the player. The module must
// have called SetPlayers.
func (r *Runtime) Sessions() (*Sessions, error) {
	if r.players == nil {
		return nil, errors.New("zone: the module has no players (SetPlayers)")
	}
	return &Sessions{r: r}, nil
}

// Join starts a session that has logged in and is recorded in the
// directory with s.Epoch(): the account's player is taken over where it
// is, or brought in. The player's record is loaded only once no node has
// the player nor a save of it still on its way (loadFor): a record loaded
// before would miss a logout's save that lands meanwhile.
func (p *Sessions) Join(s Session) error {
	g := &gwSession{s: s}
	p.r.Post(func() { p.r.joinSession(g) })
	return nil
}

// Input checks in with the module (Players.CheckInput; an error matches
// clientinput.ErrBadInput for what it refuses) and sends it to the node
// that simulates in.Entity, fenced by the session's epoch. The caller has
// checked that in.Entity is the master or the pet SetYou named.
func (p *Sessions) Input(s Session, in clientinput.Input) error {
	if err := p.r.players.CheckInput(in); err != nil {
		return err
	}
	p.r.Post(func() { p.r.sessionInput(s, in) })
	return nil
}

// Leave ends a session, once, whatever ended it: unless a newer session
// of the account holds the player now, the player is saved and taken out.
// Nothing happens once the node's sessions were abandoned
// (AbandonSessions).
func (p *Sessions) Leave(s Session) {
	if p.r.lost.abandoned.Load() {
		return
	}
	p.r.Post(func() { p.r.leaveSession(s) })
}

// takeoverWait is how long a new session waits for the nodes' answers
// before it brings the player in from the store (a node that never
// answers is taken for dead). saveWait is how long it waits once a node
// said the player's save is on its way (longer than the saver's store
// timeout, so the answer comes first).
const (
	takeoverWait = 40
	saveWait     = 12 * time.Second
)

// joinSession starts a session this node is the gateway of. The one-player
// rule: the account's player, wherever it is, is taken over; only when no
// live node has it (nor a save of it still on its way to the store) is it
// brought in from the store.
func (r *Runtime) joinSession(g *gwSession) {
	a := g.s.Account()
	session := g.s.Epoch()
	r.pstats.Joined++
	if d, ok := r.displacedBy[a]; (ok && d.session > session) || g.s.Superseded() {
		// A newer login's takeover reached this node before this session
		// did: that login takes the player over or brings it in; this one
		// brings in nothing (its socket is closed).
		r.closeDisplaced(a, d.session)
		return
	}
	if old := r.gw[a]; old != nil {
		if old.s.Epoch() > session {
			return // a newer session got here first; this one is being closed
		}
		r.gw[a] = g
		r.Attach(a, nil)
		r.clearViewer(a)
		if old.master != 0 {
			// The displaced session was served here: take its player over.
			// The new socket starts from an empty view: the account's
			// subscriber is dropped now (what it would be told goes to no
			// sink) and made afresh two ticks on, so the new client gets
			// every appear.
			r.tellPlayer(session, old.master, old.pet)
			g.master, g.pet = old.master, old.pet
			g.reattachAt = r.w.CurrentTick().N + 2
			return
		}
		// The displaced session was still looking for its player: this one
		// looks afresh.
	}
	r.gw[a] = g
	r.findPlayer(g)
}

// findPlayer looks for the session's player: among the masters simulated
// here, then by asking every live node (the one that simulates it
// answers, whatever became of its gateway; the older session's gateway
// answers too, and closes its socket). A save of it still on its way
// here or there holds the load off until it has landed.
func (r *Runtime) findPlayer(g *gwSession) {
	a := g.s.Account()
	session := g.s.Epoch()
	now := r.w.CurrentTick().N
	g.findAt, g.awaiting = now, g.awaiting[:0]
	var found bool
	if master, pet, ok := r.masterOf(a, session); ok {
		found = true
		r.Attach(a, nil)
		r.clearViewer(a)
		r.tellPlayer(session, master, pet)
		g.master, g.pet = master, pet
		g.reattachAt = now + 2
	} else {
		r.Attach(a, g)
		g.localWait = r.awaitSave(a, "", session)
		if !g.localWait && r.cluster != nil {
			// Its master may be here as checkpoint records, to be adopted.
			g.localWait = r.cluster.awaitAdoption("", wire.Player{Account: a, Session: session})
		}
	}
	if r.cluster != nil {
		m := wire.Player{Fence: r.cluster.fence(), Op: wire.PlayerTakeover, Account: a, Session: session}
		payload := m.Append(nil)
		for _, n := range r.Table().Nodes() {
			if n != r.Name() && r.cluster.maybeLive(n) {
				r.cluster.queue(n, wire.KindPlayer, payload)
				g.awaiting = append(g.awaiting, n)
			}
		}
	}
	switch {
	case found:
	case g.localWait:
		g.waitUntil = now + r.saveWaitTicks()
	case len(g.awaiting) > 0:
		g.waitUntil = now + takeoverWait
	default:
		r.loadFor(g)
	}
}

func (r *Runtime) saveWaitTicks() uint64 {
	return max(uint64(saveWait/r.cfg.TickInterval), takeoverWait)
}

// closeDisplaced closes the account's socket here if its session is older
// than newer.
func (r *Runtime) closeDisplaced(a account.ID, newer uint64) {
	r.opsMu.Lock()
	gw := r.gateway
	r.opsMu.Unlock()
	if gw != nil {
		gw.Displaced(a, newer)
	}
}

// loadFor loads the session's record (on the saver's goroutine, after
// every save queued here) and then brings the player in (loaded).
func (r *Runtime) loadFor(g *gwSession) {
	g.waitUntil = 0
	if r.saver.store == nil {
		r.spawnFor(g)
		return
	}
	if g.loading {
		return
	}
	g.loading = true
	ok := r.saver.queue(saveJob{who: g.s.Account(), load: func(rec worldstore.Player, err error) {
		r.Post(func() { r.loaded(g, rec, err) })
	}})
	if !ok {
		g.loading = false
		g.s.Fail("zone: the world store's queue is full")
	}
}

func (r *Runtime) loaded(g *gwSession, rec worldstore.Player, err error) {
	g.loading = false
	a := g.s.Account()
	if r.gw[a] != g || g.master != 0 {
		return // gone, displaced, or a late answer handed it its player
	}
	if d, ok := r.displacedBy[a]; (ok && d.session > g.s.Epoch()) || g.s.Superseded() {
		return // a newer login is on its way: it brings the player in
	}
	switch {
	case err == nil:
		g.rec, g.found = rec, true
	case errors.Is(err, worldstore.ErrNotFound):
	default:
		r.cfg.Logger.Error("zone: load player", "account", a, "err", err)
		g.s.Fail(fmt.Sprintf("zone: load player %d: %v", a, err))
		return
	}
	r.spawnFor(g)
}

// takeOver makes the session g the one the player master/pet answers to.
func (r *Runtime) takeOver(g *gwSession, master, pet ecs.ID) {
	g.master, g.pet, g.waitUntil, g.spawnWait = master, pet, 0, false
	r.tellPlayer(g.s.Epoch(), master, pet)
	r.SetViewer(g.s.Account(), master)
	r.pstats.TakenOver++
	g.s.SetYou(uint64(master), uint64(pet))
}

// spawnFor brings the session's player in: here if this node owns its
// position, else on the owner, with ids minted here.
func (r *Runtime) spawnFor(g *gwSession) {
	g.waitUntil, g.spawnWait = 0, false
	a := g.s.Account()
	pos, state := g.rec.Pos, g.rec.State
	if !g.found {
		pos, state = r.players.Home(a), nil
	}
	pos = r.geo.Normalise(pos)
	if owner := r.Table().OwnerOf(pos); r.cluster != nil && owner != r.Name() && !r.cluster.maybeLive(owner) {
		// The table still names a node whose lease has ended: a spawn
		// sent there would be lost. Wait for the failover's table
		// (checkTakeovers tries again every tick).
		g.spawnWait = true
		return
	}
	master, err := r.NewID()
	var pet ecs.ID
	if err == nil {
		pet, err = r.NewID()
	}
	if err != nil {
		r.cfg.Logger.Error("zone: spawn player", "account", a, "err", err)
		g.s.Fail("zone: no id for the player: " + err.Error())
		return
	}
	session := g.s.Epoch()
	g.on = ""
	if owner := r.Table().OwnerOf(pos); r.cluster != nil && owner != r.Name() {
		m := wire.Player{Fence: r.cluster.fence(), Op: wire.PlayerSpawn, Account: a, Session: session,
			Master: uint64(master), Pet: uint64(pet), Pos: pos, State: state}
		r.cluster.queue(owner, wire.KindPlayer, m.Append(nil))
		g.on = owner
	} else if r.spawnHere(a, session, master, pet, pos, state) {
		r.pstats.Spawned++
	} else {
		g.s.Fail("zone: the player could not be brought into the world")
		return
	}
	g.master, g.pet = master, pet
	r.viewHint[a] = r.geo.ChunkOf(pos)
	r.SetViewer(a, master)
	g.s.SetYou(uint64(master), uint64(pet))
}

func (r *Runtime) spawnHere(a account.ID, session uint64, master, pet ecs.ID, pos torus.Pos, state []byte) bool {
	if err := r.players.Spawn(a, master, pet, pos, state); err != nil {
		r.cfg.Logger.Error("zone: spawn player", "account", a, "err", err)
		return false
	}
	for _, id := range []ecs.ID{master, pet} {
		if o, ok := r.owner.Get(id); ok {
			o.Account, o.Session = a, session
		} else if r.w.Alive(id) {
			_ = r.SetOwner(id, a)
			if o, ok := r.owner.Get(id); ok {
				o.Session = session
			}
		}
	}
	return true
}

// sessionInput sends a client's input to the entity's simulating node
// (this one included) as a reserved intent fenced by the session.
func (r *Runtime) sessionInput(s Session, in clientinput.Input) {
	g := r.gw[s.Account()]
	if g == nil || g.s != s {
		return // a displaced session's late input
	}
	data := appendInput(appendSession(nil, s.Epoch()), in)
	id := ecs.ID(in.Entity)
	r.sendToPlayer(g, Intent{Kind: intentInput, Source: id, Target: id, Data: data})
}

// sendToPlayer sends one of the session's intents to its entity. Until
// this node knows where the entity is (it was brought in on another node
// whose ghost of it has not arrived: a client that logs out or walks at
// once), it goes to the node that was asked to bring it in: on the same
// ordered stream, after the spawn, so it finds the entity there.
func (r *Runtime) sendToPlayer(g *gwSession, in Intent) {
	if r.cluster == nil || g.on == "" || r.w.Alive(in.Target) || r.isGhost(in.Target) || r.cluster.wentTo(in.Target) {
		r.Send(in)
		return
	}
	r.cluster.sendIntent(g.on, in, 0)
}

func (r *Runtime) leaveSession(s Session) {
	a := s.Account()
	g := r.gw[a]
	if g == nil || g.s != s {
		return // displaced: the newer session holds the player
	}
	r.Attach(a, nil)
	r.clearViewer(a)
	if s.Superseded() && g.master != 0 {
		// A newer login displaced it: keep the player for that session to
		// take over (here, or by asking this node), whichever of the two
		// reaches this node first; log it out only if nobody does.
		g.closed, g.orphanAt = true, r.w.CurrentTick().N+orphanWait
		return
	}
	delete(r.gw, a)
	if g.master != 0 {
		r.logout(g)
	}
}

// orphanWait is how long the player of a displaced session waits for the
// newer session to take it over before it is logged out.
const orphanWait = 200

func (r *Runtime) logout(g *gwSession) {
	r.sendToPlayer(g, Intent{Kind: intentLogout, Source: g.master, Target: g.master, Data: append(appendSession(nil, g.s.Epoch()), sessionEnd)})
}

// clearViewer stops keeping an account's view.
func (r *Runtime) clearViewer(a account.ID) {
	if id, ok := r.viewerOf[a]; ok {
		delete(r.viewerOf, a)
		if r.viewerAcc[id] == a {
			delete(r.viewerAcc, id)
		}
	}
	delete(r.viewHint, a)
	r.subs.Forget(interest.Account(a))
}

// checkTakeovers brings in from the store the players of sessions whose
// takeover got no answer in time.
func (r *Runtime) checkTakeovers(tick uint64) {
	r.seeDeadPeers()
	r.checkUnclaimed(tick)
	due := r.dueJoins[:0]
	for a, g := range r.gw {
		if (g.waitUntil != 0 && tick >= g.waitUntil) || (g.reattachAt != 0 && tick >= g.reattachAt) || (g.closed && tick >= g.orphanAt) ||
			g.spawnWait || (g.verify && tick >= g.verifyAt) || r.deadAwaited(g) {
			due = append(due, a)
		}
	}
	slices.Sort(due) // ids are minted in account order: the same run mints the same ids
	for a, d := range r.displacedBy {
		if tick >= d.until {
			delete(r.displacedBy, a)
		}
	}
	for _, a := range due {
		g := r.gw[a]
		if g.closed {
			delete(r.gw, a) // nobody took it over
			r.logout(g)
			continue
		}
		if g.spawnWait {
			r.spawnFor(g)
		}
		if g.verify && tick >= g.verifyAt {
			r.verifyMaster(g)
		}
		switch {
		case g.verifying:
			if len(g.awaiting) == 0 {
				r.nobodyHas(g) // the nodes that had not answered died
			}
		case g.waitUntil == 0 || g.master != 0:
		case len(g.awaiting) == 0 && !g.localWait:
			// Every node answered NotHere, the dead ones by their fence.
			r.loadFor(g)
		case tick < g.waitUntil:
		case len(g.awaiting) > 0 && tick < g.findAt+r.saveWaitTicks():
			// A node whose lease has not ended is silent: it may simulate
			// the player yet (a process that died keeps its lease for the
			// TTL, and its standby adopts the player after it). Wait for
			// its answer or its fence, up to the wait of a save.
			g.waitUntil = g.findAt + r.saveWaitTicks()
		default:
			r.loadFor(g)
		}
		if g.reattachAt != 0 && tick >= g.reattachAt {
			g.reattachAt = 0
			r.Attach(a, g)
			if ch, ok := r.vis.ChunkOf(g.master); ok {
				r.viewHint[a] = ch
			}
			r.takeOver(g, g.master, g.pet)
		}
	}
	r.dueJoins = due
}

// wentTo reports whether id was handed on from here (its intents follow
// it by the went record).
func (c *cluster) wentTo(id ecs.ID) bool {
	_, ok := c.wentOf(id)
	return ok
}

// receivePlayer handles a KindPlayer message from peer.
func (c *cluster) receivePlayer(from string, payload []byte) error {
	m, err := wire.DecodePlayer(payload)
	if err != nil {
		return err
	}
	if !c.r.accept(from, m.Fence) {
		c.stats.Refused++
		return nil
	}
	r := c.r
	switch m.Op {
	case wire.PlayerSpawn:
		if r.players == nil {
			return errors.New("zone: a spawn for a module without players")
		}
		if r.spawnHere(m.Account, m.Session, ecs.ID(m.Master), ecs.ID(m.Pet), m.Pos, m.State) {
			r.pstats.Spawned++
		}
	case wire.PlayerTakeover:
		c.queue(from, wire.KindPlayer, r.answerTakeover(from, m).Append(nil))
	case wire.PlayerTaken, wire.PlayerNotHere, wire.PlayerSaving:
		r.takeoverAnswer(from, m)
	}
	return nil
}

// answerTakeover answers a newer session's takeover of m.Account from
// node from: Taken if this node was the older session's gateway with the
// player, or simulates the player's master; Saving if the player logged
// out here and its record is still on its way to the store (NotHere
// follows when it lands); else NotHere.
func (r *Runtime) answerTakeover(from string, m wire.Player) wire.Player {
	c := r.cluster
	a := m.Account
	reply := wire.Player{Fence: c.fence(), Op: wire.PlayerNotHere, Account: a, Session: m.Session}
	taken := func(master, pet ecs.ID) {
		r.tellPlayer(m.Session, master, pet)
		r.claimed(master)
		reply.Op, reply.Master, reply.Pet = wire.PlayerTaken, uint64(master), uint64(pet)
		if ch, ok := r.vis.ChunkOf(master); ok {
			reply.Chunk = ch
		} else if p, ok := r.pos.Get(master); ok {
			// Adopted this tick (a login that waited for its records):
			// not indexed yet.
			reply.Chunk = r.geo.ChunkOf(p.Pos)
		}
	}
	if g := r.gw[a]; g != nil && g.s.Epoch() < m.Session {
		// The older session is served here: it lets go of the player (or
		// of its search for it: the newer session searches too).
		if g.master != 0 {
			taken(g.master, g.pet)
		}
		delete(r.gw, a)
		r.Attach(a, nil)
		r.clearViewer(a)
	}
	if reply.Op != wire.PlayerTaken {
		if master, pet, ok := r.masterOf(a, m.Session+1); ok {
			// Simulated here, whatever became of its gateway (answering
			// to this session already: the session's gateway checks where
			// its master went after a node died, lostplayers.go).
			taken(master, pet)
		} else if r.awaitSave(a, from, m.Session) {
			reply.Op = wire.PlayerSaving
		} else if c.awaitAdoption(from, m) {
			// Its master is here as checkpoint records, to be adopted:
			// answered again when they are adopted or gone.
			reply.Op = wire.PlayerSaving
		}
	}
	// Whatever this node had of the account's older sessions closes (its
	// socket is told, its Leave finds nothing), and one that reaches this
	// world only now brings nothing in (joinSession).
	r.noteDisplaced(a, m.Session)
	r.closeDisplaced(a, m.Session)
	return reply
}

// takeoverAnswer handles a node's answer to this node's takeover.
func (r *Runtime) takeoverAnswer(from string, m wire.Player) {
	g := r.gw[m.Account]
	if g == nil || g.s.Epoch() != m.Session {
		if m.Op == wire.PlayerTaken && (g == nil || g.s.Epoch() < m.Session) {
			if d, ok := r.displacedBy[m.Account]; !ok || d.session <= m.Session {
				// The session that asked left meanwhile and no newer one
				// is known: the player handed to it would stay in the
				// world with nobody to play it. Log it out (saved).
				r.cluster.sendIntent(from, Intent{Kind: intentLogout, Source: ecs.ID(m.Master), Target: ecs.ID(m.Master), Data: appendSession(nil, m.Session)}, 0)
			}
		}
		return
	}
	if g.verifying {
		r.verifyAnswer(from, g, m)
		return
	}
	switch m.Op {
	case wire.PlayerTaken:
		if g.master != 0 {
			if ecs.ID(m.Master) != g.master {
				// Too late: the session brought its player in from the
				// store meanwhile. The one handed over answers to this
				// session now; log it out, through the node that had it.
				r.cluster.sendIntent(from, Intent{Kind: intentLogout, Source: ecs.ID(m.Master), Target: ecs.ID(m.Master), Data: appendSession(nil, m.Session)}, 0)
			}
			return
		}
		r.viewHint[m.Account] = m.Chunk
		g.on = from // it has the player or its ghost: it passes intents on
		r.takeOver(g, ecs.ID(m.Master), ecs.ID(m.Pet))
	case wire.PlayerSaving:
		if g.master == 0 && g.waitUntil != 0 {
			g.waitUntil = max(g.waitUntil, r.w.CurrentTick().N+r.saveWaitTicks())
		}
	case wire.PlayerNotHere:
		if g.master != 0 || g.waitUntil == 0 || !g.answered(from) {
			return
		}
		if len(g.awaiting) == 0 && !g.localWait {
			r.loadFor(g)
		}
	}
}

// maybeLive reports whether node may be alive: not known to have lost its
// lease (a node this one never heard from counts as live).
func (c *cluster) maybeLive(node string) bool {
	if c.r.cfg.Accept == nil {
		return true
	}
	if _, fenced := c.fenced[node]; fenced {
		return false
	}
	l, ok := c.leaseOf[node]
	return !ok || c.r.cfg.Accept(node, l)
}

// ---- the input's bytes inside a reserved intent ----

// The layout, little-endian: Seq u32, Kind u32, HasPoint byte (0 or 1),
// Point.X, .Y, .Z as float64 bits, Target u64: 41 bytes. It follows the
// session's 8 bytes in the Data of an intentInput.
func appendInput(dst []byte, in clientinput.Input) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, in.Seq)
	dst = binary.LittleEndian.AppendUint32(dst, in.Kind)
	var has byte
	if in.HasPoint {
		has = 1
	}
	dst = append(dst, has)
	for _, v := range [3]float64{in.Point.X, in.Point.Y, in.Point.Z} {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
	}
	return binary.LittleEndian.AppendUint64(dst, in.Target)
}

// decodeInput reads what appendInput wrote, from a peer's bytes: an
// error (ErrMalformedInput, ZONE.MALFORMED_INPUT) names the field and its
// byte offset. A point that is not finite is refused.
func decodeInput(b []byte) (clientinput.Input, error) {
	r := binread.New(b, "Input", ErrMalformedInput)
	in := clientinput.Input{Seq: r.U32("Seq"), Kind: r.U32("Kind")}
	at := r.Offset()
	switch has := r.Byte("HasPoint"); has {
	case 0, 1:
		in.HasPoint = has == 1
	default:
		r.FailAt(at, "HasPoint", "%d, want 0 or 1", has)
	}
	at = r.Offset()
	in.Point = torus.Pos{
		X: math.Float64frombits(r.U64("Point.X")),
		Y: math.Float64frombits(r.U64("Point.Y")),
		Z: math.Float64frombits(r.U64("Point.Z")),
	}
	if r.Err() == nil && !in.Point.Finite() {
		r.FailAt(at, "Point", "not finite: %v", in.Point)
	}
	in.Target = r.U64("Target")
	if err := r.Finish(); err != nil {
		return clientinput.Input{}, err
	}
	return in, nil
}
