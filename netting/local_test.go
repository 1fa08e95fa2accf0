package netting_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/storetest"
)

// plainStore hides a MemStore's own reservation counter: a Store and no
// more, as a store without a shared counter would be.
type plainStore struct{ netting.Store }

// The process-local registry is a SharedStore: the whole contract — the
// reservation semantics, the group commit, the settle, the outcome-unknown
// paths and the property schedules — runs on it as on the shared stores.
func TestLocalReservationsContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) netting.Store {
		m := netting.NewMemStore()
		t.Cleanup(func() { m.Close() })
		l, err := netting.NewLocalReservations(context.Background(), plainStore{m})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

// A process that crashed mid-epoch and mid-settle restarts: the registry
// is rebuilt from the store (each unsettled session's deltas, less what
// its postings moved), so the restarted process promises no credit twice,
// and settling every session brings each counter back to zero.
func TestLocalNodeRestart(t *testing.T) {
	ctx := context.Background()
	storeClock := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	m := netting.NewMemStoreWithClock(storeClock)
	store := plainStore{m}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.Post(ctx, ledger.Posting{ID: "fund", Legs: []ledger.Leg{ledger.Credit(ledger.Spendable("alice"), 100), ledger.Debit(ledger.Revenue, 100)}}))
	cfg := netting.ClusterConfig{ChunkWidth: 1, Logger: slog.New(slog.DiscardHandler)}
	node, err := netting.OpenLocalNode(ctx, store, cfg)
	must(err)
	buy := func(key string, amount int64) netting.Movement {
		return netting.Movement{Key: key, Legs: []ledger.Leg{ledger.Debit(ledger.Spendable("alice"), amount), ledger.Credit(ledger.Earned("bob"), amount)}}
	}
	a, err := node.OpenSession(ctx, "wrld_a")
	must(err)
	if out, err := a.Record(ctx, buy("a0", 30)); err != nil || out.Status != netting.Accepted {
		t.Fatalf("a0: %+v %v", out, err)
	}
	b, err := node.OpenSession(ctx, "wrld_b")
	must(err)
	if out, err := b.Record(ctx, buy("b0", 50)); err != nil || out.Status != netting.Accepted {
		t.Fatalf("b0: %+v %v", out, err)
	}
	if out, _ := b.Record(ctx, buy("b1", 30)); out.Status != netting.Rejected {
		t.Fatalf("b1 promised credits a0 and b0 hold: %+v", out)
	}
	// Session a's settle dies after its first chunk (alice's debit).
	dying := &failAfter{Store: store, id: "net_" + a.ID() + "_c1"}
	reg, err := netting.NewLocalReservations(ctx, dying)
	must(err)
	half, err := netting.OpenClusterNode(reg, netting.ClusterConfig{NodeID: "local", Nodes: []string{"local"}, ChunkWidth: 1, Logger: slog.New(slog.DiscardHandler)})
	must(err)
	ra, err := half.Recover(ctx, a.ID())
	must(err)
	if _, err := ra.Settle(ctx); err == nil {
		t.Fatal("settle should have died at chunk 1")
	}

	// The restart, after the dead settler's claim has lapsed: a fresh
	// registry over the same store.
	storeClock.Advance(time.Hour)
	node, err = netting.OpenLocalNode(ctx, store, cfg)
	must(err)
	s, err := node.OpenSession(ctx, "wrld_c")
	must(err)
	if out, _ := s.Record(ctx, buy("c0", 21)); out.Status != netting.Rejected {
		t.Errorf("after the restart 21 more of alice's 20 free credits were promised: %+v", out)
	}
	if out, err := s.Record(ctx, buy("c1", 20)); err != nil || out.Status != netting.Accepted {
		t.Errorf("c1 (exactly the free 20): %+v %v", out, err)
	}
	for _, id := range []string{a.ID(), b.ID(), s.ID()} {
		r, err := node.Recover(ctx, id)
		must(err)
		if _, err := r.Settle(ctx); err != nil {
			t.Fatalf("settle %s: %v", id, err)
		}
	}
	if bal, _ := m.Balance(ctx, ledger.Spendable("alice")); bal != 0 {
		t.Errorf("alice = %d, want 0", bal)
	}
	if bal, _ := m.Balance(ctx, ledger.Earned("bob")); bal != 100 {
		t.Errorf("bob = %d, want 100", bal)
	}
	if res, err := netting.ReconcileReservations(ctx, mustLocal(t, store)); err != nil || res.Accounts != 0 {
		t.Errorf("after everything settled: %+v %v, want no reservation", res, err)
	}
}

func mustLocal(t *testing.T, s netting.Store) *netting.LocalReservations {
	t.Helper()
	l, err := netting.NewLocalReservations(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// failAfter fails the settle posting id (the process dies there).
type failAfter struct {
	netting.Store
	id string
}

func (f *failAfter) PostFenced(ctx context.Context, fe netting.Fence, p ledger.Posting) error {
	if p.ID == f.id {
		return fmt.Errorf("process killed before posting %s", p.ID)
	}
	return f.Store.PostFenced(ctx, fe, p)
}

// A single process that wants netting and no cluster: a local node over
// any Store, its reservations kept in the process.
func ExampleOpenLocalNode() {
	ctx := context.Background()
	store := netting.NewMemStore() // any netting.Store; its own counter is not used
	store.Post(ctx, ledger.Posting{ID: "fund-alice", Legs: []ledger.Leg{
		ledger.Credit(ledger.Spendable("alice"), 100), ledger.Debit(ledger.Revenue, 100)}})

	node, err := netting.OpenLocalNode(ctx, store, netting.ClusterConfig{})
	if err != nil {
		panic(err)
	}
	sess, _ := node.OpenSession(ctx, "shop")
	for i := range 3 {
		sess.Record(ctx, netting.Movement{Key: fmt.Sprintf("buy-%d", i), Legs: []ledger.Leg{
			ledger.Debit(ledger.Spendable("alice"), 30), ledger.Credit(ledger.Earned("bob"), 30)}})
	}
	out, _ := sess.Record(ctx, netting.Movement{Key: "buy-3", Legs: []ledger.Leg{
		ledger.Debit(ledger.Spendable("alice"), 30), ledger.Credit(ledger.Earned("bob"), 30)}})
	fmt.Println(out.Status, out.Reason)
	rep, _ := sess.Settle(ctx)
	fmt.Println(rep.Mode, rep.Netted, "movements in", rep.Postings, "posting")
	// Output:
	// rejected INSUFFICIENT_FUNDS
	// netted 3 movements in 1 posting
}
