package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// Tamperer rewrites a store's stored ledger behind the store's back, as an
// operator's stray UPDATE, an attacker or a broken disk would. A store's
// test offers one by returning, from Run's open, a store that also
// implements it (sqlstore's tests with direct SQL, MemStore's with a
// test-only hook); Run then checks that VerifyLedger finds every kind of
// tampering. Positions are chain positions (ChainedPosting.Seq). None of
// these keeps the store consistent: that is the point.
type Tamperer interface {
	// SetLegAmount sets the amount of leg idx of the posting at seq.
	SetLegAmount(ctx context.Context, seq int64, idx int, amount int64) error
	// SetMeta sets one meta entry of the posting at seq.
	SetMeta(ctx context.Context, seq int64, key, value string) error
	// SetHash replaces the stored hash of the posting at seq.
	SetHash(ctx context.Context, seq int64, hash string) error
	// DeletePosting removes the posting at seq with its legs; balances and
	// the head are left alone.
	DeletePosting(ctx context.Context, seq int64) error
	// SwapPostings exchanges the positions of the postings at a and b.
	SwapPostings(ctx context.Context, a, b int64) error
	// SetBalance sets an account's stored balance (creating it if absent).
	SetBalance(ctx context.Context, account string, balance int64) error
}

var ledgerChainCases = []contractCase{
	{"LedgerChain/EmptyProves", testChainEmpty},
	{"LedgerChain/PostingsChainInOrder", testChainInOrder},
	{"LedgerChain/RepeatsAndRefusalsDoNotExtend", testChainRepeats},
	{"LedgerChain/FencedPostingsChain", testChainFenced},
	{"LedgerChain/ConcurrentPostersOneChain", testChainConcurrent},
	{"LedgerChain/VerifyWhilePosting", testChainVerifyLive},
}

// runLedgerChain runs the chain's contract on every store, and the tamper
// cases on a store whose test offers a Tamperer.
func runLedgerChain(t *testing.T, open func(t *testing.T) netting.Store, shared func(t *testing.T) netting.SharedStore) {
	for _, c := range ledgerChainCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, shared(t)) })
	}
	if _, ok := open(t).(Tamperer); !ok {
		t.Run("LedgerTamper", func(t *testing.T) {
			t.Skip("SKIPPED: the store under test offers no storetest.Tamperer, so VerifyLedger's findings are not checked on it")
		})
		return
	}
	for _, c := range tamperCases {
		t.Run("LedgerTamper/"+c.name, func(t *testing.T) { runTamperCase(t, open(t), c) })
	}
}

func head(t *testing.T, s netting.Store) netting.LedgerHead {
	t.Helper()
	h, err := s.LedgerHead(ctxT(t))
	must(t, err)
	return h
}

func readChain(t *testing.T, s netting.Store) []netting.ChainedPosting {
	t.Helper()
	var out []netting.ChainedPosting
	for from := int64(0); ; {
		page, err := s.ReadPostings(ctxT(t), from, 3)
		must(t, err)
		out = append(out, page...)
		if len(page) < 3 {
			return out
		}
		from = page[len(page)-1].Seq + 1
	}
}

func verify(t *testing.T, s netting.Store) netting.LedgerProof {
	t.Helper()
	proof, err := netting.VerifyLedger(ctxT(t), s)
	if err != nil {
		t.Fatalf("VerifyLedger: %v", err)
	}
	return proof
}

func testChainEmpty(t *testing.T, s netting.SharedStore) {
	if h := head(t, s); h != (netting.LedgerHead{Hash: netting.GenesisHash}) {
		t.Errorf("head of an empty store = %+v, want length 0 at the genesis hash", h)
	}
	if page, err := s.ReadPostings(ctxT(t), 0, 10); err != nil || len(page) != 0 {
		t.Errorf("ReadPostings of an empty store = %v, %v", page, err)
	}
	if p := verify(t, s); p.Head.Len != 0 || p.Head.Hash != netting.GenesisHash || p.Accounts != 0 {
		t.Errorf("proof of an empty store = %+v", p)
	}
}

