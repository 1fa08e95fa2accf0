package sqlstore

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/ledger"
)

// allGrantedBySums is the group commit's check (groupCommitPGText), in Go:
// every request is granted exactly when, for each account with a negative
// delta, balance + pending + lowest running sum ≥ 0.
func allGrantedBySums(b batchSums, pending, balances map[string]int64) bool {
	for i, a := range b.accounts {
		if b.hasLow[i] && balances[a]+pending[a]+b.low[i] < 0 {
			return false
		}
	}
	return true
}

// The speculative check agrees with the port's rule, request by request, on
// random batches: it says "all granted" exactly when decideRequests grants
// every request, and then the counters end at pending + the sums.
func TestBatchSumsMatchDecide(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	accounts := []string{"a", "b", "c", "d"}
	for trial := range 20000 {
		balances := map[string]int64{}
		pending := map[string]int64{}
		for _, a := range accounts {
			balances[a] = rng.Int64N(40)
			pending[a] = rng.Int64N(21) - 10
		}
		reqs := make([][]ledger.AccountDelta, rng.IntN(6))
		for i := range reqs {
			for range rng.IntN(4) {
				reqs[i] = append(reqs[i], ledger.AccountDelta{Account: accounts[rng.IntN(len(accounts))], Delta: rng.Int64N(31) - 15})
			}
		}
		b := sumBatch(reqs)
		final := map[string]int64{}
		for a, v := range pending {
			final[a] = v
		}
		granted := make([]bool, len(reqs))
		decideRequests(reqs, final, balances, granted)
		all := true
		for _, g := range granted {
			all = all && g
		}
		desc := fmt.Sprintf("trial %d: reqs %v balances %v pending %v", trial, reqs, balances, pending)
		if got := allGrantedBySums(b, pending, balances); got != all {
			t.Fatalf("%s: check says all granted = %v, the rule grants %v", desc, got, granted)
		}
		if !all {
			continue
		}
		for i, a := range b.accounts {
			if final[a] != pending[a]+b.sums[i] {
				t.Fatalf("%s: %s ends at %d, pending + sum = %d", desc, a, final[a], pending[a]+b.sums[i])
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
