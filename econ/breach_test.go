package econ

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// A settle the ledger refuses (here an operator's Post spent money a
// session had reserved, the one way left to cause it) is a breach: the
// node's shardwise_econ_settle_breaches_total counts it.
func TestSettleBreachIsCounted(t *testing.T) {
	ctx := testCtx(t)
	store := netting.NewMemStore()
	n := startNode(t, testPrefix(t), "econ-a", store, Config{})
	waitView(t, []string{"econ-a"}, n)
	reg := prometheus.NewRegistry()
	reg.MustRegister(n.Collectors()...)
	breaches := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "shardwise_econ_settle_breaches_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no shardwise_econ_settle_breaches_total")
		return 0
	}
	w := ledger.Spendable("w")
	if err := store.Post(ctx, ledger.Posting{ID: "fund", Legs: []ledger.Leg{ledger.Credit(w, 10), ledger.Debit(ledger.Revenue, 10)}}); err != nil {
		t.Fatal(err)
	}
	out, err := n.Record(ctx, "shop", netting.Movement{Key: "buy", Legs: []ledger.Leg{ledger.Debit(w, 10), ledger.Credit("platform:sink", 10)}})
	if err != nil || out.Status != netting.Accepted {
		t.Fatalf("record = %+v, %v", out, err)
	}
	if b := breaches(); b != 0 {
		t.Fatalf("breaches before = %v", b)
	}
	if err := store.Post(ctx, ledger.Posting{ID: "outside", Legs: []ledger.Leg{ledger.Debit(w, 10), ledger.Credit("platform:ops", 10)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.SettleAll(ctx); err != nil {
		t.Fatal(err)
	}
	// The chunk's refusal and the movement's.
	if b := breaches(); b != 2 {
		t.Fatalf("breaches after the refused settle = %v, want 2", b)
	}
}
