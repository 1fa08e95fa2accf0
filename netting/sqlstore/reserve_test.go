package sqlstore_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

func TestReserveAndAppendMatchesReserveSQLite(t *testing.T) {
	testReserveAndAppendMatchesReserve(t, openSQLite)
}

// The group commit decides reservations by its engine's own path (SQLite:
// a speculative add read back only for debited accounts, corrected after;
// PostgreSQL: one statement, declined to a locked decide on a refusal).
// Checked against the port's rule in Go (netting.DecideReservations, with
// the session's own credits: those of every request granted before) on
// random batches from a funded start: the same grants, the same counters
// (both sides) after every batch.
func testReserveAndAppendMatchesReserve(t *testing.T, open func(t testing.TB) *sqlstore.Store) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 17))
	ctx := testCtx(t)
	batched := open(t)
	wallets := []string{ledger.Spendable("a"), ledger.Spendable("b"), ledger.Earned("c"), ledger.Earned("d"), ledger.Spendable("e")}
	balances := map[string]int64{}
	for i, w := range wallets[:4] {
		balances[w] = int64(20 + 20*i)
	}
	model := map[string]netting.Reserved{}
	own := map[string]int64{}
	for _, s := range []*sqlstore.Store{batched} {
		legs := []ledger.Leg{ledger.Debit(ledger.Revenue, 200)}
		for i, w := range wallets[:4] {
			legs = append(legs, ledger.Credit(w, int64(20+20*i)))
		}
		if err := s.Post(ctx, ledger.Posting{ID: "fund", Legs: legs}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := batched.CreateSession(ctx, netting.SessionMeta{ID: "s", Scope: "x", NodeID: "n", ChunkWidth: 16}); err != nil {
		t.Fatal(err)
	}
	var seq int64
	head := netting.GenesisHash
	refused := 0
	for round := range 40 {
		reqs := make([][]ledger.AccountDelta, 1+rng.IntN(8))
		for i := range reqs {
			for range 1 + rng.IntN(3) {
				d := rng.Int64N(24) - 15 // mostly debits, so refusals come
				if d == 0 {
					d = 1
				}
				reqs[i] = append(reqs[i], ledger.AccountDelta{Account: wallets[rng.IntN(len(wallets))], Delta: d})
			}
		}
		want := netting.DecideReservations(reqs, model, balances, maps.Clone(own))
		var recs []netting.JournalRecord
		got, err := batched.ReserveAndAppend(ctx, own, reqs, func(granted []bool) []netting.JournalRecord {
			recs = nil
			prev := head
			for i, g := range granted {
				if !g {
					continue
				}
				key := fmt.Sprintf("r%d-%d", round, i)
				legs := []ledger.Leg{ledger.Debit(ledger.Revenue, 1), ledger.Credit(ledger.Revenue, 1)}
				h := netting.ChainHash(prev, key, legs)
				recs = append(recs, netting.JournalRecord{SessionID: "s", Seq: seq + int64(len(recs)), Key: key, Legs: legs, PrevHash: prev, Hash: h})
				prev = h
			}
			return recs
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 0 {
			seq += int64(len(recs))
			head = recs[len(recs)-1].Hash
		}
		for _, g := range want {
			if !g {
				refused++
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: reqs %v: ReserveAndAppend granted %v, the rule %v", round, reqs, got, want)
		}
		for i, req := range reqs {
			for _, d := range req {
				if want[i] && d.Delta > 0 {
					own[d.Account] += d.Delta
				}
			}
		}
		gp, err := batched.ReservedAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for a, v := range model {
			if v.Zero() {
				delete(model, a)
			}
		}
		if !maps.Equal(gp, model) {
			t.Fatalf("round %d: reqs %v: counters %v after ReserveAndAppend, %v by the rule", round, reqs, gp, model)
		}
	}
	if refused == 0 {
		t.Fatalf("no request was refused: the batches never reached the path that corrects the counters")
	}
}

// A journal read in parts (ReadJournal on a long journal) is the journal
// read in one statement: the same rows in seq order, also when a row is
// missing from the middle or the end.
func testReadJournalInParts(t *testing.T, s *sqlstore.Store) {
	ctx := testCtx(t)
	if _, err := s.CreateSession(ctx, netting.SessionMeta{ID: "s", Scope: "x", NodeID: "n", ChunkWidth: 16}); err != nil {
		t.Fatal(err)
	}
	head, seq := netting.GenesisHash, int64(0)
	for _, n := range []int{1, 7, 12, 5, 12} {
		var recs []netting.JournalRecord
		for range n {
			key := fmt.Sprintf("k%d", seq)
			legs := []ledger.Leg{ledger.Debit(ledger.Revenue, seq+1), ledger.Credit(ledger.Revenue, seq+1)}
			h := netting.ChainHash(head, key, legs)
			recs = append(recs, netting.JournalRecord{SessionID: "s", Seq: seq, Key: key, Legs: legs, PrevHash: head, Hash: h})
			head, seq = h, seq+1
		}
		if err := s.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	read := func(part int64) []netting.JournalRecord {
		t.Helper()
		s.SetJournalReadPart(part)
		recs, err := s.ReadJournal(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	same := func(what string) {
		t.Helper()
		whole := read(1 << 40)
		for _, part := range []int64{1, 4, 9, 36} {
			if got := read(part); !slices.EqualFunc(got, whole, func(a, b netting.JournalRecord) bool {
				return a.Seq == b.Seq && a.Key == b.Key && a.Hash == b.Hash && a.PrevHash == b.PrevHash && slices.Equal(a.Legs, b.Legs) && a.RecordedAt.Equal(b.RecordedAt)
			}) {
				t.Fatalf("%s: read in parts of %d rows: %d rows, whole: %d rows", what, part, len(got), len(whole))
			}
		}
	}
	same("intact")
	if n := len(read(1 << 40)); n != int(seq) {
		t.Fatalf("read %d rows, want %d", n, seq)
	}
	for _, gone := range []int64{17, seq - 1} {
		// The journal is in batch form (schema 9): the batch holding the
		// row goes, with the rows appended beside it.
		if err := s.ExecForTest(ctx, `DELETE FROM netting_batches WHERE session_id = ? AND first_seq <= ? AND first_seq + n > ?`, "s", gone, gone); err != nil {
			t.Fatal(err)
		}
		same(fmt.Sprintf("without seq %d", gone))
	}
	if recs, err := s.ReadJournal(ctx, "nobody"); err != nil || recs == nil || len(recs) != 0 {
		t.Fatalf("journal of no session: %v, %v; want empty", recs, err)
	}
}

func TestReadJournalInPartsSQLite(t *testing.T) { testReadJournalInParts(t, openSQLite(t)) }
