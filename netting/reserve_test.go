package netting

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/ledger"
)

// The settle's one-pass sides (netPositionsSides, aligned with the
// positions) agree with the reconcile's (sidesOf by account, splitDeltas
// per movement) on random journals, movements that name an account twice
// included: the same sides per account, zero-net accounts apart.
func TestSidesAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 3))
	accounts := []string{"a:spendable", "b:spendable", "c:earned", "platform:x", "platform:y"}
	for trial := range 2000 {
		var recs []JournalRecord
		for range rng.IntN(8) {
			var legs []ledger.Leg
			var sum int64
			for range 1 + rng.IntN(3) {
				amt := 1 + rng.Int64N(9)
				if rng.IntN(2) == 0 {
					amt = -amt
				}
				legs = append(legs, ledger.Leg{Account: accounts[rng.IntN(len(accounts))], Amount: amt})
				sum += amt
			}
			legs = append(legs, ledger.Leg{Account: accounts[rng.IntN(len(accounts))], Amount: -sum})
			recs = append(recs, JournalRecord{Legs: legs})
		}
		want := sidesOf(recs)
		byList := map[string]Reserved{}
		for _, c := range splitDeltas(recs) {
			byList[c.Account] = c.Reserved
		}
		got := map[string]Reserved{}
		pos, sides, zero := netPositionsSides(recs)
		for k, p := range pos {
			if !sides[k].Zero() {
				got[p.Account] = sides[k]
			}
		}
		for _, z := range zero {
			if z.Net() != 0 {
				t.Fatalf("trial %d: zero-net account %s has net %d", trial, z.Account, z.Net())
			}
			got[z.Account] = z.Reserved
		}
		for _, m := range []map[string]Reserved{want, byList} {
			for a, v := range m {
				if v.Zero() {
					delete(m, a)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(byList) != fmt.Sprint(want) {
			t.Fatalf("trial %d: journal %v: one pass %v, sidesOf %v, splitDeltas %v", trial, recs, got, want, byList)
		}
	}
}
