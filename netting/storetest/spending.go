package storetest

import (
	"fmt"
	"testing"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// spendingCases check the spending rule of port v3 (issue 27) on every
// store: a debit spends the settled balance and the credits of its own
// session, never another session's pending credit; so no settle, in any
// order, is refused by the ledger; and a resent key answers its first
// outcome before any funds check.
var spendingCases = []contractCase{
	{"Spending/ReserveSpendsNoPendingCredit", testSpendReserveNoCredit},
	{"Spending/ReserveAndAppendSpendsOwnCredits", testSpendOwnCredits},
	{"Spending/CrossSessionCreditNotSpendable", testSpendCrossSession},
	{"Spending/SameSessionCreditSpendable", testSpendSameSession},
	{"Spending/AnySettleOrder", testSpendAnySettleOrder},
	{"Spending/SettleMovesBothSides", testSpendSettleMovesSides},
	{"Spending/SessionNettingToZero", testSpendNetsToZero},
	{"Spending/BreachIsLoud", testSpendBreach},
	{"Keys/ResentKeyAnswersFirstOutcome", testResentKeyFirstOutcome},
	{"Spending/SumsDoNotWrap", testSpendNoWrap},
	{"Spending/MatchesMemStore", testMatchesMemStore},
}

// mint credits user's spendable with amount from platform:mint, as a
// movement (so the credit is pending until its session settles).
func mint(user string, amount int64) []ledger.Leg {
	return []ledger.Leg{ledger.Debit("platform:mint", amount), ledger.Credit(ledger.Spendable(user), amount)}
}

// sink debits user's spendable into platform:sink.
func sink(user string, amount int64) []ledger.Leg {
	return []ledger.Leg{ledger.Debit(ledger.Spendable(user), amount), ledger.Credit("platform:sink", amount)}
}

// Reserve (no session) never spends a pending credit: another request's
// credit, granted in the same call or before, leaves the debit refused;
// only the balance and the debits count.
func testSpendReserveNoCredit(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	w := ledger.Spendable("w")
	g, err := s.Reserve(ctx, [][]ledger.AccountDelta{{{Account: w, Delta: 100}}, {{Account: w, Delta: -100}}})
	must(t, err)
	if !g[0] || g[1] {
		t.Fatalf("granted = %v, want [true false]: a pending credit is nobody's to spend through Reserve", g)
	}
	fund(t, s, "f", "w", 30)
	g, err = s.Reserve(ctx, [][]ledger.AccountDelta{{{Account: w, Delta: -31}}, {{Account: w, Delta: -30}}})
	must(t, err)
	if g[0] || !g[1] {
		t.Errorf("granted = %v, want [false true] against the balance of 30 alone", g)
	}
	if r := reserved(t, s)[w]; r != (netting.Reserved{Debits: -30, Credits: 100}) {
		t.Errorf("reserved = %+v, want debits -30 and credits 100 apart", r)
	}
	if p := pending(t, s, w); p != 70 {
		t.Errorf("pending (net) = %d, want 70", p)
	}
}

// ReserveAndAppend spends own (the session's committed credits, which the
// store must not change) and the credits of the batch's requests granted
// before, and nothing more.
func testSpendOwnCredits(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	createSession(t, s, "s", 16)
	w := ledger.Spendable("w")
	// Another session's pending credit, which must not count.
	g, err := s.Reserve(ctx, [][]ledger.AccountDelta{{{Account: w, Delta: 1000}}})
	must(t, err)
	if !g[0] {
		t.Fatal("credit refused")
	}
	own := map[string]int64{w: 50}
	reqs := [][]ledger.AccountDelta{
		{{Account: w, Delta: -50}},                                    // own 50: granted
		{{Account: w, Delta: -1}},                                     // nothing left: refused
		{{Account: w, Delta: 40}},                                     // a credit of this batch…
		{{Account: w, Delta: -40}},                                    // …spendable by the request after it
		{{Account: w, Delta: -1}},                                     // refused
		{{Account: "x:spendable", Delta: 5}, {Account: w, Delta: -1}}, // refused: its own credit is on another account
	}
	keys := []string{"a", "b", "c", "d", "e", "f"}
	var calls [][]bool
	granted, err := s.ReserveAndAppend(ctx, own, reqs, chainGranted("s", 0, netting.GenesisHash, keys, &calls))
	must(t, err)
	want := []bool{true, false, true, true, false, false}
	if fmt.Sprint(granted) != fmt.Sprint(want) {
		t.Fatalf("granted = %v, want %v", granted, want)
	}
	if own[w] != 50 || len(own) != 1 {
		t.Errorf("the store changed the caller's own map: %v", own)
	}
	if r := reserved(t, s)[w]; r != (netting.Reserved{Debits: -90, Credits: 1040}) {
		t.Errorf("reserved = %+v, want debits -90, credits 1040", r)
	}
	if r := reserved(t, s)["x:spendable"]; !r.Zero() {
		t.Errorf("x reserved = %+v: the refused request's credit was not undone", r)
	}
}

// Issue 27, sequence 1: scope S1 credits w on one node, scope S2 on
// another spends it before S1 settles. The spend must be refused at
// Record: accepted, it was refused by the ledger when S2 settled first,
// and dropped.
func testSpendCrossSession(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	s1 := c.open("econ-1", c.scopeOf("econ-1", 0))
	s2 := c.open("econ-2", c.scopeOf("econ-2", 0))
	accept(t, s1, "K1", mint("w", 100)...)
	if out := record(t, s2, "K2", sink("w", 100)...); out.Status != netting.Rejected || out.Reason != netting.ReasonInsufficientFunds {
		t.Fatalf("K2 spent S1's pending credit: %+v, want REJECTED INSUFFICIENT_FUNDS", out)
	}
	settle(t, s2)
	settle(t, s1)
	if b := balance(t, s, ledger.Spendable("w")); b != 100 {
		t.Errorf("w = %d, want 100", b)
	}
	// Settled, the credit is anyone's: a fresh S2 epoch spends it.
	s2b := c.open("econ-2", c.scopeOf("econ-2", 0))
	accept(t, s2b, "K3", sink("w", 100)...)
	settle(t, s2b)
	checkMoney(t, s, true)
}

// A session's own credits are spendable by its own debits: they settle
// together, in one netted position.
func testSpendSameSession(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	s1 := c.open("econ-1", c.scopeOf("econ-1", 0))
	accept(t, s1, "loot", mint("w", 100)...)
	accept(t, s1, "shop", sink("w", 60)...)
	if out := record(t, s1, "too-much", sink("w", 41)...); out.Status != netting.Rejected {
		t.Errorf("spent more than the session's credits: %+v", out)
	}
	accept(t, s1, "rest", sink("w", 40)...)
	rep := settle(t, s1)
	if rep.Mode != netting.ModeNetted {
		t.Errorf("mode %s, want netted", rep.Mode)
	}
	if b := balance(t, s, ledger.Spendable("w")); b != 0 {
		t.Errorf("w = %d, want 0", b)
	}
	if missing, err := netting.MissingFromLedger(ctxT(t), s, s1.ID()); err != nil || len(missing) != 0 {
		t.Errorf("MissingFromLedger of a sound settle = %v, %v; want none", missing, err)
	}
	checkMoney(t, s, true)
}

// Sessions that spend, credit and spend their own credits on shared
// wallets settle in every order without a refusal, and every accepted
// movement lands.
func testSpendAnySettleOrder(t *testing.T, s netting.SharedStore) {
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {2, 0, 1}} {
		c := newCluster(t, s, threeNodes, nil)
		u := fmt.Sprintf("o%d%d%d", order[0], order[1], order[2])
		fund(t, s, "f-"+u, u, 50)
		sess := []*netting.Session{
			c.open("econ-1", c.scopeOf("econ-1", 0)),
			c.open("econ-2", c.scopeOf("econ-2", 0)),
			c.open("econ-3", c.scopeOf("econ-3", 0)),
		}
		accepted := 0
		try := func(i int, key string, legs []ledger.Leg) {
			if record(t, sess[i], u+key, legs...).Status == netting.Accepted {
				accepted++
			}
		}
		try(0, "a-loot", mint(u, 100))
		try(1, "b-spend", sink(u, 50)) // the settled 50: granted
		try(2, "c-spend", sink(u, 1))  // nothing settled is left: refused
		try(0, "a-spend", sink(u, 100))
		try(2, "c-loot", mint(u, 10))
		// Refused although c's own credit covers it: every session's
		// pending debits count against everyone (a's 100 spends a's own
		// 100, but the check cannot tell whose credits cover whose
		// debits), the rule's price.
		try(2, "c-spend2", sink(u, 10))
		try(2, "c-spend3", sink(u, 0+10-10+1)) // refused likewise
		for _, i := range order {
			rep := settle(t, sess[i])
			if rep.Mode != netting.ModeNetted || len(rep.Rejected) != 0 {
				t.Errorf("order %v: session %d settled %s with rejections %v", order, i, rep.Mode, rep.Rejected)
			}
		}
		if accepted != 4 {
			t.Errorf("order %v: %d accepted, want 4", order, accepted)
		}
		if b := balance(t, s, ledger.Spendable(u)); b != 10 {
			t.Errorf("order %v: %s = %d, want 10", order, u, b)
		}
	}
	checkMoney(t, s, true)
}

