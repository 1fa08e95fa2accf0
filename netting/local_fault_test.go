package netting_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// The process-local registry does in two store calls what a SharedStore
// does in one transaction. Between them no other request may read the
// registry: a credit reserved for an append that is then refused, or
// posted and not yet released, would be headroom promised twice. And a
// store reply lost after the write must leave the registry promising
// less, never more. (Found by a review; each test failed before.)

// hookStore is a plain Store (no counter of its own) whose next Append,
// PostFenced, HasPosting and ReadJournal can be intercepted.
type hookStore struct {
	netting.Store
	mu           sync.Mutex
	onAppend     func() error // before the append; a non-nil error is returned after it ran
	onPost       func() error // after the posting committed; an error replaces its reply
	failHas      int          // HasPosting calls to fail
	failReadNext bool         // fail the next ReadJournal
}

var errLostReply = errors.New("connection reset (the write may have committed)")

func take[T any](mu *sync.Mutex, f *T) T {
	mu.Lock()
	defer mu.Unlock()
	v := *f
	var zero T
	*f = zero
	return v
}

func (h *hookStore) Append(ctx context.Context, recs []netting.JournalRecord) error {
	var after error
	if f := take(&h.mu, &h.onAppend); f != nil {
		after = f()
	}
	if err := h.Store.Append(ctx, recs); err != nil {
		return err
	}
	return after
}

// AppendRecording is the session's append (through LocalReservations),
// under the same hook as Append.
func (h *hookStore) AppendRecording(ctx context.Context, recs []netting.JournalRecord, refused []netting.RefusedKey) error {
	var after error
	if f := take(&h.mu, &h.onAppend); f != nil {
		after = f()
	}
	if err := h.Store.AppendRecording(ctx, recs, refused); err != nil {
		return err
	}
	return after
}

func (h *hookStore) PostFenced(ctx context.Context, fe netting.Fence, p ledger.Posting) error {
	if err := h.Store.PostFenced(ctx, fe, p); err != nil {
		return err
	}
	if f := take(&h.mu, &h.onPost); f != nil {
		return f()
	}
	return nil
}

func (h *hookStore) HasPosting(ctx context.Context, id string) (bool, error) {
	h.mu.Lock()
	fail := h.failHas > 0
	if fail {
		h.failHas--
	}
	h.mu.Unlock()
	if fail {
		return false, errLostReply
	}
	return h.Store.HasPosting(ctx, id)
}

func (h *hookStore) ReadJournal(ctx context.Context, id string) ([]netting.JournalRecord, error) {
	if take(&h.mu, &h.failReadNext) {
		return nil, errLostReply
	}
	return h.Store.ReadJournal(ctx, id)
}

