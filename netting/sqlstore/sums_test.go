package sqlstore

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// allGrantedBySums is the group commit's check (groupCommitPGText), in Go:
// every request is granted exactly when, for each account with a negative
// delta, balance + debits + own + lowest running value ≥ 0.
func allGrantedBySums(b batchSums, res map[string]netting.Reserved, balances, own map[string]int64) bool {
	for i, a := range b.accounts {
		if b.hasLow[i] && balances[a]+res[a].Debits+own[a]+b.low[i] < 0 {
			return false
		}
	}
	return true
}

// The speculative check agrees with the port's rule
// (netting.DecideReservations with the session's own credits), request by
// request, on random batches: it says "all granted" exactly when the rule
// grants every request, and then the counters end at their values plus the
// sums, net and debits.
func TestBatchSumsMatchDecide(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	accounts := []string{"a", "b", "c", "d"}
	for trial := range 20000 {
		balances := map[string]int64{}
		res := map[string]netting.Reserved{}
		own := map[string]int64{}
		for _, a := range accounts {
			balances[a] = rng.Int64N(40)
			res[a] = netting.Reserved{Debits: -rng.Int64N(11), Credits: rng.Int64N(11)}
			own[a] = rng.Int64N(res[a].Credits + 1)
		}
		reqs := make([][]ledger.AccountDelta, rng.IntN(6))
		for i := range reqs {
			// As a session's requests are: one delta per account.
			for _, a := range rng.Perm(len(accounts))[:rng.IntN(4)] {
				reqs[i] = append(reqs[i], ledger.AccountDelta{Account: accounts[a], Delta: rng.Int64N(31) - 15})
			}
		}
		b := sumBatch(reqs)
		final := maps.Clone(res)
		granted := netting.DecideReservations(reqs, final, balances, maps.Clone(own))
		all := true
		for _, g := range granted {
			all = all && g
		}
		desc := fmt.Sprintf("trial %d: reqs %v balances %v reserved %v own %v", trial, reqs, balances, res, own)
		if got := allGrantedBySums(b, res, balances, own); got != all {
			t.Fatalf("%s: check says all granted = %v, the rule grants %v", desc, got, granted)
		}
		if !all {
			continue
		}
		for i, a := range b.accounts {
			if final[a].Net() != res[a].Net()+b.sums[i] || final[a].Debits != res[a].Debits+b.dsums[i] {
				t.Fatalf("%s: %s ends at %+v, not its start plus net %d and debits %d", desc, a, final[a], b.sums[i], b.dsums[i])
			}
		}
	}
}

func TestRowChunks(t *testing.T) {
	for n := range 3*maxChunkRows + 3 {
		total := 0
		prev := maxChunkRows
		for _, c := range rowChunks(n) {
			if c <= 0 || c > maxChunkRows || c&(c-1) != 0 || c > prev {
				t.Fatalf("rowChunks(%d) = %v: sizes must be powers of two ≤ %d, largest first", n, rowChunks(n), maxChunkRows)
			}
			prev = c
			total += c
		}
		if total != n {
			t.Fatalf("rowChunks(%d) = %v sums to %d", n, rowChunks(n), total)
		}
	}
}

// A batch whose sums leave int64 is not judged by the one-statement check:
// own credits of MaxInt64−100 and a balance of 100 cover one debit of
// MaxInt64 but not two; the two debits' sum wraps to +2 in int64, which
// the lowest running value (the first debit's) hid, so the check said
// "all granted" for a batch the rule refuses half of. sumBatch reports the
// wrap and groupCommitPG declines the batch to the rule.
func TestBatchSumsWrapIsDeclined(t *testing.T) {
	const max = int64(1<<63 - 1)
	reqs := [][]ledger.AccountDelta{{{Account: "w", Delta: -max}}, {{Account: "w", Delta: -max}}}
	balances := map[string]int64{"w": 100}
	own := map[string]int64{"w": max - 100}
	res := map[string]netting.Reserved{}
	granted := netting.DecideReservations(reqs, maps.Clone(res), balances, maps.Clone(own))
	if !granted[0] || granted[1] {
		t.Fatalf("the rule granted %v, want [true false]", granted)
	}
	b := sumBatch(reqs)
	if !b.wrapped {
		t.Fatalf("sumBatch did not report the wrap (the check would say all granted = %v)", allGrantedBySums(b, res, balances, own))
	}
}