// Every settle posting moves its own sides out of the counters: after a
// netted settle whose account is both credited and debited, both sides are
// back at zero (a net release would leave -x and +x behind).
func testSpendSettleMovesSides(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, func(cfg *netting.ClusterConfig) { cfg.ChunkWidth = 1 })
	fund(t, s, "f", "w", 10)
	s1 := c.open("econ-1", c.scopeOf("econ-1", 0))
	accept(t, s1, "in", mint("w", 30)...)
	accept(t, s1, "out", sink("w", 35)...)
	if r := reserved(t, s)[ledger.Spendable("w")]; r != (netting.Reserved{Debits: -35, Credits: 30}) {
		t.Errorf("before settle: %+v, want debits -35, credits 30", r)
	}
	settle(t, s1)
	if r := reserved(t, s); len(r) != 0 {
		t.Errorf("after settle: reserved %v, want none", r)
	}
	checkMoney(t, s, true)
}

// A session whose every account nets to zero (a trade and its return)
// settles netted with no posting, and releases both sides of each account
// (no chunk carries them). It panicked before (chunk 0 of none), and the
// two sides of such an account were left reserved.
func testSpendNetsToZero(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "fa", "a", 10)
	fund(t, s, "fb", "b", 10)
	s1 := c.open("econ-1", c.scopeOf("econ-1", 0))
	accept(t, s1, "there", ledger.Debit(ledger.Spendable("a"), 7), ledger.Credit(ledger.Spendable("b"), 7))
	accept(t, s1, "back", ledger.Debit(ledger.Spendable("b"), 7), ledger.Credit(ledger.Spendable("a"), 7))
	rep := settle(t, s1)
	if rep.Mode != netting.ModeNetted || rep.Postings != 0 || rep.Netted != 2 {
		t.Errorf("report %+v, want netted, 0 postings, 2 movements", rep)
	}
	if r := reserved(t, s); len(r) != 0 {
		t.Errorf("reserved after settle: %v, want none", r)
	}
	if m, err := s.Session(ctxT(t), s1.ID()); err != nil || !m.Settled {
		t.Errorf("session %+v, %v: want settled", m, err)
	}
	checkMoney(t, s, true)
}

