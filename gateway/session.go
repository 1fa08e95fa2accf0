package gateway

import (
	"sync/atomic"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/gateway/clientinput"
)

// World is the simulation a gateway's sessions play in: the zone runtime,
// through package zone/zonegate's World. The gateway calls it from connection goroutines; an
// implementation queues the work to the world's own goroutine and returns
// without waiting for a tick.
type World interface {
	// Join starts a session that has logged in and is recorded in the
	// directory with s.Epoch(): the world brings the account's player into
	// the world (or takes over the one already there), routes the
	// account's batches to s (s is an outbox.Sink), and tells the client
	// its entities with s.SetYou. An error closes the socket
	// (GATEWAY.UNAVAILABLE) and the gateway calls Leave.
	Join(s *Session) error
	// Input asks for in to be done. The gateway has checked that
	// in.Entity is the master or the pet SetYou named; the world checks
	// the rest (kind, point, target) and returns an error matching
	// ErrBadInput for what it refuses. It must fence the input by the
	// session's epoch: an input of an older session than the one the
	// player now belongs to changes nothing.
	Input(s *Session, in Input) error
	// Leave ends a session, once, whatever ended it (logout, a closed or
	// failed socket, displacement, shutdown). The world detaches s and,
	// unless a newer session of the account holds the player now, saves
	// and removes it: a displaced session's late Leave changes nothing.
	Leave(s *Session)
}

// Input is one validated client input. It is clientinput.Input, a
// package of its own so that the zone runtime and game modules name it
// without importing the gateway.
type Input = clientinput.Input

// Session is one logged-in connection: the sink of its account's batches
// and the handle the World talks to the client through. Its methods are
// safe for concurrent use and never block.
type Session struct {
	c       *conn
	account account.ID
	epoch   directory.Epoch
	prev    directory.Session
	master  atomic.Uint64
	pet     atomic.Uint64
}

// Account is the session's account.
func (s *Session) Account() account.ID { return s.account }

// Epoch is the session's epoch in the directory.
func (s *Session) Epoch() directory.Epoch { return s.epoch }

// Displaced is the account's previous session that this login displaced
// (its Epoch is 0 when there was none): where the player may still be,
// for the World to take it over rather than bring in a second one.
func (s *Session) Displaced() directory.Session { return s.prev }

// Deliver queues tick's batch for the client (outbox.Sink): one Batch
// holding the frames as they are (retained until written, never
// re-encoded; the slice itself is copied, so the caller may reuse it).
// The World calls it at most once per tick, in increasing tick order,
// with everything of the tick (its local frames and those forwarded from
// other nodes); an empty delivery sends nothing. A client whose backlog
// would exceed Limits.SendBudget is disconnected as a slow reader.
func (s *Session) Deliver(tick uint64, frames [][]byte) {
	if len(frames) > 0 {
		s.c.enqueueBatch(tick, frames)
	}
}

// SetYou names the player's master and pet (0: none at the moment), tells
// the client, and lets inputs for them through.
func (s *Session) SetYou(master, pet uint64) {
	changed := s.master.Swap(master) != master
	if s.pet.Swap(pet) != pet || changed {
		s.c.enqueueRaw(appendYou(nil, master, pet))
	}
}

// You returns the player's master and pet as SetYou last named them.
func (s *Session) You() (master, pet uint64) { return s.master.Load(), s.pet.Load() }

// SendTerrain queues one chunk's ground (the terrain package's encoding).
func (s *Session) SendTerrain(chunk []byte) { s.c.enqueueRaw(appendTerrain(nil, chunk)) }

// SendError tells the client of an error without closing the socket.
func (s *Session) SendError(code, message string) {
	s.c.enqueueRaw(appendError(nil, code, message, 0))
}

// Fail closes the session's socket because the World cannot serve it
// (GATEWAY.UNAVAILABLE, status 4006, after an Error with message). Its
// Leave follows as for any end.
func (s *Session) Fail(message string) {
	s.c.closeWith(StatusUnavailable, CodeUnavailable, message)
}

// Superseded reports whether the session ended because a newer login of
// its account displaced it: its World then keeps the player for the newer
// session to take over, rather than logging it out.
func (s *Session) Superseded() bool {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.c.closing && s.c.status == StatusDisplaced
}

// Done is closed once the socket is closed.
func (s *Session) Done() <-chan struct{} { return s.c.done }
