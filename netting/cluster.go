package netting

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/rendezvous"
)

// ScopeRouter returns the scope → node assignment of economy-lab's
// scopeRouter: rendezvous placement over nodes (package rendezvous), so a
// Go node and a TypeScript node agree. An empty list or a duplicate is
// CONFIG.INVALID. The order of nodes changes only exact-tie breaks.
func ScopeRouter(nodes []string) (func(scope string) string, error) {
	t, err := rendezvous.New(nodes)
	if err != nil {
		return nil, err
	}
	return t.Owner, nil
}

// ClusterNode is one economy node: the scope router bound to this node's
// identity, the shared reservation counter, ownership-gated sessions with
// epoch rotation, recovery and the orphan sweep. It starts no goroutines;
// the caller drives rotation (RotateDue) and the sweep (SweepOrphans) on its
// own schedule.
type ClusterNode struct {
	store SharedStore
	cfg   ClusterConfig
	owner func(string) string
	log   *slog.Logger
	nonce string
	next  atomic.Int64

	mu     sync.Mutex
	lanes  map[string]*lane
	closed bool

	// breaches counts the settles of this node that found the ledger
	// refusing an accepted movement or a netted chunk (Breaches).
	breaches atomic.Int64
	// plant: the planted bugs of the model's bite test (export_test.go).
	plant plantedBugs
}

// Breaches returns how many invariant breaches this node's settles have
// met: a netted chunk or an accepted movement the ledger refused, which
// the spending rule makes impossible (each is also logged at error level,
// and a refused movement leaves its session unsettled with a
// *BreachError). A monitor alerts on any nonzero value.
func (n *ClusterNode) Breaches() int64 { return n.breaches.Load() }

// lane is the current epoch of one scope on this node.
type lane struct {
	mu  sync.Mutex
	cur *Session
}

// OpenClusterNode validates cfg and binds it to store. It refuses, with
// CONFIG.INVALID: a node id missing from its own list, an empty or
// duplicated list, a store without the shared reservation counter, and a
// sweep bound under 2·EpochMaxAge.
func OpenClusterNode(store Store, cfg ClusterConfig) (*ClusterNode, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	shared, ok := store.(SharedStore)
	if !ok || store == nil {
		return nil, errcode.Config("store", fmt.Sprintf("%T", store), "has no shared reservation counter (netting.ReservationStore)")
	}
	cfg = cfg.WithDefaults()
	owner, err := ScopeRouter(cfg.Nodes)
	if err != nil {
		return nil, err
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("netting: session nonce: %w", err)
	}
	return &ClusterNode{
		store: shared,
		cfg:   cfg,
		owner: owner,
		log:   cfg.Logger.With("node", cfg.NodeID),
		nonce: hex.EncodeToString(b[:]),
		lanes: map[string]*lane{},
	}, nil
}

// NodeID returns this node's id.
func (n *ClusterNode) NodeID() string { return n.cfg.NodeID }

// Owns reports whether this node owns scope.
func (n *ClusterNode) Owns(scope string) bool { return n.owner(scope) == n.cfg.NodeID }

// OwnerOf returns the node that owns scope.
func (n *ClusterNode) OwnerOf(scope string) string { return n.owner(scope) }

// AssertOwns returns a *MisroutedError (SESSION.MISROUTED, naming the
// owner) unless this node owns scope.
func (n *ClusterNode) AssertOwns(scope string) error {
	if o := n.owner(scope); o != n.cfg.NodeID {
		return &MisroutedError{Scope: scope, Owner: o, NodeID: n.cfg.NodeID}
	}
	return nil
}

// OpenSession opens a fresh session (a new epoch) for a scope this node
// owns, storing the node's chunk width with it.
func (n *ClusterNode) OpenSession(ctx context.Context, scope string) (*Session, error) {
	if err := n.AssertOwns(scope); err != nil {
		return nil, err
	}
	if n.isClosed() {
		return nil, ErrClosed
	}
	id := "sess:" + scope + ":" + n.nonce + "-" + strconv.FormatInt(n.next.Add(1), 10)
	meta, err := n.store.CreateSession(ctx, SessionMeta{ID: id, Scope: scope, NodeID: n.cfg.NodeID, ChunkWidth: n.cfg.ChunkWidth})
	if err != nil {
		return nil, fmt.Errorf("netting: open session for %s: %w", scope, err)
	}
	return n.bind(meta), nil
}

