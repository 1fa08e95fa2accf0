package netting

import (
	"context"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/shardwise/shardwise/ledger"
)

// Clock is the time source a ClusterNode measures ages with. A nil Clock in
// ClusterConfig means the store's clock (Store.Now). *clock.Fake and
// clock.Real() satisfy it.
type Clock interface{ Now() time.Time }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// MemStore is the in-memory SharedStore: every method runs under one mutex,
// so each is atomic as the port requires. It is a real implementation, run
// through the same storetest contract as the SQL stores; it keeps nothing
// across restarts.
type MemStore struct {
	clock Clock

	mu       sync.Mutex
	closed   bool
	journals map[string][]JournalRecord
	keys     map[string]JournalRecord
	// refused are the keys remembered as refused (port v4), never deleted.
	refused  map[string]RefusedKey
	sessions map[string]*memSession
	pending  map[string]Reserved

	// The ledger, kept as the SQL stores keep their tables: the chain of
	// postings in commit order (chain[i].Seq == i unless a test tampered
	// with it), its head, the ids posted and the balances.
	chain     []ChainedPosting
	chainHead LedgerHead
	posted    map[string]bool
	balances  map[string]int64
}

type memSession struct {
	meta     SessionMeta
	token    int64
	owner    string
	expires  time.Time
	released bool
}

var _ SharedStore = (*MemStore)(nil)

// NewMemStore returns an empty store on the wall clock.
func NewMemStore() *MemStore { return NewMemStoreWithClock(nil) }

// NewMemStoreWithClock returns an empty store whose clock is c (nil: the
// wall clock). Tests pass a fake clock and share it with nothing else: the
// store's clock is the one clock.
func NewMemStoreWithClock(c Clock) *MemStore {
	if c == nil {
		c = wallClock{}
	}
	return &MemStore{
		clock:     c,
		chainHead: LedgerHead{Hash: GenesisHash},
		posted:    map[string]bool{},
		balances:  map[string]int64{},
		journals:  map[string][]JournalRecord{},
		keys:      map[string]JournalRecord{},
		sessions:  map[string]*memSession{},
		pending:   map[string]Reserved{},
	}
}

// now is the store clock at the SQL stores' precision (microseconds), so a
// test cannot pass on one store and fail on another by nanoseconds.
func (m *MemStore) now() time.Time { return m.clock.Now().Truncate(time.Microsecond) }

func (m *MemStore) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errStoreClosed
	}
	return nil
}

var errStoreClosed = ErrClosed.Wrap("memstore closed")

// Now implements Store.
func (m *MemStore) Now(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	return m.now(), nil
}

// Close implements Store. Idempotent; later calls of other methods fail.
func (m *MemStore) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

// Post implements LedgerStore.
func (m *MemStore) Post(ctx context.Context, p ledger.Posting) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	_, err := m.postLocked(p)
	return err
}

// postLocked applies p with mu held, as ledger.Book.Post does (the rules
// are package ledger's), and chains it. posted is false for an id already
// posted, which changes nothing.
func (m *MemStore) postLocked(p ledger.Posting) (posted bool, err error) {
	if err := ledger.Validate(p); err != nil {
		return false, err
	}
	if m.posted[p.ID] {
		return false, nil
	}
	if err := ledger.CheckOverdraft(p.Legs, func(a string) int64 { return m.balances[a] }); err != nil {
		return false, err
	}
	for _, l := range p.Legs {
		m.balances[l.Account] += l.BalanceDelta()
	}
	c := ChainedPosting{Seq: m.chainHead.Len, Posting: clonePosting(p), PostedAt: m.now(), PrevHash: m.chainHead.Hash}
	c.Hash = PostingHash(c.PrevHash, c.Posting, c.PostedAt)
	m.chain = append(m.chain, c)
	m.posted[p.ID] = true
	m.chainHead = LedgerHead{Len: c.Seq + 1, Hash: c.Hash}
	return true, nil
}

func clonePosting(p ledger.Posting) ledger.Posting {
	c := ledger.Posting{ID: p.ID, Legs: slices.Clone(p.Legs)}
	if len(p.Meta) > 0 {
		c.Meta = maps.Clone(p.Meta)
	}
	return c
}

// ReadPostings implements PostingLog.
func (m *MemStore) ReadPostings(ctx context.Context, from int64, limit int) ([]ChainedPosting, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	// Sorted by Seq even when a test has tampered with it (export_test.go).
	i := sort.Search(len(m.chain), func(i int) bool { return m.chain[i].Seq >= from })
	end := min(len(m.chain), i+max(limit, 0))
	out := make([]ChainedPosting, 0, end-i)
	for _, c := range m.chain[i:end] {
		c.Posting = clonePosting(c.Posting)
		out = append(out, c)
	}
	return out, nil
}