// ledgerFixture is the ledger the chain and tamper cases write: five
// postings, two with meta, over six accounts.
var ledgerFixture = []ledger.Posting{
	{ID: "fund-alice", Legs: []ledger.Leg{ledger.Credit(ledger.Spendable("alice"), 100), ledger.Debit(ledger.Revenue, 100)}},
	{ID: "fund-bob", Legs: []ledger.Leg{ledger.Credit(ledger.Spendable("bob"), 50), ledger.Debit(ledger.Revenue, 50)}, Meta: map[string]string{"reason": "grant"}},
	{ID: "buy-1", Legs: purchase("alice", "bob", 30), Meta: map[string]string{"shop": "s1", "item": "sword"}},
	{ID: "buy-2", Legs: purchase("bob", "alice", 20)},
	{ID: "buy-3", Legs: purchase("alice", "carol", 10)},
}

func postFixture(t *testing.T, s netting.Store) {
	t.Helper()
	for _, p := range ledgerFixture {
		must(t, s.Post(ctxT(t), p))
	}
}

func testChainInOrder(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	before, err := s.Now(ctx)
	must(t, err)
	postFixture(t, s)
	after, err := s.Now(ctx)
	must(t, err)
	got := readChain(t, s)
	if len(got) != len(ledgerFixture) {
		t.Fatalf("chain holds %d postings, want %d", len(got), len(ledgerFixture))
	}
	prev := netting.GenesisHash
	for i, c := range got {
		w := ledgerFixture[i]
		if c.Seq != int64(i) || c.Posting.ID != w.ID || !slices.Equal(c.Posting.Legs, w.Legs) || !maps.Equal(c.Posting.Meta, w.Meta) {
			t.Errorf("chain[%d] = seq %d %+v, want seq %d %+v", i, c.Seq, c.Posting, i, w)
		}
		if len(w.Meta) == 0 && c.Posting.Meta != nil {
			t.Errorf("chain[%d]: empty meta read back as %#v, want nil", i, c.Posting.Meta)
		}
		if c.PrevHash != prev || c.Hash != netting.PostingHash(prev, w, c.PostedAt) {
			t.Errorf("chain[%d]: prev %s hash %s, want prev %s hash %s", i, c.PrevHash, c.Hash, prev, netting.PostingHash(prev, w, c.PostedAt))
		}
		if c.PostedAt.Before(before.Add(-time.Millisecond)) || c.PostedAt.After(after.Add(time.Millisecond)) {
			t.Errorf("chain[%d] PostedAt %v not stamped by the store's clock (between %v and %v)", i, c.PostedAt, before, after)
		}
		if i > 0 && c.PostedAt.Before(got[i-1].PostedAt) {
			t.Errorf("chain[%d] posted at %v, before chain[%d] at %v", i, c.PostedAt, i-1, got[i-1].PostedAt)
		}
		prev = c.Hash
	}
	if h := head(t, s); h != (netting.LedgerHead{Len: 5, Hash: prev, Postings: 5}) {
		t.Errorf("head = %+v, want 5 postings ending at %s", h, prev)
	}
	for _, c := range []struct {
		from  int64
		limit int
		want  []int64
	}{{0, 2, []int64{0, 1}}, {2, 2, []int64{2, 3}}, {3, 10, []int64{3, 4}}, {5, 10, nil}, {99, 1, nil}} {
		page, err := s.ReadPostings(ctx, c.from, c.limit)
		must(t, err)
		var seqs []int64
		for _, p := range page {
			seqs = append(seqs, p.Seq)
		}
		if !slices.Equal(seqs, c.want) {
			t.Errorf("ReadPostings(%d, %d) = seqs %v, want %v", c.from, c.limit, seqs, c.want)
		}
	}
	if p := verify(t, s); p.Head.Len != 5 || p.Head.Hash != prev || p.Accounts != 6 {
		t.Errorf("proof = %+v, want 5 postings, 6 accounts", p)
	}
}