// A posting outside the sessions (an operator's Post) can still spend
// money a session reserved: the ledger then refuses that session's settle.
// That is an invariant breach, never a silent one: the movement is in the
// report's Rejected with the ledger's code, the node counts it (Breaches,
// and an error log), and the session is durably marked Replaying with the
// movement's replay posting absent — what an audit of settled journals
// against the ledger finds.
func testSpendBreach(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, func(cfg *netting.ClusterConfig) { cfg.ChunkWidth = 2 })
	fund(t, s, "fa", "alice", 100)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	accept(t, sess, "a1", buy("alice", "bob", 40)...)
	accept(t, sess, "a2", buy("alice", "bob", 50)...)
	if n := c.nodes["econ-1"].Breaches(); n != 0 {
		t.Fatalf("breaches before = %d", n)
	}
	must(t, s.Post(ctxT(t), ledger.Posting{ID: "outside", Legs: buy("alice", "shop", 60)}))
	rep := settle(t, sess)
	if len(rep.Rejected) != 1 || rep.Rejected[0] != (netting.Rejection{Key: "a2", Code: "LEDGER.OVERDRAFT"}) {
		t.Errorf("rejected = %v, want a2 with LEDGER.OVERDRAFT", rep.Rejected)
	}
	// The chunk's refusal and a2's: two breaches.
	if n := c.nodes["econ-1"].Breaches(); n != 2 {
		t.Errorf("the node counted %d breaches, want 2", n)
	}
	id := sess.ID()
	m, err := s.Session(ctxT(t), id)
	must(t, err)
	if !m.Settled || !m.Replaying {
		t.Errorf("session after the breach: %+v, want settled and Replaying", m)
	}
	if has(t, s, "mv_"+id+"_1") || !has(t, s, "mv_"+id+"_0") {
		t.Error("replay postings wrong: want a1 posted, a2 not")
	}
	// The audit's hook finds it.
	missing, err := netting.MissingFromLedger(ctxT(t), s, id)
	must(t, err)
	if len(missing) != 1 || missing[0].Key != "a2" || missing[0].Seq != 1 {
		t.Errorf("MissingFromLedger = %+v, want a2 (seq 1)", missing)
	}
	checkMoney(t, s, true)
}

