package econ

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// escrowWorld is one economy node over a MemStore, both on one fake
// clock: the escrow sweep's deadlines are moved by hand, with no sleep.
type escrowWorld struct {
	t     *testing.T
	ctx   context.Context
	clk   *clock.Fake
	st    *netting.MemStore
	cn    *netting.ClusterNode
	bound time.Duration
	n     int
}

func newEscrowWorld(t *testing.T) *escrowWorld {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC))
	st := netting.NewMemStoreWithClock(clk)
	cn, err := netting.OpenClusterNode(st, netting.ClusterConfig{NodeID: "econ-0", Nodes: []string{"econ-0"}, Clock: clk,
		EpochMaxAge: time.Hour, Sweep: &netting.SweepConfig{SettleOlderThan: 2 * time.Hour}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cn.Close() })
	return &escrowWorld{t: t, ctx: context.Background(), clk: clk, st: st, cn: cn, bound: DefaultEscrowBound}
}

// record records m as Node.Record would (the escrow end's check included).
func (w *escrowWorld) record(scope string, m netting.Movement) netting.Outcome {
	w.t.Helper()
	out, err := recordEscrow(w.ctx, w.st, w.cn, scope, m)
	if err != nil {
		w.t.Fatalf("record %s: %v", m.Key, err)
	}
	return out
}

func (w *escrowWorld) fund(wallet string, n int64) {
	w.t.Helper()
	w.n++
	m := netting.Movement{Key: "grant:" + wallet + ":" + string(rune('0'+w.n)), Legs: []ledger.Leg{ledger.Debit("platform:grant", n), ledger.Credit(wallet, n)}}
	if out := w.record(playerScope(wallet), m); out.Status != netting.Accepted {
		w.t.Fatalf("grant: %+v", out)
	}
}

// playerScope is the scope of a wallet "player:<n>:…", as the game has it.
func playerScope(wallet string) string {
	i := len("player:")
	for i < len(wallet) && wallet[i] != ':' {
		i++
	}
	return wallet[:i]
}

func offerMovement(id uint64, step, wallet, asset string, n int64) netting.Movement {
	return netting.Movement{Key: EscrowKey(id, step), Legs: []ledger.Leg{ledger.Debit(wallet, n), ledger.Credit(EscrowAccount(id, asset), n)}}
}

// holds is what a wallet can spend now: its balance plus its pending net.
func (w *escrowWorld) holds(acct string) int64 {
	w.t.Helper()
	b, err := w.st.Balance(w.ctx, acct)
	if err != nil {
		w.t.Fatal(err)
	}
	p, err := w.st.Pending(w.ctx, acct)
	if err != nil {
		w.t.Fatal(err)
	}
	return b + p
}

func (w *escrowWorld) sweep() EscrowSweepSummary {
	w.t.Helper()
	sum, _, _, err := sweepEscrows(w.ctx, w.st, w.cn, "econ-0", w.bound, time.Time{}, nil, true)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, f := range sum.Failed {
		w.t.Errorf("escrow %d failed: %v", f.ID, f.Err)
	}
	return sum
}