func testChainRepeats(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	postFixture(t, s)
	h := head(t, s)
	// A repeat of an id, with other legs or the same: no-ops.
	must(t, s.Post(ctx, ledger.Posting{ID: "buy-1", Legs: purchase("alice", "bob", 1)}))
	must(t, s.Post(ctx, ledgerFixture[0]))
	// Refusals: nothing written, nothing chained.
	for _, p := range []ledger.Posting{
		{ID: "too-much", Legs: purchase("alice", "bob", 1000)},
		{ID: "unbalanced", Legs: []ledger.Leg{ledger.Debit(ledger.Spendable("alice"), 5), ledger.Credit(ledger.Earned("bob"), 4)}},
		{ID: "", Legs: purchase("alice", "bob", 1)},
	} {
		if err := s.Post(ctx, p); !ledger.IsRefusal(err) {
			t.Errorf("post %q: %v, want a refusal", p.ID, err)
		}
	}
	if got := head(t, s); got != h {
		t.Errorf("head after repeats and refusals = %+v, want %+v (unchanged)", got, h)
	}
	// A posting whose legs net every account to zero is chained too.
	must(t, s.Post(ctx, ledger.Posting{ID: "round-trip", Legs: []ledger.Leg{ledger.Debit(ledger.Spendable("alice"), 5), ledger.Credit(ledger.Spendable("alice"), 5)}}))
	if got := head(t, s); got.Len != h.Len+1 || got.Postings != h.Postings+1 {
		t.Errorf("head after a zero-net posting = %+v, want one more than %+v", got, h)
	}
	verify(t, s)
}

func testChainFenced(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	fund(t, s, "fund", "alice", 100)
	createSession(t, s, "s", 4)
	f, err := s.ClaimSettle(ctx, "s", "settler-1", time.Minute)
	must(t, err)
	chunk := ledger.Posting{ID: "net_s_c0", Legs: []ledger.Leg{ledger.Debit(ledger.Spendable("alice"), 10), ledger.Credit(ledger.NettingClearing, 10)}}
	must(t, s.PostFenced(ctx, f, chunk))
	if _, err := s.ClaimSettle(ctx, "s", "settler-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	// The old token is fenced: nothing written, nothing chained.
	stale := ledger.Posting{ID: "net_s_c1", Legs: []ledger.Leg{ledger.Debit(ledger.Spendable("alice"), 1), ledger.Credit(ledger.NettingClearing, 1)}}
	if err := s.PostFenced(ctx, f, stale); !errors.Is(err, netting.ErrFenced) {
		t.Fatalf("stale PostFenced: %v", err)
	}
	if h := head(t, s); h.Len != 2 {
		t.Errorf("head after a fenced posting and a refused one = %+v, want 2 postings", h)
	}
	f2 := netting.Fence{SessionID: "s", Owner: "settler-1", Token: f.Token + 1}
	must(t, s.PostFencedReleasing(ctx, f2, stale, nil))
	must(t, s.PostFencedReleasing(ctx, f2, stale, nil))
	if h := head(t, s); h.Len != 3 {
		t.Errorf("head after PostFencedReleasing and its repeat = %+v, want 3 postings", h)
	}
	ids := []string{}
	for _, c := range readChain(t, s) {
		ids = append(ids, c.Posting.ID)
	}
	if !slices.Equal(ids[:2], []string{"fund", "net_s_c0"}) {
		t.Errorf("chain = %v", ids)
	}
	verify(t, s)
}

// Postings from many goroutines over disjoint accounts — nothing but the
// chain orders them — still make one chain, each posting in it once.
func testChainConcurrent(t *testing.T, s netting.SharedStore) {
	const workers, each = 8, 10
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				u := fmt.Sprintf("w%d-u%d", w, i)
				if err := s.Post(ctxT(t), ledger.Posting{ID: "fund-" + u, Legs: []ledger.Leg{
					ledger.Credit(ledger.Spendable(u), 1), ledger.Debit(fmt.Sprintf("platform:pool-%d-%d", w, i), 1)}}); err != nil {
					t.Errorf("post %s: %v", u, err)
				}
			}
		})
	}
	wg.Wait()
	p := verify(t, s)
	if p.Head.Len != workers*each {
		t.Errorf("chain holds %d postings, want %d", p.Head.Len, workers*each)
	}
	seen := map[string]bool{}
	for _, c := range readChain(t, s) {
		if seen[c.Posting.ID] {
			t.Errorf("posting %s chained twice", c.Posting.ID)
		}
		seen[c.Posting.ID] = true
	}
	if len(seen) != workers*each {
		t.Errorf("%d distinct postings chained, want %d", len(seen), workers*each)
	}
}