func (n *ClusterNode) bind(meta SessionMeta) *Session {
	return &Session{
		store:         n.store,
		meta:          meta,
		owner:         n.cfg.NodeID + "/" + n.nonce + "/" + strconv.FormatInt(n.next.Add(1), 10),
		lease:         n.cfg.SettleLease,
		log:           n.log,
		opened:        n.localNow(),
		now:           n.localNow,
		commitTimeout: n.cfg.CommitTimeout,
		st:            newSessionState(meta.ID),
		onBreach:      func() { n.breaches.Add(1) },
		plant:         n.plant,
	}
}

// Recover rebuilds a session from the store: its journal (verified, else
// CHAIN.BROKEN), the outcomes of its keys, its stored chunk width, whether
// a settle fell back to replay, and whether it is settled. Settle on the
// result finishes a crashed epoch's settle. Recover does not check
// ownership: finishing a dead node's epoch is any node's job, and the
// settle claim keeps two finishers apart. Reservations are not re-added:
// the shared counter already holds them.
func (n *ClusterNode) Recover(ctx context.Context, sessionID string) (*Session, error) {
	meta, err := n.store.Session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	recs, err := n.store.ReadJournal(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("netting: recover %s: %w", sessionID, err)
	}
	head, err := VerifyChain(sessionID, recs)
	if err != nil {
		return nil, err
	}
	s := n.bind(meta)
	s.st.restore(recs, head)
	s.st.replaying = meta.Replaying
	if meta.Sealed {
		s.st.closedForRecords = true
	}
	if meta.Settled {
		rep, err := s.reportSettled(ctx, meta, recs, head)
		if err != nil {
			return nil, err
		}
		s.st.finish(rep)
	}
	return s, nil
}

// Record records m in the current epoch of scope on this node, opening one
// if needed and rotating it (settle, then a fresh session id) when it has
// accepted MaxMovements or is older than EpochMaxAge. A scope owned
// elsewhere fails with SESSION.MISROUTED before anything is written.
func (n *ClusterNode) Record(ctx context.Context, scope string, m Movement) (Outcome, error) {
	if err := n.AssertOwns(scope); err != nil {
		return Outcome{}, err
	}
	for attempt := 0; ; attempt++ {
		s, err := n.current(ctx, scope)
		if err != nil {
			return Outcome{}, err
		}
		out, err := s.Record(ctx, m)
		if err == nil || Code(err) != CodeSettled || attempt > 0 {
			n.rotateIfFull(ctx, scope, s)
			return out, err
		}
		// The epoch closed under us (rotation, or a sweeper sealed it):
		// move to a fresh one and try once more.
		n.retire(ctx, scope, s)
	}
}

// current returns the scope's open session, rotating it first if it is due.
func (n *ClusterNode) current(ctx context.Context, scope string) (*Session, error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, ErrClosed
	}
	l := n.lanes[scope]
	if l == nil {
		l = &lane{}
		n.lanes[scope] = l
	}
	n.mu.Unlock()
	l.mu.Lock()
	if l.cur != nil && !n.due(l.cur) {
		s := l.cur
		l.mu.Unlock()
		return s, nil
	}
	old := l.cur
	s, err := n.OpenSession(ctx, scope)
	if err != nil {
		l.mu.Unlock()
		return nil, err
	}
	l.cur = s
	l.mu.Unlock()
	// Settle the old epoch outside the lane lock: Records on the scope
	// already go to the new one.
	if old != nil {
		n.settleRetired(ctx, old)
	}
	return s, nil
}

func (n *ClusterNode) due(s *Session) bool {
	if s.WasSettled() {
		return true
	}
	return s.Accepted() >= int64(n.cfg.MaxMovements) || n.localNow().Sub(s.opened) >= n.cfg.EpochMaxAge
}

