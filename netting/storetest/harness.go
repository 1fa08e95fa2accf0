package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// errInjected is the infrastructure failure the fault store injects: not a
// ledger refusal, so a settle treats it as a crash, not as an overdraft.
var errInjected = errors.New("storetest: injected store failure")

// faultStore wraps a real store and lets a test fail, block or tamper with
// chosen calls. Every call not intercepted goes to the real store. It
// intercepts the session's two write paths, ReserveAndAppend (every group
// commit) and PostFencedReleasing (every settle posting), so one wrapper
// serves every store: the port has no optional extension to mirror.
type faultStore struct {
	netting.SharedStore

	mu sync.Mutex
	// appendHook runs before a real ReserveAndAppend (blocking it there
	// holds no store lock), with the rows as if every request were
	// granted; a non-nil error is returned instead of committing.
	appendHook func(recs []netting.JournalRecord) error
	// appendAfterHook runs after a successful real ReserveAndAppend that
	// wrote rows; a non-nil error is returned although the transaction is
	// committed (a lost COMMIT reply).
	appendAfterHook func(recs []netting.JournalRecord) error
	// postFencedHook runs before a real PostFencedReleasing.
	postFencedHook func(f netting.Fence, p ledger.Posting) error
	// claimHook runs before a real ClaimSettle.
	claimHook func(sessionID, owner string) error
	// finishHook runs before a real FinishSettle (a crash after the
	// release and before the settle is marked).
	finishHook func() error
	// readHook may rewrite what ReadJournal returns (a tampered row).
	readHook func(recs []netting.JournalRecord) []netting.JournalRecord

	// faults are armed reply faults (failReply): a call that fails before
	// or after the real one, a given number of times.
	faults map[faultPoint]int

	appends     atomic.Int64
	reads       atomic.Int64 // ReadJournal calls
	reserves    atomic.Int64
	postFenced  atomic.Int64
	compensated atomic.Int64
}

// faultPoint names where a reply fault strikes: a call of the store (one
// of the fault* constants), the posting id for PostFencedReleasing ("" for
// any), and whether after the real call (the write landed and its reply
// was lost) or before it (it never reached the store, and the caller cannot
// tell the difference).
type faultPoint struct {
	call  string
	id    string
	after bool
}

// The calls failReply can strike.
const (
	faultCommit  = "ReserveAndAppend"
	faultPost    = "PostFencedReleasing"
	faultRelease = "ReleaseSession"
	faultFinish  = "FinishSettle"
	faultRead    = "ReadJournal"
)

// failReply arms a reply fault: the next times calls at p return
// errInjected — for an after-fault, once the real call has succeeded.
func (f *faultStore) failReply(p faultPoint, times int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.faults == nil {
		f.faults = map[faultPoint]int{}
	}
	f.faults[p] = times
}

// injected consumes one armed fault at (call, id, after), if any.
func (f *faultStore) injected(call, id string, after bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range []faultPoint{{call, id, after}, {call, "", after}} {
		if f.faults[p] > 0 {
			f.faults[p]--
			return errInjected
		}
	}
	return nil
}

func (f *faultStore) setAppendHook(h func([]netting.JournalRecord) error) {
	f.mu.Lock()
	f.appendHook = h
	f.mu.Unlock()
}

func (f *faultStore) setAppendAfterHook(h func([]netting.JournalRecord) error) {
	f.mu.Lock()
	f.appendAfterHook = h
	f.mu.Unlock()
}

func (f *faultStore) setPostFencedHook(h func(netting.Fence, ledger.Posting) error) {
	f.mu.Lock()
	f.postFencedHook = h
	f.mu.Unlock()
}

// settleDiesAt runs sess's settle with the posting postingID failing (the
// settling node dies there), checks the settle returned that failure, and
// takes the failure away again.
func settleDiesAt(t *testing.T, f *faultStore, sess *netting.Session, postingID string) {
	t.Helper()
	f.setPostFencedHook(func(_ netting.Fence, p ledger.Posting) error {
		if p.ID == postingID {
			return errInjected
		}
		return nil
	})
	if _, err := sess.Settle(ctxT(t)); !errors.Is(err, errInjected) {
		t.Fatalf("settle: %v", err)
	}
	f.setPostFencedHook(nil)
}

func (f *faultStore) setReadHook(h func([]netting.JournalRecord) []netting.JournalRecord) {
	f.mu.Lock()
	f.readHook = h
	f.mu.Unlock()
}