// audit settles everything and checks the money: the audit's sums, and
// every escrow account back at zero.
func (w *escrowWorld) audit() {
	w.t.Helper()
	if _, err := w.cn.SettleAll(w.ctx); err != nil {
		w.t.Fatal(err)
	}
	rep, err := Audit(w.ctx, w.st)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, p := range rep.Problems(true) {
		w.t.Errorf("audit: %s", p)
	}
	bals, err := w.st.Balances(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	for acct, b := range bals {
		if _, ok := parseEscrowAccount(acct); ok && b != 0 {
			w.t.Errorf("escrow account %s holds %d", acct, b)
		}
	}
}

const (
	coinsA  = "player:101:coins"
	swordsA = "player:101:good:3"
	coinsB  = "player:102:coins"
	swordsB = "player:102:good:3"
)

// A trade whose decider stops after both offers were reserved is
// cancelled by the economy once the bound has passed since the first
// offer (not a moment before), its escrow returned to each side; the
// decider's commit arriving after that is refused with ESCROW.DECIDED,
// its cancel (the same legs) accepted, and the money is sound.
func TestEscrowOfAStoppedDeciderIsCancelledWithinTheBound(t *testing.T) {
	w := newEscrowWorld(t)
	w.fund(coinsA, 100)
	w.fund(swordsB, 5)
	const id = 7
	if out := w.record("player:101", offerMovement(id, EscrowOfferA, coinsA, "coins", 30)); out.Status != netting.Accepted {
		t.Fatalf("offer a: %+v", out)
	}
	w.clk.Advance(time.Second)
	if out := w.record("player:102", offerMovement(id, EscrowOfferB, swordsB, "good:3", 2)); out.Status != netting.Accepted {
		t.Fatalf("offer b: %+v", out)
	}
	if got := []int64{w.holds(coinsA), w.holds(swordsB)}; got[0] != 70 || got[1] != 3 {
		t.Fatalf("offers not reserved: %v", got)
	}
	// The decider stops here. Until the bound has passed since the first
	// offer, the economy waits for it.
	w.clk.Advance(w.bound - time.Second - time.Millisecond)
	if sum := w.sweep(); len(sum.Expired) != 0 || sum.Waiting != 1 {
		t.Fatalf("swept before the bound: %+v", sum)
	}
	w.clk.Advance(time.Millisecond)
	sum := w.sweep()
	if !slices.Equal(sum.Expired, []uint64{id}) || sum.Claimed != 2 {
		t.Fatalf("at the bound: %+v, want escrow %d cancelled and both sides paid back", sum, id)
	}
	if got := []int64{w.holds(coinsA), w.holds(swordsA), w.holds(coinsB), w.holds(swordsB)}; !slices.Equal(got, []int64{100, 0, 0, 5}) {
		t.Fatalf("after the cancel A holds %d coins %d swords, B %d coins %d swords; want everything back", got[0], got[1], got[2], got[3])
	}
	if sum := w.sweep(); len(sum.Expired)+sum.Claimed != 0 {
		t.Fatalf("a second sweep did more: %+v", sum)
	}

	// The decider comes back from an older checkpoint and commits.
	commit := netting.Movement{Key: EscrowKey(id, EscrowEnd), Legs: []ledger.Leg{
		ledger.Debit(EscrowAccount(id, "coins"), 30), ledger.Credit(EscrowOwedAccount(id, 'b', coinsB), 30),
		ledger.Debit(EscrowAccount(id, "good:3"), 2), ledger.Credit(EscrowOwedAccount(id, 'a', swordsA), 2),
	}}
	if out := w.record(EscrowScope(id), commit); out.Status != netting.Rejected || out.Reason != ReasonEscrowDecided {
		t.Fatalf("a commit after the economy's cancel: %+v, want rejected %s", out, ReasonEscrowDecided)
	}
	cancel := netting.Movement{Key: EscrowKey(id, EscrowEnd), Legs: []ledger.Leg{
		ledger.Debit(EscrowAccount(id, "coins"), 30), ledger.Credit(EscrowOwedAccount(id, 'a', coinsA), 30),
		ledger.Debit(EscrowAccount(id, "good:3"), 2), ledger.Credit(EscrowOwedAccount(id, 'b', swordsB), 2),
	}}
	if out := w.record(EscrowScope(id), cancel); out.Status != netting.Accepted {
		t.Fatalf("the decider's own cancel: %+v, want accepted (the same movement)", out)
	}
	claimA := netting.Movement{Key: EscrowKey(id, EscrowClaimA), Legs: []ledger.Leg{ledger.Debit(EscrowOwedAccount(id, 'a', coinsA), 30), ledger.Credit(coinsA, 30)}}
	if out := w.record("player:101", claimA); out.Status != netting.Accepted {
		t.Fatalf("the decider's claim: %+v", out)
	}
	if got := w.holds(coinsA); got != 100 {
		t.Fatalf("A holds %d coins after the decider's resent claim, want 100 (once)", got)
	}
	w.audit()
}

// An offer still in flight when the economy closes its escrow is refused
// for ever (ESCROW.EXPIRED), so it can never be journaled into an escrow
// already returned.
func TestALateOfferIsRefusedOnceTheEscrowIsClosed(t *testing.T) {
	w := newEscrowWorld(t)
	w.fund(coinsA, 100)
	w.fund(coinsB, 100)
	const id = 8
	w.record("player:101", offerMovement(id, EscrowOfferA, coinsA, "coins", 10))
	w.clk.Advance(w.bound)
	if sum := w.sweep(); !slices.Equal(sum.Expired, []uint64{id}) {
		t.Fatalf("sweep: %+v", sum)
	}
	out := w.record("player:102", offerMovement(id, EscrowOfferB, coinsB, "coins", 10))
	if out.Status != netting.Rejected || out.Reason != ReasonEscrowExpired {
		t.Fatalf("a late offer: %+v, want rejected %s", out, ReasonEscrowExpired)
	}
	if got := []int64{w.holds(coinsA), w.holds(coinsB)}; !slices.Equal(got, []int64{100, 100}) {
		t.Fatalf("holdings %v, want both back at 100", got)
	}
	w.audit()
}

// An escrow whose offers' session has settled (the offers are in the
// ledger's balances, no longer in an unsettled journal) is still found.
func TestASettledEscrowIsStillFound(t *testing.T) {
	w := newEscrowWorld(t)
	w.fund(coinsA, 100)
	const id = 10
	w.record("player:101", offerMovement(id, EscrowOfferA, coinsA, "coins", 10))
	if _, err := w.cn.SettleAll(w.ctx); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(w.bound)
	if sum := w.sweep(); !slices.Equal(sum.Expired, []uint64{id}) || sum.Claimed != 1 {
		t.Fatalf("sweep: %+v, want escrow %d cancelled and paid back", sum, id)
	}
	if got := w.holds(coinsA); got != 100 {
		t.Fatalf("A holds %d, want 100", got)
	}
	w.audit()
}

// A decider that dies after its end (a commit) and before its claims
// leaves what the trade owes in the owed accounts: the economy pays each
// side once the bound has passed since the end, from the end's own legs.
func TestTheEconomyClaimsWhatAnEndedTradeOwes(t *testing.T) {
	w := newEscrowWorld(t)
	w.fund(coinsA, 100)
	w.fund(swordsB, 5)
	const id = 9
	w.record("player:101", offerMovement(id, EscrowOfferA, coinsA, "coins", 30))
	w.record("player:102", offerMovement(id, EscrowOfferB, swordsB, "good:3", 2))
	w.clk.Advance(time.Second)
	commit := netting.Movement{Key: EscrowKey(id, EscrowEnd), Legs: []ledger.Leg{
		ledger.Debit(EscrowAccount(id, "coins"), 30), ledger.Credit(EscrowOwedAccount(id, 'b', coinsB), 30),
		ledger.Debit(EscrowAccount(id, "good:3"), 2), ledger.Credit(EscrowOwedAccount(id, 'a', swordsA), 2),
	}}
	if out := w.record(EscrowScope(id), commit); out.Status != netting.Accepted {
		t.Fatalf("commit: %+v", out)
	}
	// Past the offers' bound, but the end is young: its decider may still
	// claim.
	w.clk.Advance(w.bound - time.Millisecond)
	if sum := w.sweep(); sum.Claimed != 0 || len(sum.Expired) != 0 {
		t.Fatalf("claimed before the bound: %+v", sum)
	}
	w.clk.Advance(time.Millisecond)
	if sum := w.sweep(); sum.Claimed != 2 || len(sum.Expired) != 0 {
		t.Fatalf("at the bound: %+v, want both claims", sum)
	}
	if got := []int64{w.holds(coinsA), w.holds(swordsA), w.holds(coinsB), w.holds(swordsB)}; !slices.Equal(got, []int64{70, 2, 30, 3}) {
		t.Fatalf("after the claims %v, want the trade's outcome [70 2 30 3]", got)
	}
	// A cancel from a decider resumed before its commit learns the commit.
	cancel := netting.Movement{Key: EscrowKey(id, EscrowEnd), Legs: []ledger.Leg{
		ledger.Debit(EscrowAccount(id, "coins"), 30), ledger.Credit(EscrowOwedAccount(id, 'a', coinsA), 30),
	}}
	if out := w.record(EscrowScope(id), cancel); out.Status != netting.Rejected || out.Reason != ReasonEscrowDecided {
		t.Fatalf("a cancel after the commit: %+v, want rejected %s", out, ReasonEscrowDecided)
	}
	w.audit()
}

// Keys and accounts of the convention read back as written.
func TestEscrowNamesParse(t *testing.T) {
	if id, step, ok := parseEscrowKey(EscrowKey(42, EscrowClaimB)); !ok || id != 42 || step != EscrowClaimB {
		t.Fatalf("key: %d %q %v", id, step, ok)
	}
	if _, _, ok := parseEscrowKey("buy:42"); ok {
		t.Fatal("a purchase's key parsed as an escrow's")
	}
	id, side, wallet, ok := parseOwedAccount(EscrowOwedAccount(42, 'b', swordsA))
	if !ok || id != 42 || side != 'b' || wallet != swordsA {
		t.Fatalf("owed: %d %c %q %v", id, side, wallet, ok)
	}
	if _, _, _, ok := parseOwedAccount(EscrowAccount(42, "coins")); ok {
		t.Fatal("an escrow account parsed as owed")
	}
	if !sameMovement([]ledger.Leg{ledger.Debit("x", 2), ledger.Credit("y", 2)}, []ledger.Leg{ledger.Credit("y", 1), ledger.Debit("x", 2), ledger.Credit("y", 1)}) {
		t.Fatal("the same movement split differently compared unequal")
	}
	if sameMovement([]ledger.Leg{ledger.Debit("x", 2), ledger.Credit("y", 2)}, []ledger.Leg{ledger.Debit("x", 2), ledger.Credit("z", 2)}) {
		t.Fatal("different movements compared equal")
	}
}

// A node looks at the escrows it recorded an offer of, and scans the
// store for the others once per view: after its first sweep, an offer it
// records is found with no scan, and a finished escrow is no longer
// looked at.
func TestANodeWatchesTheEscrowsItRecords(t *testing.T) {
	store, _ := newSQLite(t)
	// Its own escrow sweeper waits a whole bound: the test's sweeps are
	// the view's first.
	n := startNode(t, testPrefix(t), "econ-a", store, Config{EscrowEvery: DefaultEscrowBound})
	waitView(t, []string{"econ-a"}, n)
	ctx := testCtx(t)
	sweep := func(after time.Duration) EscrowSweepSummary {
		t.Helper()
		now, err := store.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := n.SweepEscrows(ctx, EscrowSweepOptions{Now: now.Add(after)})
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	if sum := sweep(0); !sum.Scanned {
		t.Fatalf("the view's first sweep did not scan: %+v", sum)
	}
	if sum := sweep(0); sum.Scanned {
		t.Fatalf("a second sweep of the view scanned again: %+v", sum)
	}
	grant := netting.Movement{Key: "grant:a", Legs: []ledger.Leg{ledger.Debit("platform:grant", 50), ledger.Credit(coinsA, 50)}}
	for _, m := range []netting.Movement{grant, offerMovement(11, EscrowOfferA, coinsA, "coins", 20)} {
		if out, err := n.Record(ctx, "player:101", m); err != nil || out.Status != netting.Accepted {
			t.Fatalf("record %s: %+v %v", m.Key, out, err)
		}
	}
	sum := sweep(DefaultEscrowBound)
	if sum.Scanned || !slices.Equal(sum.Expired, []uint64{11}) || sum.Claimed != 1 {
		t.Fatalf("sweep: %+v, want escrow 11 cancelled without a scan", sum)
	}
	if sum := sweep(2 * DefaultEscrowBound); sum.Looked != 0 {
		t.Fatalf("a finished escrow is still looked at: %+v", sum)
	}
	// On SQLite too, the offer the sweep refused stays refused.
	late := netting.Movement{Key: EscrowKey(11, EscrowOfferB), Legs: []ledger.Leg{ledger.Debit(coinsA, 5), ledger.Credit(EscrowAccount(11, "coins"), 5)}}
	if out, err := n.Record(ctx, "player:101", late); err != nil || out.Status != netting.Rejected || out.Reason != ReasonEscrowExpired {
		t.Fatalf("a late offer: %+v %v, want rejected %s", out, err, ReasonEscrowExpired)
	}
}

// racingStore runs before once, just before the first AppendRecording: a
// writer landing between the sweep's read of the offers and its refusals.
type racingStore struct {
	netting.SharedStore
	before func()
}

func (r *racingStore) AppendRecording(ctx context.Context, recs []netting.JournalRecord, refused []netting.RefusedKey) error {
	if f := r.before; f != nil {
		r.before = nil
		f()
	}
	return r.SharedStore.AppendRecording(ctx, recs, refused)
}

// An offer journaled between the sweep's look at the offers and its
// refusal of the unanswered ones is the key's first answer: the sweep
// reads the offers again and returns that one too.
func TestAnOfferLandingAsTheEscrowClosesIsReturned(t *testing.T) {
	w := newEscrowWorld(t)
	w.fund(coinsA, 100)
	w.fund(coinsB, 100)
	const id = 12
	w.record("player:101", offerMovement(id, EscrowOfferA, coinsA, "coins", 10))
	w.clk.Advance(w.bound)
	racing := &racingStore{SharedStore: w.st, before: func() {
		w.record("player:102", offerMovement(id, EscrowOfferB, coinsB, "coins", 15))
	}}
	sum, _, _, err := sweepEscrows(w.ctx, racing, w.cn, "econ-0", w.bound, time.Time{}, nil, true)
	if err != nil || !slices.Equal(sum.Expired, []uint64{id}) || sum.Claimed != 2 {
		t.Fatalf("sweep: %+v %v, want escrow %d cancelled, both sides paid back", sum, err, id)
	}
	if got := []int64{w.holds(coinsA), w.holds(coinsB)}; !slices.Equal(got, []int64{100, 100}) {
		t.Fatalf("holdings %v, want both back at 100", got)
	}
	w.audit()
}

// The escrow's close on every store: an offer landing as the escrow
// closes is returned with the rest, a late offer is refused, a commit
// after the cancel is answered ESCROW.DECIDED, and the audit is clean.
func TestEscrowCloseOnEveryStore(t *testing.T) {
	for name, open := range auditStores(t) {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			ctx := testCtx(t)
			cn, err := netting.OpenClusterNode(st, netting.ClusterConfig{NodeID: "econ-0", Nodes: []string{"econ-0"},
				Sweep: &netting.SweepConfig{SettleOlderThan: 2 * netting.DefaultEpochMaxAge}, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cn.Close() })
			record := func(scope string, m netting.Movement) netting.Outcome {
				t.Helper()
				out, err := recordEscrow(ctx, st, cn, scope, m)
				if err != nil {
					t.Fatalf("record %s: %v", m.Key, err)
				}
				return out
			}
			for _, w := range []string{coinsA, coinsB} {
				record(playerScope(w), netting.Movement{Key: "grant:" + w, Legs: []ledger.Leg{ledger.Debit("platform:grant", 100), ledger.Credit(w, 100)}})
			}
			record("player:101", offerMovement(21, EscrowOfferA, coinsA, "coins", 10))
			record("player:101", offerMovement(22, EscrowOfferA, coinsA, "coins", 20))
			racing := &racingStore{SharedStore: st, before: func() {
				record("player:102", offerMovement(21, EscrowOfferB, coinsB, "coins", 15))
			}}
			now, err := st.Now(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sum, _, _, err := sweepEscrows(ctx, racing, cn, "econ-0", DefaultEscrowBound, now.Add(DefaultEscrowBound), nil, true)
			if err != nil || !slices.Equal(sum.Expired, []uint64{21, 22}) || sum.Claimed != 3 || len(sum.Failed) != 0 {
				t.Fatalf("sweep: %+v %v, want escrows 21 and 22 cancelled and 3 claims", sum, err)
			}
			if out := record("player:102", offerMovement(22, EscrowOfferB, coinsB, "coins", 5)); out.Status != netting.Rejected || out.Reason != ReasonEscrowExpired {
				t.Fatalf("a late offer: %+v, want rejected %s", out, ReasonEscrowExpired)
			}
			commit := netting.Movement{Key: EscrowKey(21, EscrowEnd), Legs: []ledger.Leg{
				ledger.Debit(EscrowAccount(21, "coins"), 25), ledger.Credit(EscrowOwedAccount(21, 'b', coinsB), 10), ledger.Credit(EscrowOwedAccount(21, 'a', coinsA), 15),
			}}
			if out := record(EscrowScope(21), commit); out.Status != netting.Rejected || out.Reason != ReasonEscrowDecided {
				t.Fatalf("a commit after the cancel: %+v, want rejected %s", out, ReasonEscrowDecided)
			}
			if _, err := cn.SettleAll(ctx); err != nil {
				t.Fatal(err)
			}
			rep, err := Audit(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range rep.Problems(true) {
				t.Errorf("audit: %s", p)
			}
			bals, err := st.Balances(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if bals[coinsA] != 100 || bals[coinsB] != 100 {
				t.Errorf("balances A %d B %d, want 100 each", bals[coinsA], bals[coinsB])
			}
			for acct, b := range bals {
				if _, ok := parseEscrowAccount(acct); ok && b != 0 {
					t.Errorf("escrow account %s holds %d", acct, b)
				}
			}
		})
	}
}
