package netting

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/shardwise/shardwise/ledger"
)

// LocalReservations is netting for a single process outside a cluster:
// economy-lab's instance session, whose reservations live in a
// process-local registry instead of a counter shared through the store. It
// wraps a Store that has no shared reservation counter (any Store: a
// SharedStore's own counter is simply not used) and is a SharedStore, so a
// ClusterNode of one node (OpenLocalNode) runs on it with the same session
// core, the same group commit and the same settle as a cluster.
//
// The registry is the only promise of credits, so only one process may
// record against a store's accounts through it: two processes, each with
// its own registry, could promise the same credits twice (use a
// SharedStore and a cluster for that). It is rebuilt from the store at
// construction (NewLocalReservations), as ReconcileReservations rebuilds a
// shared counter, so a process restarted after a crash keeps the promises
// of its unsettled sessions.
//
// What a SharedStore does in one transaction is done here under the
// registry's lock, held across the store call, so no other request reads
// balances and promises between the two steps: ReserveAndAppend reserves,
// appends, and undoes the reservation when the append is known not to
// have landed (a lost reply is read back); PostFencedReleasing posts and
// releases the posting's deltas at once (a lost reply is asked after,
// HasPosting). When a write's outcome cannot be learnt at all, the
// registry is rebuilt from the store, as at construction, before it
// promises anything again. The cost is that appends and postings of all
// the process's sessions take turns: a single process, as economy-lab's
// instance session is.
type LocalReservations struct {
	Store

	mu       sync.Mutex
	pending  map[string]Reserved
	released map[string]bool
	// stale says a write's outcome could not be learnt (its reply lost
	// and the read after failing): pending is rebuilt from the store
	// before it is used again (freshLocked).
	stale bool
	// tokens is the newest claim token granted to each session through
	// this registry: the fence of ReleaseSession (the Store port has no
	// fenced release of its own). Every claim of a single process goes
	// through here.
	tokens map[string]int64
}

var _ SharedStore = (*LocalReservations)(nil)

// NewLocalReservations wraps store and rebuilds the registry from its
// unsettled sessions: each session's journaled reservation deltas, less
// what its settle postings already in the ledger moved (a settle that
// crashed midway).
func NewLocalReservations(ctx context.Context, store Store) (*LocalReservations, error) {
	l := &LocalReservations{Store: store, pending: map[string]Reserved{}, released: map[string]bool{}, tokens: map[string]int64{}}
	want, err := unsettledReservations(ctx, store, func(UnsettledSession) bool { return false })
	if err != nil {
		return nil, fmt.Errorf("netting: local reservations: %w", err)
	}
	l.pending = want
	return l, nil
}

// OpenLocalNode opens a node for a single process outside a cluster: it
// owns every scope, and its reservations are a LocalReservations registry
// over store. cfg.NodeID defaults to "local" and cfg.Nodes to that one id;
// the rest of cfg is a ClusterConfig's (epochs, chunk width, the sweep that
// finishes the sessions a crash left).
func OpenLocalNode(ctx context.Context, store Store, cfg ClusterConfig) (*ClusterNode, error) {
	if cfg.NodeID == "" {
		cfg.NodeID = "local"
	}
	if len(cfg.Nodes) == 0 {
		cfg.Nodes = []string{cfg.NodeID}
	}
	local, err := NewLocalReservations(ctx, store)
	if err != nil {
		return nil, err
	}
	return OpenClusterNode(local, cfg)
}

// unsettledReservations is what the reservation counters should hold: the
// journaled deltas of every unsettled session (skipping those skip says
// were released already), each on its side, less what their settle
// postings already moved. Accounts with both sides zero are dropped.
func unsettledReservations(ctx context.Context, store ReservationSource, skip func(UnsettledSession) bool) (map[string]Reserved, error) {
	list, err := store.ListUnsettled(ctx, 0)
	if err != nil {
		return nil, err
	}
	want := map[string]Reserved{}
	for _, u := range list {
		if skip(u) {
			continue
		}
		recs, err := store.ReadJournal(ctx, u.ID)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u.ID, err)
		}
		for _, c := range splitDeltas(recs) {
			want[c.Account] = want[c.Account].Plus(c.Reserved)
		}
		// A half-settled session's postings already moved their deltas
		// out of pending as they landed (PostFencedReleasing).
		moved, err := settledSoFar(ctx, store, u.SessionMeta, recs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u.ID, err)
		}
		for _, c := range moved {
			want[c.Account] = want[c.Account].Minus(c.Reserved)
		}
	}
	for a, v := range want {
		if v.Zero() {
			delete(want, a)
		}
	}
	return want, nil
}

// ReservationSource is what UnsettledReservations reads: a Store's
// unsettled sessions, their journals and which postings exist.
type ReservationSource interface {
	ListUnsettled(ctx context.Context, limit int) ([]UnsettledSession, error)
	ReadJournal(ctx context.Context, sessionID string) ([]JournalRecord, error)
	HasPosting(ctx context.Context, id string) (bool, error)
}