// ReserveAndAppend is the real one under the append hooks and counters
// (it counts as one reserve call and one append).
func (f *faultStore) ReserveAndAppend(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) []netting.JournalRecord) ([]bool, error) {
	return f.ReserveAndRecord(ctx, own, reqs, netting.AppendOnly(build))
}

// ReserveAndRecord is the real one under the append hooks and counters
// (it counts as one reserve call and one append).
func (f *faultStore) ReserveAndRecord(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) ([]netting.JournalRecord, []netting.RefusedKey)) ([]bool, error) {
	f.mu.Lock()
	h := f.appendHook
	f.mu.Unlock()
	if h != nil {
		all := make([]bool, len(reqs))
		for i := range all {
			all[i] = true
		}
		recs, _ := build(all)
		if err := h(recs); err != nil {
			return nil, err
		}
	}
	if err := f.injected(faultCommit, "", false); err != nil {
		// The transaction built its rows and never committed: the session
		// has rows to look for, and must not find them.
		all := make([]bool, len(reqs))
		for i := range all {
			all[i] = true
		}
		build(all)
		return nil, err
	}
	f.reserves.Add(1)
	f.appends.Add(1)
	var recs []netting.JournalRecord
	granted, err := f.SharedStore.ReserveAndRecord(ctx, own, reqs, func(g []bool) ([]netting.JournalRecord, []netting.RefusedKey) {
		var refused []netting.RefusedKey
		recs, refused = build(g)
		return recs, refused
	})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	after := f.appendAfterHook
	f.mu.Unlock()
	if after != nil && len(recs) > 0 {
		if err := after(recs); err != nil {
			return nil, err
		}
	}
	if err := f.injected(faultCommit, "", true); err != nil {
		return nil, err
	}
	return granted, nil
}

// PostFencedReleasing is the real one under the settle-posting hook and
// counters.
func (f *faultStore) PostFencedReleasing(ctx context.Context, fe netting.Fence, p ledger.Posting, release []netting.ReservedChange) error {
	f.mu.Lock()
	h := f.postFencedHook
	f.mu.Unlock()
	if h != nil {
		if err := h(fe, p); err != nil {
			return err
		}
	}
	if err := f.injected(faultPost, p.ID, false); err != nil {
		return err
	}
	f.postFenced.Add(1)
	err := f.SharedStore.PostFencedReleasing(ctx, fe, p, release)
	if err == nil && strings.HasSuffix(p.ID, "_comp") {
		f.compensated.Add(1)
	}
	if err == nil {
		err = f.injected(faultPost, p.ID, true)
	}
	return err
}

func (f *faultStore) ReleaseSession(ctx context.Context, fe netting.Fence, deltas []ledger.AccountDelta) (bool, error) {
	if err := f.injected(faultRelease, "", false); err != nil {
		return false, err
	}
	released, err := f.SharedStore.ReleaseSession(ctx, fe, deltas)
	if err == nil {
		err = f.injected(faultRelease, "", true)
	}
	return released, err
}

func (f *faultStore) setClaimHook(h func(sessionID, owner string) error) {
	f.mu.Lock()
	f.claimHook = h
	f.mu.Unlock()
}

func (f *faultStore) ClaimSettle(ctx context.Context, sessionID, owner string, lease time.Duration) (netting.Fence, error) {
	f.mu.Lock()
	h := f.claimHook
	f.mu.Unlock()
	if h != nil {
		if err := h(sessionID, owner); err != nil {
			return netting.Fence{}, err
		}
	}
	return f.SharedStore.ClaimSettle(ctx, sessionID, owner, lease)
}

func (f *faultStore) setFinishHook(h func() error) {
	f.mu.Lock()
	f.finishHook = h
	f.mu.Unlock()
}

func (f *faultStore) FinishSettle(ctx context.Context, fe netting.Fence, mode string) error {
	f.mu.Lock()
	h := f.finishHook
	f.mu.Unlock()
	if h != nil {
		if err := h(); err != nil {
			return err
		}
	}
	if err := f.injected(faultFinish, "", false); err != nil {
		return err
	}
	if err := f.SharedStore.FinishSettle(ctx, fe, mode); err != nil {
		return err
	}
	return f.injected(faultFinish, "", true)
}

func (f *faultStore) ReadJournal(ctx context.Context, id string) ([]netting.JournalRecord, error) {
	if err := f.injected(faultRead, "", false); err != nil {
		return nil, err
	}
	f.reads.Add(1)
	recs, err := f.SharedStore.ReadJournal(ctx, id)
	f.mu.Lock()
	h := f.readHook
	f.mu.Unlock()
	if err == nil && h != nil {
		recs = h(recs)
	}
	return recs, err
}