// LedgerHead implements PostingLog.
func (m *MemStore) LedgerHead(ctx context.Context) (LedgerHead, error) {
	if err := m.lock(ctx); err != nil {
		return LedgerHead{}, err
	}
	defer m.mu.Unlock()
	h := m.chainHead
	h.Postings = int64(len(m.posted))
	return h, nil
}

// HasPosting implements LedgerStore.
func (m *MemStore) HasPosting(ctx context.Context, id string) (bool, error) {
	if err := m.lock(ctx); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	return m.posted[id], nil
}

// Balance implements LedgerStore.
func (m *MemStore) Balance(ctx context.Context, account string) (int64, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	return m.balances[account], nil
}

// Balances implements LedgerStore.
func (m *MemStore) Balances(ctx context.Context) (map[string]int64, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return maps.Clone(m.balances), nil
}

// Append implements JournalStore.
func (m *MemStore) Append(ctx context.Context, recs []JournalRecord) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	return m.appendLocked(recs)
}

// appendLocked is Append with mu held.
func (m *MemStore) appendLocked(recs []JournalRecord) error {
	if len(recs) == 0 {
		return ErrSeqConflict.Wrap("empty append")
	}
	sid := recs[0].SessionID
	s, ok := m.sessions[sid]
	if !ok {
		return ErrSessionNotFound.Wrap("%s", sid)
	}
	if s.meta.Sealed || s.meta.Settled {
		return ErrSessionSettled.Wrap("%s is sealed for settle", sid)
	}
	var conflicts []string
	seen := make(map[string]bool, len(recs))
	next := int64(len(m.journals[sid]))
	for i, r := range recs {
		if r.SessionID != sid || r.Seq != next+int64(i) {
			return ErrSeqConflict.Wrap("%s: row %d has session %s seq %d, want seq %d", sid, i, r.SessionID, r.Seq, next+int64(i))
		}
		_, dup := m.keys[r.Key]
		if _, no := m.refused[r.Key]; dup || no || seen[r.Key] {
			conflicts = append(conflicts, r.Key)
		}
		seen[r.Key] = true
	}
	if len(conflicts) > 0 {
		return &KeyConflictError{Keys: conflicts}
	}
	now := m.now()
	for _, r := range recs {
		r.Legs = slices.Clone(r.Legs)
		r.RecordedAt = now
		m.journals[sid] = append(m.journals[sid], r)
		m.keys[r.Key] = r
	}
	return nil
}

// rememberLocked remembers each refusal whose key has no first answer yet.
func (m *MemStore) rememberLocked(refused []RefusedKey) {
	if len(refused) == 0 {
		return
	}
	if m.refused == nil {
		m.refused = map[string]RefusedKey{}
	}
	now := m.now()
	for _, r := range refused {
		_, journaled := m.keys[r.Key]
		if _, known := m.refused[r.Key]; journaled || known {
			continue
		}
		r.RefusedAt = now
		m.refused[r.Key] = r
	}
}

// AppendRecording implements JournalStore.
func (m *MemStore) AppendRecording(ctx context.Context, recs []JournalRecord, refused []RefusedKey) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if len(recs) > 0 {
		if err := m.appendLocked(recs); err != nil {
			return err
		}
	}
	m.rememberLocked(refused)
	return nil
}

// LookupAnswer implements JournalStore.
func (m *MemStore) LookupAnswer(ctx context.Context, key string) (KeyAnswer, error) {
	if err := m.lock(ctx); err != nil {
		return KeyAnswer{}, err
	}
	defer m.mu.Unlock()
	if r, ok := m.keys[key]; ok {
		r.Legs = slices.Clone(r.Legs)
		return KeyAnswer{Found: true, Record: r}, nil
	}
	if r, ok := m.refused[key]; ok {
		return KeyAnswer{Found: true, Refused: true, Refusal: r}, nil
	}
	return KeyAnswer{}, nil
}

// ReadJournal implements JournalStore.
func (m *MemStore) ReadJournal(ctx context.Context, sessionID string) ([]JournalRecord, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	src := m.journals[sessionID]
	out := make([]JournalRecord, len(src))
	for i, r := range src {
		r.Legs = slices.Clone(r.Legs)
		out[i] = r
	}
	return out, nil
}