// UnsettledReservations is what the shared counters of store should hold,
// rebuilt from its journals (ReconcileReservations' want): the deltas of
// every unsettled session not yet released, each on its side, less what
// its settle postings already moved. A store's schema migration that
// brings in the two sides uses it (inside its transaction, through a
// ReservationSource of its own).
func UnsettledReservations(ctx context.Context, store ReservationSource) (map[string]Reserved, error) {
	return unsettledReservations(ctx, store, func(u UnsettledSession) bool { return u.Released })
}

func (l *LocalReservations) sub(account string, c Reserved) {
	v := l.pending[account].Minus(c)
	if v.Zero() {
		delete(l.pending, account)
		return
	}
	l.pending[account] = v
}

// freshLocked rebuilds pending from the store when a write's outcome was
// lost (stale): every unsettled session's journaled deltas, less what its
// settle postings moved, skipping the sessions this registry released.
// Under the lock no write of this registry is in flight, so the store is
// the whole truth.
func (l *LocalReservations) freshLocked(ctx context.Context) error {
	if !l.stale {
		return nil
	}
	want, err := unsettledReservations(ctx, l.Store, func(u UnsettledSession) bool { return l.released[u.ID] })
	if err != nil {
		return fmt.Errorf("netting: local reservations: rebuild: %w", err)
	}
	l.pending, l.stale = want, false
	return nil
}

// reserveLocked is the spending rule (DecideReservations) against the
// registry: the balances are read from the store while the registry is
// held, so two requests never promise the same money. own nil: Reserve's
// rule.
func (l *LocalReservations) reserveLocked(ctx context.Context, reqs [][]ledger.AccountDelta, own map[string]int64) ([]bool, error) {
	if err := l.freshLocked(ctx); err != nil {
		return nil, err
	}
	balances := map[string]int64{}
	res := map[string]Reserved{}
	for _, req := range reqs {
		for _, d := range req {
			res[d.Account] = l.pending[d.Account]
			if _, ok := balances[d.Account]; ok || d.Delta >= 0 {
				continue
			}
			b, err := l.Store.Balance(ctx, d.Account)
			if err != nil {
				return nil, err
			}
			balances[d.Account] = b
		}
	}
	granted := DecideReservations(reqs, res, balances, own)
	for a, v := range res {
		if v.Zero() {
			delete(l.pending, a)
		} else {
			l.pending[a] = v
		}
	}
	return granted, nil
}

// Reserve implements ReservationStore.
func (l *LocalReservations) Reserve(ctx context.Context, reqs [][]ledger.AccountDelta) ([]bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reserveLocked(ctx, reqs, nil)
}

// Unreserve implements ReservationStore.
func (l *LocalReservations) Unreserve(ctx context.Context, deltas []ledger.AccountDelta) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range deltas {
		l.sub(d.Account, ReservedOf(d.Delta))
	}
	return nil
}

// Pending implements ReservationStore.
func (l *LocalReservations) Pending(ctx context.Context, account string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.freshLocked(ctx); err != nil {
		return 0, err
	}
	return l.pending[account].Net(), nil
}

// PendingAll implements ReservationStore.
func (l *LocalReservations) PendingAll(ctx context.Context) (map[string]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.freshLocked(ctx); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(l.pending))
	for a, v := range l.pending {
		if v.Net() != 0 {
			out[a] = v.Net()
		}
	}
	return out, nil
}

// ReservedAll implements ReservationStore.
func (l *LocalReservations) ReservedAll(ctx context.Context) (map[string]Reserved, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.freshLocked(ctx); err != nil {
		return nil, err
	}
	return maps.Clone(l.pending), nil
}

// ClaimSettle implements SessionStore: the store's claim, whose token the
// registry remembers as the session's fence.
func (l *LocalReservations) ClaimSettle(ctx context.Context, sessionID, owner string, lease time.Duration) (Fence, error) {
	f, err := l.Store.ClaimSettle(ctx, sessionID, owner, lease)
	if err != nil {
		return f, err
	}
	l.mu.Lock()
	l.tokens[sessionID] = max(l.tokens[sessionID], f.Token)
	l.mu.Unlock()
	return f, nil
}

// fencedLocked refuses a fence older than the newest claim seen.
func (l *LocalReservations) fencedLocked(f Fence) error {
	if cur := l.tokens[f.SessionID]; f.Token == 0 || f.Token < cur {
		return &FencedError{SessionID: f.SessionID, Token: f.Token, Current: cur}
	}
	return nil
}

