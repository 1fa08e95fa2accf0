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

// The session state the driver applies the cores' decisions to, with no
// store: a finished commit step's answers and rows, restore from a
// journal, takeBatch's bound, finish.
func TestSessionStateApply(t *testing.T) {
	st := newSessionState("s")
	recs := settleJournal(3, 4)
	st.restore(recs, recs[1].Hash)
	if st.accepted() != 2 || st.head != recs[1].Hash || st.outcomes["k1"].Seq != 1 {
		t.Fatalf("restore: %+v", st)
	}
	var batch []*proposal
	for i := range maxGroupCommit + 3 {
		p := &proposal{key: fmt.Sprintf("p%d", i), done: make(chan struct{})}
		st.inflight[p.key] = p
		st.queue = append(st.queue, p)
	}
	batch = st.takeBatch()
	if len(batch) != maxGroupCommit || len(st.queue) != 3 {
		t.Fatalf("takeBatch: %d taken, %d left", len(batch), len(st.queue))
	}
	if rest := st.takeBatch(); len(rest) != 3 || st.queue != nil {
		t.Fatalf("second takeBatch: %d, queue %v", len(rest), st.queue)
	}
	items := make([]commitItem, 3)
	for i := range items {
		items[i] = commitItem{key: batch[i].key, legs: recs[0].Legs}
	}
	c := newCommitStep("s", st.nextSeq, st.head, items, nil)
	c.build([]bool{true, false, true})
	c.wrote([]bool{true, false, true}, nil)
	c.looked([]keyLookup{{}}) // the refused key is journaled nowhere
	c.closeRecords = true
	st.apply(c, batch[:3])
	if st.nextSeq != 4 || st.head != c.rows[1].Hash || !st.closedForRecords {
		t.Errorf("after apply: next %d head %s closed %v", st.nextSeq, st.head, st.closedForRecords)
	}
	if o := st.outcomes["p0"]; o.Status != Accepted || o.Seq != 2 {
		t.Errorf("p0 %+v", o)
	}
	if o := st.outcomes["p1"]; o.Status != Rejected {
		t.Errorf("p1 %+v", o)
	}
	if _, ok := st.inflight["p2"]; ok {
		t.Errorf("p2 still in flight")
	}
	select {
	case <-batch[2].done:
	default:
		t.Errorf("p2 not answered")
	}
	st.finish(SettleReport{Mode: ModeNetted})
	if !st.settled || st.report.Mode != ModeNetted {
		t.Errorf("finish: %+v", st)
	}
	if Accepted.String() != "accepted" || Rejected.String() != "rejected" || Status(9).String() != "Status(9)" {
		t.Errorf("status strings")
	}
}
