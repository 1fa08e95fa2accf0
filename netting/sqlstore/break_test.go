package sqlstore_test

import (
	"math"
	"testing"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// The spending rule across group commits must see the true sum even when
// the account's pending debits plus the batch's leave int64. Session a
// reserves all of w's balance (MaxInt64: pending debits −MaxInt64);
// session b, with own credits of 999, then asks to debit w 1,000. The true
// headroom is MaxInt64 − MaxInt64 − 1,000 + 999 = −1: the rule refuses.
// SQLite's blind add turns the counter's overflowing sum into a REAL
// (−2^63, rounded), and the one-statement check then read MaxInt64 +
// (−2^63) + 999 ≥ 0 and granted a debit nothing covers.
func TestSpendingRuleAcrossCommitsDoesNotWrapSQLite(t *testing.T) {
	ctx := testCtx(t)
	s := openSQLite(t)
	const w = "w:spendable"
	if err := s.Post(ctx, ledger.Posting{ID: "fund", Legs: []ledger.Leg{ledger.Credit(w, math.MaxInt64), ledger.Debit(ledger.Revenue, math.MaxInt64)}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.CreateSession(ctx, netting.SessionMeta{ID: id, Scope: "shop-" + id, NodeID: "n1", ChunkWidth: 16}); err != nil {
			t.Fatal(err)
		}
	}
	row := func(sid, key string, amount int64) func([]bool) []netting.JournalRecord {
		return func(granted []bool) []netting.JournalRecord {
			if !granted[0] {
				return nil
			}
			legs := []ledger.Leg{ledger.Debit(w, amount), ledger.Credit("platform:sink", amount)}
			return []netting.JournalRecord{{SessionID: sid, Seq: 0, Key: key, Legs: legs, PrevHash: netting.GenesisHash, Hash: netting.ChainHash(netting.GenesisHash, key, legs)}}
		}
	}
	spend := func(amount int64) [][]ledger.AccountDelta {
		return [][]ledger.AccountDelta{{{Account: w, Delta: -amount}, {Account: "platform:sink", Delta: amount}}}
	}
	granted, err := s.ReserveAndAppend(ctx, nil, spend(math.MaxInt64), row("a", "all", math.MaxInt64))
	if err != nil || !granted[0] {
		t.Fatalf("a debit of the whole balance: %v, %v", granted, err)
	}
	granted, err = s.ReserveAndAppend(ctx, map[string]int64{w: 999}, spend(1000), row("b", "one-more", 1000))
	if err == nil && granted[0] {
		t.Fatalf("a debit of 1,000 against headroom −1 (balance MaxInt64, pending debits −MaxInt64, own 999) was granted")
	}
}