// ReleaseSession implements ReservationStore: once per session while this
// registry lives (after a restart the rebuild counted only what was still
// reserved, and the resumed settle releases that once).
func (l *LocalReservations) ReleaseSession(ctx context.Context, f Fence, deltas []ledger.AccountDelta) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.fencedLocked(f); err != nil {
		return false, err
	}
	if l.released[f.SessionID] {
		return false, nil
	}
	for _, d := range deltas {
		l.sub(d.Account, ReservedOf(d.Delta))
	}
	l.released[f.SessionID] = true
	return true, nil
}

// ListUnsettled implements SessionStore, with Released from the registry.
func (l *LocalReservations) ListUnsettled(ctx context.Context, limit int) ([]UnsettledSession, error) {
	list, err := l.Store.ListUnsettled(ctx, limit)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range list {
		list[i].Released = l.released[list[i].ID]
	}
	return list, nil
}

// ReplacePending implements ReservationStore.
func (l *LocalReservations) ReplacePending(ctx context.Context, want map[string]Reserved) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	adjusted := 0
	for a, v := range l.pending {
		if want[a] != v {
			adjusted++
		}
	}
	for a, v := range want {
		if _, ok := l.pending[a]; !ok && !v.Zero() {
			adjusted++
		}
	}
	l.pending = map[string]Reserved{}
	for a, v := range want {
		if !v.Zero() {
			l.pending[a] = v
		}
	}
	l.stale = false
	return adjusted, nil
}

// ReserveAndAppend implements SharedStore: reserve in the registry,
// then append, under the registry's lock; a refused append undoes the
// reservation. A failed append whose outcome is unknown is read back:
// rows absent, the reservation is undone; rows present, it is kept (the
// session resolves the same question the same way); the journal
// unreadable too, the registry is rebuilt from the store before it
// promises again.
func (l *LocalReservations) ReserveAndAppend(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) []JournalRecord) ([]bool, error) {
	return l.ReserveAndRecord(ctx, own, reqs, AppendOnly(build))
}

// ReserveAndRecord implements SharedStore as ReserveAndAppend does, the
// append being the store's AppendRecording of the rows and the refusals
// (one transaction of the store).
func (l *LocalReservations) ReserveAndRecord(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) ([]JournalRecord, []RefusedKey)) ([]bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	granted, err := l.reserveLocked(ctx, reqs, ownCredits(own))
	if err != nil {
		return nil, err
	}
	recs, refused := build(append([]bool(nil), granted...))
	if len(recs) == 0 {
		// Nothing granted, so nothing reserved to undo if this fails.
		if err := l.Store.AppendRecording(ctx, nil, refused); err != nil {
			return nil, err
		}
		return granted, nil
	}
	err = l.Store.AppendRecording(ctx, recs, refused)
	if err == nil {
		return granted, nil
	}
	if !appendRefused(err) {
		last := recs[len(recs)-1]
		j, rerr := l.Store.ReadJournal(ctx, last.SessionID)
		switch {
		case rerr != nil:
			l.stale = true // rebuilt from the store before the next promise
			return nil, err
		case int64(len(j)) > last.Seq && j[last.Seq].Hash == last.Hash:
			return nil, err
		}
	}
	for i, req := range reqs {
		if granted[i] {
			for _, d := range req {
				l.sub(d.Account, ReservedOf(d.Delta))
			}
		}
	}
	return nil, err
}

// appendRefused reports an Append error that says nothing was written.
func appendRefused(err error) bool {
	var kc *KeyConflictError
	return errors.As(err, &kc) || errors.Is(err, ErrSessionSettled) || errors.Is(err, ErrSeqConflict) || errors.Is(err, ErrSessionNotFound)
}

// PostFencedReleasing implements SharedStore: under the registry's lock,
// PostFenced, then, if the posting was new and the session is not
// released, the release from the registry. Whether it was new is asked
// first: under the fence no other settler writes the session's postings.
// A post whose reply is lost is asked after; if that cannot be answered
// either, the registry is rebuilt from the store before it promises again.
func (l *LocalReservations) PostFencedReleasing(ctx context.Context, f Fence, p ledger.Posting, release []ReservedChange) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	posted, err := l.Store.HasPosting(ctx, p.ID)
	if err != nil {
		return err
	}
	if err := l.Store.PostFenced(ctx, f, p); err != nil {
		if posted {
			return err
		}
		landed, herr := l.Store.HasPosting(ctx, p.ID)
		switch {
		case herr != nil:
			l.stale = true
			return err
		case !landed:
			return err
		}
		// It landed: the reply was lost.
	}
	if !posted {
		l.releaseLocked(f.SessionID, release)
	}
	return nil
}

// releaseLocked moves a landed posting's deltas out of pending, unless
// its session was released whole.
func (l *LocalReservations) releaseLocked(session string, release []ReservedChange) {
	if l.released[session] {
		return
	}
	for _, c := range release {
		l.sub(c.Account, c.Reserved)
	}
}