// cluster is a set of ClusterNodes sharing one (fault-wrapped) store.
type cluster struct {
	t     *testing.T
	store *faultStore
	ids   []string
	nodes map[string]*netting.ClusterNode
	cfg   func(*netting.ClusterConfig)
}

func newCluster(t *testing.T, s netting.SharedStore, ids []string, cfg func(*netting.ClusterConfig)) *cluster {
	t.Helper()
	fs := &faultStore{SharedStore: s}
	c := &cluster{t: t, store: fs, ids: ids, nodes: map[string]*netting.ClusterNode{}, cfg: cfg}
	for _, id := range ids {
		c.restart(id)
	}
	return c
}

// restart replaces a node's object with a fresh one (a crash and restart:
// open epochs are abandoned unsettled).
func (c *cluster) restart(id string) *netting.ClusterNode {
	c.t.Helper()
	cfg := netting.ClusterConfig{NodeID: id, Nodes: c.ids, Logger: slog.New(slog.DiscardHandler)}
	if c.cfg != nil {
		c.cfg(&cfg)
	}
	n, err := netting.OpenClusterNode(c.store, cfg)
	must(c.t, err)
	c.nodes[id] = n
	return n
}

// scopeOf returns a scope that node owns.
func (c *cluster) scopeOf(node string, i int) string {
	c.t.Helper()
	n := c.nodes[node]
	found := 0
	for k := 0; k < 10000; k++ {
		s := fmt.Sprintf("wrld_%d", k)
		if n.OwnerOf(s) == node {
			if found == i {
				return s
			}
			found++
		}
	}
	c.t.Fatalf("no scope owned by %s", node)
	return ""
}

func (c *cluster) open(node, scope string) *netting.Session {
	c.t.Helper()
	s, err := c.nodes[node].OpenSession(ctxT(c.t), scope)
	must(c.t, err)
	return s
}

func record(t *testing.T, s *netting.Session, key string, legs ...ledger.Leg) netting.Outcome {
	t.Helper()
	out, err := s.Record(ctxT(t), netting.Movement{Key: key, Legs: legs})
	must(t, err)
	return out
}

func accept(t *testing.T, s *netting.Session, key string, legs ...ledger.Leg) int64 {
	t.Helper()
	out := record(t, s, key, legs...)
	if out.Status != netting.Accepted {
		t.Fatalf("record %s: %+v, want accepted", key, out)
	}
	return out.Seq
}

func settle(t *testing.T, s *netting.Session) netting.SettleReport {
	t.Helper()
	rep, err := s.Settle(ctxT(t))
	must(t, err)
	return rep
}

func has(t *testing.T, s netting.Store, id string) bool {
	t.Helper()
	ok, err := s.HasPosting(ctxT(t), id)
	must(t, err)
	return ok
}

// checkMoney asserts the global money invariants: the sum of all balances
// is zero, the clearing account is at zero, no wallet is negative, the
// ledger proves itself (VerifyLedger), and (if settledAll) every pending
// counter is back at zero.
func checkMoney(t *testing.T, s netting.SharedStore, settledAll bool) map[string]int64 {
	t.Helper()
	ctx := ctxT(t)
	bal, err := s.Balances(ctx)
	must(t, err)
	var sum int64
	for a, v := range bal {
		sum += v
		if ledger.IsWallet(a) && v < 0 {
			t.Errorf("wallet %s is negative: %d", a, v)
		}
	}
	if sum != 0 {
		t.Errorf("sum of all balances = %d, want 0", sum)
	}
	if c := bal[ledger.NettingClearing]; c != 0 {
		t.Errorf("clearing account = %d, want 0", c)
	}
	if _, err := netting.VerifyLedger(ctx, s); err != nil {
		t.Errorf("the ledger does not prove itself: %v", err)
	}
	if settledAll {
		p, err := s.PendingAll(ctx)
		must(t, err)
		if len(p) != 0 {
			t.Errorf("pending after everything settled = %v, want none", p)
		}
		u, err := s.ListUnsettled(ctx, 0)
		must(t, err)
		if len(u) != 0 {
			t.Errorf("unsettled sessions remain: %v", ids(u))
		}
	}
	return bal
}

// pollUntil polls cond until it holds or 20 s have passed.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.PollUntil(t, 20*time.Second, what, cond)
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