// VerifyLedger beside live posters never reports a break: the balances it
// reads include postings the walk has not reached, and it catches up.
func testChainVerifyLive(t *testing.T, s netting.SharedStore) {
	fund(t, s, "fund", "alice", 1000)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for i := range 60 {
			if err := s.Post(ctxT(t), ledger.Posting{ID: fmt.Sprintf("buy-%d", i), Legs: purchase("alice", fmt.Sprintf("s%d", i%7), 1)}); err != nil {
				t.Errorf("post: %v", err)
				return
			}
		}
	})
	for verifying := true; verifying; {
		select {
		case <-done:
			verifying = false
		default:
		}
		if _, err := netting.VerifyLedger(ctxT(t), s); err != nil {
			t.Errorf("VerifyLedger beside posters: %v", err)
			break
		}
	}
	wg.Wait()
	if p := verify(t, s); p.Head.Len != 61 {
		t.Errorf("final proof %+v, want 61 postings", p)
	}
}

type tamperCase struct {
	name string
	// tamper rewrites the fixture's stored ledger; chain is the chain as
	// read before.
	tamper func(ctx context.Context, tm Tamperer, chain []netting.ChainedPosting) error
	// The finding VerifyLedger must report.
	kind    string
	seq     int64
	id      string
	account string
}

// rehashed is the hash an attacker who knows PostingHash gives the
// posting c after changing it with change.
func rehashed(c netting.ChainedPosting, change func(p *ledger.Posting)) string {
	p := ledger.Posting{ID: c.Posting.ID, Legs: slices.Clone(c.Posting.Legs), Meta: maps.Clone(c.Posting.Meta)}
	change(&p)
	return netting.PostingHash(c.PrevHash, p, c.PostedAt)
}

