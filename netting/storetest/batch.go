package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// batchCases check SharedStore.ReserveAndAppend (the group commit's one
// call): Reserve and Append in one transaction, and any refusal applies
// nothing.
var batchCases = []contractCase{
	{"Batch/ReserveAndAppend", testBatchReserveAndAppend},
	{"Batch/AllRefusedAppendsNothing", testBatchAllRefused},
	{"Batch/RefusalAppliesNothing", testBatchRefusalAppliesNothing},
	{"Batch/ConcurrentNeverOverpromise", testBatchConcurrent},
}

// chainGranted is the build function a session passes: the granted
// requests' keys chained after prev from seq start.
func chainGranted(session string, start int64, prev string, keys []string, calls *[][]bool) func([]bool) []netting.JournalRecord {
	return func(granted []bool) []netting.JournalRecord {
		*calls = append(*calls, append([]bool(nil), granted...))
		var ks []string
		for i, g := range granted {
			if g {
				ks = append(ks, keys[i])
			}
		}
		if len(ks) == 0 {
			return nil
		}
		return chain(session, start, prev, ks...)
	}
}

func testBatchReserveAndAppend(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	bs := s
	fund(t, s, "fa", "alice", 100)
	createSession(t, s, "s", 16)
	before := mustNow(t, s)
	reqs := [][]ledger.AccountDelta{
		deltas(purchase("alice", "bob", 60)...),
		deltas(purchase("alice", "bob", 50)...), // refused: 100 - 60 - 50 < 0
		deltas(purchase("alice", "bob", 40)...), // exactly to zero
		nil,                                     // platform-only movement: granted
	}
	keys := []string{"k0", "k1", "k2", "k3"}
	var calls [][]bool
	granted, err := bs.ReserveAndAppend(ctx, nil, reqs, chainGranted("s", 0, netting.GenesisHash, keys, &calls))
	must(t, err)
	want := []bool{true, false, true, true}
	if fmt.Sprint(granted) != fmt.Sprint(want) {
		t.Fatalf("granted = %v, want %v", granted, want)
	}
	if len(calls) == 0 || fmt.Sprint(calls[len(calls)-1]) != fmt.Sprint(want) {
		t.Errorf("build saw %v, want last call %v", calls, want)
	}
	if got := pending(t, s, ledger.Spendable("alice")); got != -100 {
		t.Errorf("alice pending = %d, want -100", got)
	}
	if got := pending(t, s, ledger.Earned("bob")); got != 100 {
		t.Errorf("bob pending = %d, want 100", got)
	}
	j, err := s.ReadJournal(ctx, "s")
	must(t, err)
	if len(j) != 3 || j[0].Key != "k0" || j[1].Key != "k2" || j[2].Key != "k3" || j[2].Seq != 2 {
		t.Fatalf("journal = %+v, want k0, k2, k3 at seqs 0..2", j)
	}
	after := mustNow(t, s)
	for _, r := range j {
		if r.RecordedAt.Before(before.Add(-time.Millisecond)) || r.RecordedAt.After(after.Add(time.Millisecond)) {
			t.Errorf("row %d RecordedAt %v not from the store clock (%v..%v)", r.Seq, r.RecordedAt, before, after)
		}
	}
	if _, err := netting.VerifyChain("s", j); err != nil {
		t.Errorf("chain: %v", err)
	}
	// The journal length moved: the next batch continues the chain.
	calls = nil
	fund(t, s, "fa2", "alice", 5)
	_, err = bs.ReserveAndAppend(ctx, nil, [][]ledger.AccountDelta{deltas(purchase("alice", "bob", 5)...)},
		chainGranted("s", 3, j[2].Hash, []string{"k4"}, &calls))
	must(t, err)
	if j, _ := s.ReadJournal(ctx, "s"); len(j) != 4 {
		t.Errorf("journal has %d rows, want 4", len(j))
	}
}

func testBatchAllRefused(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	bs := s
	createSession(t, s, "s", 16)
	var calls [][]bool
	granted, err := bs.ReserveAndAppend(ctx, nil, [][]ledger.AccountDelta{deltas(purchase("nobody", "bob", 1)...)},
		chainGranted("s", 0, netting.GenesisHash, []string{"k0"}, &calls))
	must(t, err)
	if len(granted) != 1 || granted[0] {
		t.Errorf("granted = %v, want [false]", granted)
	}
	if j, _ := s.ReadJournal(ctx, "s"); len(j) != 0 {
		t.Errorf("all-refused batch journaled %d rows", len(j))
	}
	if got := pending(t, s, ledger.Earned("bob")); got != 0 {
		t.Errorf("bob pending = %d after a refused request", got)
	}
}

