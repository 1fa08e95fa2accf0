package econ

import (
	"fmt"
	"testing"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// TestStatsCountWhatTheNodeDid: one node alone records movements (some
// accepted, one rejected for funds); Stats counts them as its series do,
// OpenSessions finds its open epochs in the store, and after SettleAll
// the settled sessions are counted and none is open any more.
func TestStatsCountWhatTheNodeDid(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	n := startNode(t, prefix, "econ-a", store, Config{})
	waitView(t, []string{"econ-a"}, n)
	ctx := testCtx(t)
	const accepted = 12
	for i := range accepted {
		out, err := n.Record(ctx, fmt.Sprintf("market-%d", i%3), grant(fmt.Sprintf("k%d", i), "u1", 1))
		if err != nil || out.Status != netting.Accepted {
			t.Fatalf("record %d: %+v, %v", i, out, err)
		}
	}
	broke := netting.Movement{Key: "broke", Legs: []ledger.Leg{
		ledger.Debit(ledger.Spendable("broke"), 5), ledger.Credit(ledger.Earned("seller"), 5),
	}}
	if out, err := n.Record(ctx, "market-0", broke); err != nil || out.Status == netting.Accepted {
		t.Fatalf("the overdraft: %+v, %v; want rejected", out, err)
	}
	s := n.Stats()
	if s.Name != "econ-a" || !s.Ready || s.Accepted != accepted || s.Rejected != 1 || s.SettledSessions != 0 {
		t.Fatalf("before settling: %+v", s)
	}
	open, err := OpenSessions(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if open["econ-a"] != 3 {
		t.Fatalf("open sessions %v, want 3 of econ-a (one per market)", open)
	}
	reps, err := n.SettleAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s = n.Stats()
	if s.SettledSessions != int64(len(reps)) || s.SettledSessions < 3 {
		t.Fatalf("after SettleAll (%d reports): %+v", len(reps), s)
	}
	// Netted: every accepted movement settled, in fewer postings.
	if s.SettledMovements != accepted || s.SettlePostings == 0 || s.SettlePostings >= accepted ||
		s.NettingRatio != float64(s.SettledMovements)/float64(s.SettlePostings) {
		t.Fatalf("netting: %+v, want %d movements settled in fewer postings", s, accepted)
	}
	if open, err = OpenSessions(ctx, store); err != nil || open["econ-a"] != 0 {
		t.Fatalf("open sessions after SettleAll: %v, %v", open, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if s = n.Stats(); !s.Closed || s.Accepted != accepted {
		t.Fatalf("after Close: %+v", s)
	}
}