// Issue 27, sequence 2: a key accepted, its session settled (its funds
// gone), then resent — to the same node's next epoch, and to another
// node's session — answers ACCEPTED with its first seq, not REJECTED by a
// funds check it should never have been put to.
func testResentKeyFirstOutcome(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "w", 100)
	s1 := c.open("econ-1", c.scopeOf("econ-1", 0))
	accept(t, s1, "pad", sink("w", 1)...)
	seq := accept(t, s1, "K", sink("w", 99)...)
	settle(t, s1)
	for _, sess := range []*netting.Session{c.open("econ-1", c.scopeOf("econ-1", 0)), c.open("econ-2", c.scopeOf("econ-2", 0))} {
		out := record(t, sess, "K", sink("w", 99)...)
		if out.Status != netting.Accepted || out.Seq != seq {
			t.Errorf("resent K = %+v, want ACCEPTED with seq %d", out, seq)
		}
		// In a batch with a fresh key that is refused too.
		if out := record(t, sess, "fresh-"+sess.ID(), sink("w", 1)...); out.Status != netting.Rejected {
			t.Errorf("fresh key = %+v, want REJECTED", out)
		}
		settle(t, sess)
	}
	if b := balance(t, s, "platform:sink"); b != 100 {
		t.Errorf("sink = %d, want 100 (K once)", b)
	}
	checkMoney(t, s, true)
}

// The rule is checked on the true sums, which need not fit in an int64.
// Session s's own credit of MaxInt64−100 and the balance of 100 cover one
// debit of MaxInt64, not two: the two debits sum to −2·MaxInt64, which
// wraps to +2 (a store that checked the wrapped sum granted both, and the
// settle was refused by the ledger: accepted money lost). Then session t,
// with no credit, debits MaxInt64: the pending debits would wrap again.
func testSpendNoWrap(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	const max = int64(1<<63 - 1)
	w := ledger.Spendable("w")
	fund(t, s, "f", "w", 100)
	createSession(t, s, "s", 16)
	createSession(t, s, "t", 16)
	var calls [][]bool
	granted, err := s.ReserveAndAppend(ctx, map[string]int64{w: max - 100},
		[][]ledger.AccountDelta{{{Account: w, Delta: -max}}, {{Account: w, Delta: -max}}},
		chainGranted("s", 0, netting.GenesisHash, []string{"s1", "s2"}, &calls))
	if err == nil && fmt.Sprint(granted) != "[true false]" {
		t.Fatalf("session s: granted = %v, want [true false]", granted)
	}
	if err != nil {
		t.Logf("session s: %v (refused whole: safe)", err)
	}
	granted, err = s.ReserveAndAppend(ctx, nil, [][]ledger.AccountDelta{{{Account: w, Delta: -max}}},
		chainGranted("t", 0, netting.GenesisHash, []string{"t1"}, &calls))
	if err == nil && granted[0] {
		t.Fatalf("session t: a debit of MaxInt64 against a balance of 100 and the pending debits was granted")
	}
	if err != nil {
		t.Logf("session t: %v (refused whole: safe)", err)
	}
}