// Every append refusal rolls the reservations back with the rows.
func testBatchRefusalAppliesNothing(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	bs := s
	fund(t, s, "fa", "alice", 100)
	createSession(t, s, "a", 16)
	createSession(t, s, "b", 16)
	createSession(t, s, "sealed", 16)
	must(t, s.Append(ctx, chain("a", 0, netting.GenesisHash, "taken")))
	sealedHead := chain("sealed", 0, netting.GenesisHash, "s0")
	must(t, s.Append(ctx, sealedHead))
	_, err := s.ClaimSettle(ctx, "sealed", "settler", time.Minute)
	must(t, err)
	reqs := [][]ledger.AccountDelta{deltas(purchase("alice", "bob", 30)...), deltas(purchase("alice", "bob", 20)...)}
	var calls [][]bool
	cases := []struct {
		name  string
		build func([]bool) []netting.JournalRecord
		is    error
	}{
		{"key journaled elsewhere", chainGranted("b", 0, netting.GenesisHash, []string{"fresh", "taken"}, &calls), netting.ErrKeyConflict},
		{"seq conflict", chainGranted("b", 5, netting.GenesisHash, []string{"x0", "x1"}, &calls), netting.ErrSeqConflict},
		{"unknown session", chainGranted("ghost", 0, netting.GenesisHash, []string{"g0", "g1"}, &calls), netting.ErrSessionNotFound},
		{"sealed session", chainGranted("sealed", 1, sealedHead[0].Hash, []string{"z0", "z1"}, &calls), netting.ErrSessionSettled},
	}
	for _, c := range cases {
		granted, err := bs.ReserveAndAppend(ctx, nil, reqs, c.build)
		if !errors.Is(err, c.is) || granted != nil {
			t.Errorf("%s: (%v, %v), want (nil, %v)", c.name, granted, err, c.is)
		}
		if got := pending(t, s, ledger.Spendable("alice")); got != 0 {
			t.Errorf("%s: alice pending = %d, want 0 (reservations rolled back with the append)", c.name, got)
		}
		if got := pending(t, s, ledger.Earned("bob")); got != 0 {
			t.Errorf("%s: bob pending = %d, want 0", c.name, got)
		}
	}
	var kc *netting.KeyConflictError
	_, err = bs.ReserveAndAppend(ctx, nil, reqs, cases[0].build)
	if !errors.As(err, &kc) || len(kc.Keys) != 1 || kc.Keys[0] != "taken" {
		t.Errorf("key conflict error = %v, want KeyConflictError{[taken]}", err)
	}
	if j, _ := s.ReadJournal(ctx, "b"); len(j) != 0 {
		t.Errorf("refused batches left %d rows in b", len(j))
	}
	if _, ok, _ := s.LookupKey(ctx, "fresh"); ok {
		t.Errorf("refused batch left key 'fresh' behind")
	}
}

// Concurrent ReserveAndAppends on different sessions never promise more
// than the balance, and every granted request has its row.
func testBatchConcurrent(t *testing.T, s netting.SharedStore) {
	bs := s
	fund(t, s, "fa", "alice", 10)
	const workers = 8
	var wg sync.WaitGroup
	grants := make([]int, workers)
	for w := range workers {
		id := fmt.Sprintf("s%d", w)
		createSession(t, s, id, 16)
		wg.Go(func() {
			head, seq := netting.GenesisHash, int64(0)
			for i := range 3 {
				reqs := [][]ledger.AccountDelta{deltas(purchase("alice", "bob", 1)...)}
				key := fmt.Sprintf("%s-%d", id, i)
				var built []netting.JournalRecord
				granted, err := bs.ReserveAndAppend(context.WithoutCancel(ctxT(t)), nil, reqs, func(g []bool) []netting.JournalRecord {
					built = nil
					if g[0] {
						built = chain(id, seq, head, key)
					}
					return built
				})
				if err != nil {
					t.Errorf("%s: %v", key, err)
					return
				}
				if granted[0] {
					grants[w]++
					head, seq = built[0].Hash, seq+1
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for w, g := range grants {
		total += g
		if j, _ := s.ReadJournal(ctxT(t), fmt.Sprintf("s%d", w)); len(j) != g {
			t.Errorf("session s%d: %d rows for %d grants", w, len(j), g)
		}
	}
	if total != 10 {
		t.Errorf("%d grants of 1 against a balance of 10, want exactly 10", total)
	}
	if got := pending(t, s, ledger.Spendable("alice")); got != -10 {
		t.Errorf("alice pending = %d, want -10", got)
	}
}