// LookupKey implements JournalStore.
func (m *MemStore) LookupKey(ctx context.Context, key string) (JournalRecord, bool, error) {
	if err := m.lock(ctx); err != nil {
		return JournalRecord{}, false, err
	}
	defer m.mu.Unlock()
	r, ok := m.keys[key]
	r.Legs = slices.Clone(r.Legs)
	return r, ok, nil
}

// CreateSession implements SessionStore.
func (m *MemStore) CreateSession(ctx context.Context, meta SessionMeta) (SessionMeta, error) {
	if err := m.lock(ctx); err != nil {
		return SessionMeta{}, err
	}
	defer m.mu.Unlock()
	if meta.ID == "" || meta.ChunkWidth < 1 {
		return SessionMeta{}, ErrSessionInvalid.Wrap("invalid session meta id=%q chunkWidth=%d", meta.ID, meta.ChunkWidth)
	}
	if _, ok := m.sessions[meta.ID]; ok {
		return SessionMeta{}, ErrSessionExists.Wrap("%s", meta.ID)
	}
	stored := SessionMeta{ID: meta.ID, Scope: meta.Scope, NodeID: meta.NodeID, ChunkWidth: meta.ChunkWidth, OpenedAt: m.now()}
	m.sessions[meta.ID] = &memSession{meta: stored}
	return stored, nil
}

// Session implements SessionStore.
func (m *MemStore) Session(ctx context.Context, id string) (SessionMeta, error) {
	if err := m.lock(ctx); err != nil {
		return SessionMeta{}, err
	}
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return SessionMeta{}, ErrSessionNotFound.Wrap("%s", id)
	}
	return s.meta, nil
}

// ListUnsettled implements SessionStore.
func (m *MemStore) ListUnsettled(ctx context.Context, limit int) ([]UnsettledSession, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []UnsettledSession
	for id, j := range m.journals {
		s := m.sessions[id]
		if len(j) == 0 || s == nil || s.meta.Settled {
			continue
		}
		out = append(out, UnsettledSession{
			SessionMeta:    s.meta,
			Records:        int64(len(j)),
			LastRecordedAt: j[len(j)-1].RecordedAt,
			Released:       s.released,
		})
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].LastRecordedAt.Equal(out[b].LastRecordedAt) {
			return out[a].LastRecordedAt.Before(out[b].LastRecordedAt)
		}
		return out[a].ID < out[b].ID
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ClaimSettle implements SessionStore.
func (m *MemStore) ClaimSettle(ctx context.Context, sessionID, owner string, lease time.Duration) (Fence, error) {
	if err := m.lock(ctx); err != nil {
		return Fence{}, err
	}
	defer m.mu.Unlock()
	s, ok := m.sessions[sessionID]
	if !ok {
		return Fence{}, ErrSessionNotFound.Wrap("%s", sessionID)
	}
	now := m.now()
	live := s.token > 0 && !s.meta.Settled && now.Before(s.expires)
	if live && s.owner != owner {
		return Fence{}, &ClaimHeldError{SessionID: sessionID, Owner: s.owner, ExpiresAt: s.expires}
	}
	s.token++
	s.owner = owner
	s.expires = now.Add(lease)
	s.meta.Sealed = true
	return Fence{SessionID: sessionID, Owner: owner, Token: s.token}, nil
}

// fenced returns the session if f is its current claim; the caller holds mu.
func (m *MemStore) fenced(f Fence) (*memSession, error) {
	s, ok := m.sessions[f.SessionID]
	if !ok {
		return nil, ErrSessionNotFound.Wrap("%s", f.SessionID)
	}
	if s.token != f.Token || f.Token == 0 {
		return nil, &FencedError{SessionID: f.SessionID, Token: f.Token, Current: s.token}
	}
	return s, nil
}

// PostFenced implements SessionStore.
func (m *MemStore) PostFenced(ctx context.Context, f Fence, p ledger.Posting) error {
	return m.postFenced(ctx, f, p, nil)
}

// PostFencedReleasing implements SharedStore.
func (m *MemStore) PostFencedReleasing(ctx context.Context, f Fence, p ledger.Posting, release []ReservedChange) error {
	return m.postFenced(ctx, f, p, release)
}

// postFenced posts p under f and, if p is new and the session unreleased,
// subtracts release from the counters.
func (m *MemStore) postFenced(ctx context.Context, f Fence, p ledger.Posting, release []ReservedChange) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	ses, err := m.fenced(f)
	if err != nil {
		return err
	}
	posted, err := m.postLocked(p)
	if err != nil || !posted || ses.released {
		return err
	}
	for _, c := range release {
		m.setReserved(c.Account, m.pending[c.Account].Minus(c.Reserved))
	}
	return nil
}

