package netting_test

import (
	"math"
	"testing"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// The spending rule's sums must not wrap. Scope A credits w MaxInt64 and
// spends it (its own credit covers it: pending debits −MaxInt64); scope B,
// with no credit of its own, then debits w MaxInt64 against a balance of
// 100. Its pending debits would be −2·MaxInt64, which wraps in int64 to +2,
// so the check read 100 + 2 + 0 ≥ 0 and granted it; its settle was then
// refused by the ledger (w would end at 100 − MaxInt64): accepted money
// lost. The check must see the true sum and refuse B.
func TestSpendingRuleDoesNotWrap(t *testing.T) {
	ctx := ctxT(t)
	s := netting.NewMemStore()
	fund(t, s, "w", 100)
	w := ledger.Spendable("w")
	n, err := netting.OpenClusterNode(s, netting.ClusterConfig{NodeID: "econ-1", Nodes: []string{"econ-1"}})
	must(t, err)
	defer n.Close()
	a, b := scopeOwnedBy(t, n, 0), scopeOwnedBy(t, n, 1)
	rec := func(scope, key string, legs ...ledger.Leg) netting.Outcome {
		t.Helper()
		out, err := n.Record(ctx, scope, netting.Movement{Key: key, Legs: legs})
		must(t, err)
		return out
	}
	if out := rec(a, "mint", ledger.Credit(w, math.MaxInt64), ledger.Debit("platform:mint", math.MaxInt64)); out.Status != netting.Accepted {
		t.Fatalf("mint: %+v", out)
	}
	if out := rec(a, "spend-own", ledger.Debit(w, math.MaxInt64), ledger.Credit("platform:sink", math.MaxInt64)); out.Status != netting.Accepted {
		t.Fatalf("spend of own credit: %+v", out)
	}
	out := rec(b, "spend-other", ledger.Debit(w, math.MaxInt64), ledger.Credit("platform:sink", math.MaxInt64))
	if out.Status == netting.Accepted {
		reps, err := n.SettleAll(ctx)
		t.Errorf("a debit of MaxInt64 against a balance of 100 and no own credit was accepted (settle: %+v, %v; breaches %d)", reps, err, n.Breaches())
	}
	if _, err := n.SettleAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := n.Breaches(); got != 0 {
		t.Errorf("breaches: %d", got)
	}
}