func (n *ClusterNode) rotateIfFull(ctx context.Context, scope string, s *Session) {
	if s.Accepted() >= int64(n.cfg.MaxMovements) {
		n.retire(ctx, scope, s)
	}
}

// retire replaces s as the scope's current session (if it still is) and
// settles it.
func (n *ClusterNode) retire(ctx context.Context, scope string, s *Session) {
	n.mu.Lock()
	l := n.lanes[scope]
	n.mu.Unlock()
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.cur != s {
		l.mu.Unlock()
		return
	}
	l.cur = nil
	l.mu.Unlock()
	n.settleRetired(ctx, s)
}

// settleRetired settles a rotated-out epoch. A failure is logged, not
// returned to the Record that triggered it: the session stays journaled and
// unsettled, and the sweep (or Recover) finishes it.
func (n *ClusterNode) settleRetired(ctx context.Context, s *Session) {
	if _, err := s.Settle(ctx); err != nil {
		// A breach was logged at error level by the settle itself.
		n.log.Warn("netting: settle of rotated epoch failed; left for the sweep", "session", s.ID(), "code", Code(err), "err", err)
	}
}

// RotateDue settles and forgets every open session that is due by age or
// size (the next Record on its scope opens a fresh one). Call it on a timer
// so that idle scopes rotate too. It returns the reports of the settles.
func (n *ClusterNode) RotateDue(ctx context.Context) ([]SettleReport, error) {
	return n.settleLanes(ctx, false)
}

// SettleAll settles and forgets every open session (a graceful shutdown).
func (n *ClusterNode) SettleAll(ctx context.Context) ([]SettleReport, error) {
	return n.settleLanes(ctx, true)
}

func (n *ClusterNode) settleLanes(ctx context.Context, all bool) ([]SettleReport, error) {
	// In scope order, not the map's: which of two sessions that spend the
	// same credits settles first decides which one a refusal sends to
	// replay, and a replayed schedule must see the same one.
	n.mu.Lock()
	scopes := slices.Sorted(maps.Keys(n.lanes))
	lanes := make([]*lane, 0, len(scopes))
	for _, sc := range scopes {
		lanes = append(lanes, n.lanes[sc])
	}
	n.mu.Unlock()
	var reps []SettleReport
	var firstErr error
	for _, l := range lanes {
		l.mu.Lock()
		s := l.cur
		if s == nil || (!all && !n.due(s)) {
			l.mu.Unlock()
			continue
		}
		l.cur = nil
		l.mu.Unlock()
		rep, err := s.Settle(ctx)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("netting: settle %s: %w", s.ID(), err)
			}
			continue
		}
		reps = append(reps, rep)
	}
	return reps, firstErr
}

// Close stops the node from opening sessions or recording. It does not
// settle (use SettleAll first for a graceful stop): open epochs are left to
// the sweep exactly as after a crash. Idempotent; the node starts no
// goroutines, so nothing remains running.
func (n *ClusterNode) Close() error {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	return nil
}

func (n *ClusterNode) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// isLive reports whether sessionID is one of this node's open epochs.
func (n *ClusterNode) isLive(sessionID string) bool {
	n.mu.Lock()
	lanes := make([]*lane, 0, len(n.lanes))
	for _, l := range n.lanes {
		lanes = append(lanes, l)
	}
	n.mu.Unlock()
	for _, l := range lanes {
		l.mu.Lock()
		live := l.cur != nil && l.cur.ID() == sessionID
		l.mu.Unlock()
		if live {
			return true
		}
	}
	return false
}

// localNow is the node's clock for durations of its own epochs.
func (n *ClusterNode) localNow() time.Time {
	if n.cfg.Clock != nil {
		return n.cfg.Clock.Now()
	}
	return time.Now()
}

// sweepNow is the one clock sweep ages are measured on.
func (n *ClusterNode) sweepNow(ctx context.Context) (time.Time, error) {
	if n.cfg.Clock != nil {
		return n.cfg.Clock.Now(), nil
	}
	return n.store.Now(ctx)
}