// MarkReplaying implements SessionStore.
func (m *MemStore) MarkReplaying(ctx context.Context, f Fence) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	s, err := m.fenced(f)
	if err != nil {
		return err
	}
	s.meta.Replaying = true
	return nil
}

// FinishSettle implements SessionStore.
func (m *MemStore) FinishSettle(ctx context.Context, f Fence, mode string) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	s, err := m.fenced(f)
	if err != nil {
		return err
	}
	if s.meta.Settled {
		return nil
	}
	now := m.now()
	s.meta.Settled = true
	s.meta.SettleMode = mode
	s.meta.SettledAt = now
	s.expires = now
	return nil
}

// Reserve implements ReservationStore.
func (m *MemStore) Reserve(ctx context.Context, reqs [][]ledger.AccountDelta) ([]bool, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return m.reserveLocked(reqs, nil), nil
}

// ReserveAndAppend implements SharedStore.
func (m *MemStore) ReserveAndAppend(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) []JournalRecord) ([]bool, error) {
	return m.ReserveAndRecord(ctx, own, reqs, AppendOnly(build))
}

// ReserveAndRecord implements SharedStore: Reserve, Append and the
// refusals under one hold of the lock, the counters put back if the append
// refuses.
func (m *MemStore) ReserveAndRecord(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) ([]JournalRecord, []RefusedKey)) ([]bool, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	before := map[string]Reserved{}
	for _, req := range reqs {
		for _, d := range req {
			if _, ok := before[d.Account]; !ok {
				before[d.Account] = m.pending[d.Account]
			}
		}
	}
	granted := m.reserveLocked(reqs, ownCredits(own))
	recs, refused := build(slices.Clone(granted))
	if len(recs) > 0 {
		if err := m.appendLocked(recs); err != nil {
			for a, v := range before {
				m.setReserved(a, v)
			}
			return nil, err
		}
	}
	m.rememberLocked(refused)
	return granted, nil
}

// reserveLocked is the spending rule (DecideReservations) with mu held,
// against the balances as they are now. own nil: Reserve's rule, no
// pending credit spendable.
func (m *MemStore) reserveLocked(reqs [][]ledger.AccountDelta, own map[string]int64) []bool {
	res := map[string]Reserved{}
	for _, req := range reqs {
		for _, d := range req {
			res[d.Account] = m.pending[d.Account]
		}
	}
	granted := DecideReservations(reqs, res, m.balances, own)
	for a, v := range res {
		m.setReserved(a, v)
	}
	return granted
}

func (m *MemStore) setReserved(account string, v Reserved) {
	if v.Zero() {
		delete(m.pending, account)
		return
	}
	m.pending[account] = v
}

// Unreserve implements ReservationStore.
func (m *MemStore) Unreserve(ctx context.Context, deltas []ledger.AccountDelta) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	for _, d := range deltas {
		m.setReserved(d.Account, m.pending[d.Account].Minus(ReservedOf(d.Delta)))
	}
	return nil
}

// Pending implements ReservationStore.
func (m *MemStore) Pending(ctx context.Context, account string) (int64, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	return m.pending[account].Net(), nil
}

// PendingAll implements ReservationStore.
func (m *MemStore) PendingAll(ctx context.Context) (map[string]int64, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.pending))
	for a, v := range m.pending {
		if v.Net() != 0 {
			out[a] = v.Net()
		}
	}
	return out, nil
}

// ReservedAll implements ReservationStore.
func (m *MemStore) ReservedAll(ctx context.Context) (map[string]Reserved, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return maps.Clone(m.pending), nil
}

// ReleaseSession implements ReservationStore.
func (m *MemStore) ReleaseSession(ctx context.Context, f Fence, deltas []ledger.AccountDelta) (bool, error) {
	if err := m.lock(ctx); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	s, err := m.fenced(f)
	if err != nil {
		return false, err
	}
	if s.released {
		return false, nil
	}
	for _, d := range deltas {
		m.setReserved(d.Account, m.pending[d.Account].Minus(ReservedOf(d.Delta)))
	}
	s.released = true
	return true, nil
}

// ReplacePending implements ReservationStore.
func (m *MemStore) ReplacePending(ctx context.Context, want map[string]Reserved) (int, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	adjusted := 0
	accounts := make(map[string]Reserved, len(want)+len(m.pending))
	maps.Copy(accounts, want)
	for a := range m.pending {
		if _, ok := accounts[a]; !ok {
			accounts[a] = Reserved{}
		}
	}
	for a, v := range accounts {
		if m.pending[a] != v {
			adjusted++
		}
		m.setReserved(a, v)
	}
	return adjusted, nil
}
