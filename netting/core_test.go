package netting

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/ledger"
)

// TestNettingMatchesReplay checks the optimised path against the naive
// one over random journals: posting the chunks (any width) must leave every
// account where posting each movement on its own leaves it, with the
// clearing account at zero and every chunk no wider than the width.
func TestNettingMatchesReplay(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	accounts := []string{"a:spendable", "b:spendable", "c:earned", "d:earned", "platform:revenue", "e:spendable"}
	for round := range 500 {
		var recs []JournalRecord
		for seq := range r.IntN(30) {
			n := 2 + r.IntN(3)
			legs := make([]ledger.Leg, 0, n)
			var sum int64
			for range n - 1 {
				amt := int64(r.IntN(41) - 20)
				if amt == 0 {
					amt = 1
				}
				legs = append(legs, ledger.Leg{Account: accounts[r.IntN(len(accounts))], Amount: amt})
				sum += amt
			}
			if sum == 0 {
				continue
			}
			legs = append(legs, ledger.Leg{Account: accounts[r.IntN(len(accounts))], Amount: -sum})
			recs = append(recs, JournalRecord{SessionID: "s", Seq: int64(seq), Key: fmt.Sprint(seq), Legs: legs})
		}
		width := 1 + r.IntN(5)
		netted, naive := map[string]int64{}, map[string]int64{}
		for _, rec := range recs {
			for _, l := range rec.Legs {
				naive[l.Account] += l.BalanceDelta()
			}
		}
		chunks := chunkPostings("s", netPositions(recs), width, len(recs), GenesisHash)
		for i, c := range chunks {
			if err := ledger.ValidateLegs(c.Legs); err != nil {
				t.Fatalf("round %d chunk %d invalid: %v", round, i, err)
			}
			if c.ID != fmt.Sprintf("net_s_c%d", i) {
				t.Fatalf("chunk id %s", c.ID)
			}
			positions := 0
			for _, l := range c.Legs {
				netted[l.Account] += l.BalanceDelta()
				if l.Account != ledger.NettingClearing {
					positions++
				}
			}
			if positions > width {
				t.Fatalf("round %d chunk %d has %d positions, width %d", round, i, positions, width)
			}
			comp := compensation("s", i, c)
			var back int64
			for j, l := range comp.Legs {
				if l.Amount != -c.Legs[j].Amount {
					t.Fatalf("compensation leg %d does not reverse", j)
				}
				back += l.Amount
			}
			if back != 0 {
				t.Fatalf("compensation unbalanced")
			}
		}
		if netted[ledger.NettingClearing] != 0 {
			t.Fatalf("round %d: clearing ends at %d", round, netted[ledger.NettingClearing])
		}
		for _, a := range accounts {
			if netted[a] != naive[a] {
				t.Fatalf("round %d width %d: %s netted %d, replayed %d", round, width, a, netted[a], naive[a])
			}
		}
	}
}

func TestNetPositionsOrderAndZeros(t *testing.T) {
	recs := []JournalRecord{
		{Legs: []ledger.Leg{ledger.Debit("b", 5), ledger.Credit("a", 5)}},
		{Legs: []ledger.Leg{ledger.Debit("a", 5), ledger.Credit("c", 5)}},
	}
	if got := fmt.Sprint(netPositions(recs)); got != "[{b 5} {c -5}]" {
		t.Errorf("positions %s, want first-touch order with a (net 0) dropped", got)
	}
	if got := fmt.Sprint(reservationDeltas([]ledger.Leg{ledger.Debit("u:spendable", 5), ledger.Credit("platform:revenue", 5)})); got != "[{u:spendable -5}]" {
		t.Errorf("reservation deltas %s", got)
	}
}