var tamperCases = []tamperCase{
	{name: "LegAmount", kind: netting.LedgerTampered, seq: 2, id: "buy-1",
		tamper: func(ctx context.Context, tm Tamperer, _ []netting.ChainedPosting) error {
			return tm.SetLegAmount(ctx, 2, 0, 31)
		}},
	{name: "LegsRewrittenWithBalancesToMatch", kind: netting.LedgerTampered, seq: 2, id: "buy-1",
		tamper: func(ctx context.Context, tm Tamperer, _ []netting.ChainedPosting) error {
			// 30 becomes 40, and the balances are made to agree: only the
			// hash tells.
			return errors.Join(tm.SetLegAmount(ctx, 2, 0, 40), tm.SetLegAmount(ctx, 2, 1, -40),
				tm.SetBalance(ctx, ledger.Spendable("alice"), 50), tm.SetBalance(ctx, ledger.Earned("bob"), 40))
		}},
	{name: "MetaChanged", kind: netting.LedgerTampered, seq: 1, id: "fund-bob",
		tamper: func(ctx context.Context, tm Tamperer, _ []netting.ChainedPosting) error {
			return tm.SetMeta(ctx, 1, "reason", "gift")
		}},
	{name: "MetaAdded", kind: netting.LedgerTampered, seq: 0, id: "fund-alice",
		tamper: func(ctx context.Context, tm Tamperer, _ []netting.ChainedPosting) error {
			return tm.SetMeta(ctx, 0, "approved-by", "mallory")
		}},
	{name: "HashReplaced", kind: netting.LedgerTampered, seq: 3, id: "buy-2",
		tamper: func(ctx context.Context, tm Tamperer, _ []netting.ChainedPosting) error {
			return tm.SetHash(ctx, 3, netting.GenesisHash)
		}},
	{name: "RewrittenWithFreshHash", kind: netting.LedgerTampered, seq: 2, id: "buy-1",
		tamper: func(ctx context.Context, tm Tamperer, chain []netting.ChainedPosting) error {
			// The posting hashes as itself again; the next one's link
			// gives it away.
			h := rehashed(chain[2], func(p *ledger.Posting) { p.Meta["item"] = "shield" })
			return errors.Join(tm.SetMeta(ctx, 2, "item", "shield"), tm.SetHash(ctx, 2, h))
		}},
	{name: "LastRewrittenWithFreshHash", kind: netting.LedgerTampered, seq: 4, id: "buy-3",
		tamper: func(ctx context.Context, tm Tamperer, chain []netting.ChainedPosting) error {
			// No posting follows it: the head gives it away.
			h := rehashed(chain[4], func(p *ledger.Posting) { p.Meta = map[string]string{"note": "refund"} })
			return errors.Join(tm.SetMeta(ctx, 4, "note", "refund"), tm.SetHash(ctx, 4, h))
		}},
	{name: "DeletedInTheMiddle", kind: netting.LedgerMissing, seq: 2,
		tamper: func(ctx context.Context, tm Tamperer, _ []netting.ChainedPosting) error {
			return tm.DeletePosting(ctx, 2)
		}},
	{name: "DeletedAtTheEnd", kind: netting.LedgerMissing, seq: 4,
		tamper: func(ctx context.Context, tm Tamperer, _ []netting.ChainedPosting) error {
			return tm.DeletePosting(ctx, 4)
		}},
	{name: "DeletedAndRenumbered", kind: netting.LedgerTampered, seq: 1, id: "fund-bob",
		tamper: func(ctx context.Context, tm Tamperer, _ []netting.ChainedPosting) error {
			// buy-1 removed, buy-2 and buy-3 moved up: no gap, but buy-2
			// was chained after a posting that is gone.
			return errors.Join(tm.DeletePosting(ctx, 2), tm.SwapPostings(ctx, 2, 3), tm.SwapPostings(ctx, 3, 4))
		}},
	{name: "Swapped", kind: netting.LedgerReordered, seq: 2, id: "buy-2",
		tamper: func(ctx context.Context, tm Tamperer, _ []netting.ChainedPosting) error {
			return tm.SwapPostings(ctx, 2, 3)
		}},
	{name: "FirstMovedLast", kind: netting.LedgerReordered, seq: 0, id: "fund-bob",
		tamper: func(ctx context.Context, tm Tamperer, _ []netting.ChainedPosting) error {
			return errors.Join(tm.SwapPostings(ctx, 0, 1), tm.SwapPostings(ctx, 1, 2), tm.SwapPostings(ctx, 2, 3), tm.SwapPostings(ctx, 3, 4))
		}},
	{name: "Balance", kind: netting.LedgerBalanceMismatch, seq: -1, account: ledger.Earned("carol"),
		tamper: func(ctx context.Context, tm Tamperer, _ []netting.ChainedPosting) error {
			return tm.SetBalance(ctx, ledger.Earned("carol"), 11)
		}},
	{name: "BalancesStillSummingToZero", kind: netting.LedgerBalanceMismatch, seq: -1, account: ledger.Spendable("alice"),
		tamper: func(ctx context.Context, tm Tamperer, _ []netting.ChainedPosting) error {
			return errors.Join(tm.SetBalance(ctx, ledger.Spendable("alice"), 65), tm.SetBalance(ctx, ledger.Revenue, -155))
		}},
	{name: "BalanceOfAnAccountNeverPosted", kind: netting.LedgerBalanceMismatch, seq: -1, account: ledger.Spendable("mallory"),
		tamper: func(ctx context.Context, tm Tamperer, _ []netting.ChainedPosting) error {
			return tm.SetBalance(ctx, ledger.Spendable("mallory"), 5)
		}},
}

func runTamperCase(t *testing.T, s netting.Store, c tamperCase) {
	ctx := ctxT(t)
	postFixture(t, s)
	verify(t, s)
	must(t, c.tamper(ctx, s.(Tamperer), readChain(t, s)))
	_, err := netting.VerifyLedger(ctx, s)
	var brk *netting.LedgerChainBrokenError
	if !errors.As(err, &brk) {
		t.Fatalf("VerifyLedger after tampering: %v, want a *LedgerChainBrokenError", err)
	}
	if netting.Code(err) != netting.CodeLedgerChainBroken || !errors.Is(err, netting.ErrLedgerChainBroken) {
		t.Errorf("code %q, want %s", netting.Code(err), netting.CodeLedgerChainBroken)
	}
	if brk.Kind != c.kind || brk.Seq != c.seq || brk.PostingID != c.id || brk.Account != c.account {
		t.Errorf("finding %+v, want kind %s at seq %d (posting %q, account %q)", *brk, c.kind, c.seq, c.id, c.account)
	}
	t.Logf("found: %v", err)
}