func hookedLocalNode(t *testing.T) (*netting.MemStore, *hookStore, *netting.ClusterNode, *netting.LocalReservations) {
	t.Helper()
	m := netting.NewMemStore()
	t.Cleanup(func() { m.Close() })
	h := &hookStore{Store: plainStore{m}}
	l, err := netting.NewLocalReservations(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	node, err := netting.OpenClusterNode(l, netting.ClusterConfig{NodeID: "local", Nodes: []string{"local"}, ChunkWidth: 100, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return m, h, node, l
}

func reward(key, user string, n int64) netting.Movement {
	return netting.Movement{Key: key, Legs: []ledger.Leg{ledger.Debit(ledger.Revenue, n), ledger.Credit(ledger.Spendable(user), n)}}
}

func spend(key, user string, n int64) netting.Movement {
	return netting.Movement{Key: key, Legs: []ledger.Leg{ledger.Debit(ledger.Spendable(user), n), ledger.Credit(ledger.Earned("shop"), n)}}
}

func mustAccept(t *testing.T, s *netting.Session, m netting.Movement) {
	t.Helper()
	if out, err := s.Record(context.Background(), m); err != nil || out.Status != netting.Accepted {
		t.Fatalf("record %s: %+v %v", m.Key, out, err)
	}
}

func settleClean(t *testing.T, ss ...*netting.Session) {
	t.Helper()
	for _, s := range ss {
		rep, err := s.Settle(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Rejected) > 0 {
			t.Errorf("accepted movements rejected at settle: %+v", rep.Rejected)
		}
	}
}

// A retried key (journaled in another session: its append is refused) is
// reserved and undone under one hold of the registry, so no spend is
// granted against its credit meanwhile.
func TestLocalRegistryHeldAcrossARefusedAppend(t *testing.T) {
	ctx := context.Background()
	_, h, node, l := hookedLocalNode(t)
	a, _ := node.OpenSession(ctx, "a")
	b, _ := node.OpenSession(ctx, "b")
	c, _ := node.OpenSession(ctx, "c")
	mustAccept(t, a, reward("reward-1", "bob", 100))
	held := false
	h.onAppend = func() error { held = netting.RegistryHeld(l); return nil }
	if out, err := b.Record(ctx, reward("reward-1", "bob", 100)); err != nil || out.Status != netting.Accepted || out.Seq != 0 {
		t.Fatalf("the retried reward: %+v %v (want a's answer)", out, err)
	}
	if !held {
		t.Error("the append ran with the registry free: another request could spend the retried credit")
	}
	if out, _ := c.Record(ctx, spend("spend-1", "bob", 200)); out.Status == netting.Accepted {
		t.Error("bob will have 100, yet a spend of 200 was accepted")
	}
	settleClean(t, a, b, c)
}

// A settle's posting and its release are one hold of the registry: a
// posted credit is never in the balance and in pending at once for
// another request to see.
func TestLocalRegistryHeldAcrossAPostAndItsRelease(t *testing.T) {
	ctx := context.Background()
	_, h, node, l := hookedLocalNode(t)
	a, _ := node.OpenSession(ctx, "a")
	mustAccept(t, a, reward("reward-1", "bob", 100))
	held := false
	h.onPost = func() error { held = netting.RegistryHeld(l); return nil }
	settleClean(t, a)
	if !held {
		t.Error("the posting landed with the registry free: its credit was available twice until the release")
	}
	if p, _ := l.PendingAll(ctx); len(p) != 0 {
		t.Errorf("pending after the settle: %v", p)
	}
}

// A posting that committed with its reply lost releases its deltas: at
// once when HasPosting can tell it landed, and otherwise the registry is
// rebuilt from the store. Either way nothing stays pending once every
// session settled, and no credit is available twice.
func TestLocalLostPostReplyStillReleases(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failHas int // HasPosting calls failing after the lost reply
	}{{"asked after", 0}, {"rebuilt from the store", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m, h, node, l := hookedLocalNode(t)
			a, _ := node.OpenSession(ctx, "a")
			mustAccept(t, a, reward("reward-1", "bob", 100))
			h.onPost = func() error {
				h.mu.Lock()
				h.failHas = tc.failHas
				h.mu.Unlock()
				return errLostReply
			}
			if _, err := a.Settle(ctx); tc.failHas > 0 && !errors.Is(err, errLostReply) {
				t.Fatalf("the settle whose post reply was lost: %v", err)
			}
			settleClean(t, a) // resumed (or a no-op when it finished)
			if b, _ := m.Balance(ctx, ledger.Spendable("bob")); b != 100 {
				t.Fatalf("bob's balance %d, want 100", b)
			}
			if p, _ := l.PendingAll(ctx); len(p) != 0 {
				t.Errorf("pending after every session settled: %v, want none", p)
			}
			c, _ := node.OpenSession(ctx, "c")
			if out, _ := c.Record(ctx, spend("spend-1", "bob", 200)); out.Status == netting.Accepted {
				t.Error("bob has 100, yet a spend of 200 was accepted")
			}
		})
	}
}

// An append whose reply is lost and whose journal cannot be read back
// either leaves the registry to be rebuilt from the store: whatever the
// session answers, what the registry promises next is what the store
// holds, and once settled nothing is pending.
func TestLocalUnknownAppendRebuildsTheRegistry(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(map[bool]string{true: "rows landed", false: "rows lost"}[landed], func(t *testing.T) {
			ctx := context.Background()
			_, h, node, l := hookedLocalNode(t)
			a, _ := node.OpenSession(ctx, "a")
			h.onAppend = func() error {
				h.mu.Lock()
				h.failReadNext = true
				h.mu.Unlock()
				return errLostReply
			}
			if !landed {
				h.Store = dropAppends{h.Store}
			}
			out, err := a.Record(ctx, reward("reward-1", "bob", 100))
			accepted := err == nil && out.Status == netting.Accepted
			want := int64(0)
			if accepted {
				want = 100
			}
			if accepted != landed && err == nil {
				t.Fatalf("the record was answered %+v though its rows landed=%v", out, landed)
			}
			if p, err := l.Pending(ctx, ledger.Spendable("bob")); err != nil || p != want {
				t.Errorf("bob's pending %d (%v) after the record (answered %+v, %v): want %d, what the store holds", p, err, out, err, want)
			}
			settleClean(t, a)
			if p, _ := l.PendingAll(ctx); len(p) != 0 {
				t.Errorf("pending after the settle: %v", p)
			}
		})
	}
}

// dropAppends loses every append (as a write that never reached the disk).
type dropAppends struct{ netting.Store }

func (dropAppends) Append(context.Context, []netting.JournalRecord) error { return nil }

func (dropAppends) AppendRecording(context.Context, []netting.JournalRecord, []netting.RefusedKey) error {
	return nil
}
