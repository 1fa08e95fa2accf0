package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// Run runs the whole contract against fresh stores from open.
func Run(t *testing.T, open func(t *testing.T) netting.Store) {
	t.Helper()
	shared := func(t *testing.T) netting.SharedStore {
		t.Helper()
		s := open(t)
		ss, ok := s.(netting.SharedStore)
		if !ok {
			t.Fatalf("store %T does not implement netting.SharedStore", s)
		}
		return ss
	}
	for _, c := range contractCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, shared(t)) })
	}
	runLedgerChain(t, open, shared)
	for _, c := range batchCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, shared(t)) })
	}
	for _, c := range settleCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, shared(t)) })
	}
	for _, c := range behaviourCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, shared(t)) })
	}
	for _, c := range spendingCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, shared(t)) })
	}
	for _, c := range unknownCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, shared(t)) })
	}
	for _, c := range refusalCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, shared(t)) })
	}
	t.Run("Properties", func(t *testing.T) { runProperties(t, shared) })
}

type contractCase struct {
	name string
	run  func(t *testing.T, s netting.SharedStore)
}

var contractCases = []contractCase{
	{"Ledger/PostAndBalance", testPostAndBalance},
	{"Ledger/PostIdempotent", testPostIdempotent},
	{"Ledger/Refusals", testPostRefusals},
	{"Ledger/ConcurrentSpendNeverOverdraws", testConcurrentSpend},
	{"Journal/AppendRead", testAppendRead},
	{"Journal/AppendAtomicKeyConflict", testAppendKeyConflict},
	{"Journal/AppendSeqConflict", testAppendSeqConflict},
	{"Journal/AppendUnknownAndSealed", testAppendUnknownAndSealed},
	{"Journal/LegsRoundTrip", testLegsRoundTrip},
	{"Session/CreateAndGet", testCreateSession},
	{"Session/ListUnsettled", testListUnsettled},
	{"Session/ClaimSettle", testClaimSettle},
	{"Session/ClaimExpiry", testClaimExpiry},
	{"Session/ConcurrentClaimsOneWinner", testConcurrentClaims},
	{"Session/FencedWrites", testFencedWrites},
	{"Session/FinishSettle", testFinishSettle},
	{"Reservations/ReserveAndRefuse", testReserve},
	{"Reservations/CurrentBalance", testReserveCurrentBalance},
	{"Reservations/ConcurrentNeverOverpromise", testConcurrentReserve},
	{"Reservations/ReleaseOnce", testReleaseOnce},
	{"Reservations/ReplacePending", testReplacePending},
	{"Store/NowAndClose", testNowAndClose},
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fund gives user amount spendable credits from platform revenue.
func fund(t *testing.T, s netting.Store, id, user string, amount int64) {
	t.Helper()
	must(t, s.Post(ctxT(t), ledger.Posting{ID: id, Legs: []ledger.Leg{
		ledger.Credit(ledger.Spendable(user), amount), ledger.Debit(ledger.Revenue, amount),
	}}))
}

func balance(t *testing.T, s netting.Store, account string) int64 {
	t.Helper()
	b, err := s.Balance(ctxT(t), account)
	must(t, err)
	return b
}

func reserved(t *testing.T, s netting.SharedStore) map[string]netting.Reserved {
	t.Helper()
	r, err := s.ReservedAll(ctxT(t))
	must(t, err)
	return r
}

func pending(t *testing.T, s netting.SharedStore, account string) int64 {
	t.Helper()
	p, err := s.Pending(ctxT(t), account)
	must(t, err)
	return p
}

func purchase(buyer, seller string, amount int64) []ledger.Leg {
	return []ledger.Leg{ledger.Debit(ledger.Spendable(buyer), amount), ledger.Credit(ledger.Earned(seller), amount)}
}

// chain builds journal rows for session from seq start after prev.
func chain(session string, start int64, prev string, keys ...string) []netting.JournalRecord {
	out := make([]netting.JournalRecord, len(keys))
	for i, k := range keys {
		legs := purchase("u-"+k, "s-"+k, int64(i+1))
		h := netting.ChainHash(prev, k, legs)
		out[i] = netting.JournalRecord{SessionID: session, Seq: start + int64(i), Key: k, Legs: legs, PrevHash: prev, Hash: h}
		prev = h
	}
	return out
}

func createSession(t *testing.T, s netting.Store, id string, width int) netting.SessionMeta {
	t.Helper()
	m, err := s.CreateSession(ctxT(t), netting.SessionMeta{ID: id, Scope: "scope-" + id, NodeID: "node-a", ChunkWidth: width})
	must(t, err)
	return m
}

func testPostAndBalance(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	fund(t, s, "fund-alice", "alice", 1000)
	must(t, s.Post(ctx, ledger.Posting{ID: "buy-1", Legs: purchase("alice", "bob", 300), Meta: map[string]string{"kind": "purchase"}}))
	if got := balance(t, s, ledger.Spendable("alice")); got != 700 {
		t.Errorf("alice spendable = %d, want 700", got)
	}
	if got := balance(t, s, ledger.Earned("bob")); got != 300 {
		t.Errorf("bob earned = %d, want 300", got)
	}
	if got := balance(t, s, ledger.Revenue); got != -1000 {
		t.Errorf("revenue = %d, want -1000 (platform accounts may go below zero)", got)
	}
	if got := balance(t, s, "nobody:spendable"); got != 0 {
		t.Errorf("untouched account = %d, want 0", got)
	}
	for _, id := range []string{"fund-alice", "buy-1"} {
		ok, err := s.HasPosting(ctx, id)
		must(t, err)
		if !ok {
			t.Errorf("HasPosting(%s) = false", id)
		}
	}
	if ok, err := s.HasPosting(ctx, "never"); err != nil || ok {
		t.Errorf("HasPosting(never) = %v, %v", ok, err)
	}
	all, err := s.Balances(ctx)
	must(t, err)
	want := map[string]int64{ledger.Spendable("alice"): 700, ledger.Earned("bob"): 300, ledger.Revenue: -1000}
	var sum int64
	for a, v := range all {
		sum += v
		if w, ok := want[a]; ok && w != v {
			t.Errorf("Balances[%s] = %d, want %d", a, v, w)
		} else if !ok && v != 0 {
			t.Errorf("Balances has unexpected %s = %d", a, v)
		}
	}
	for a := range want {
		if _, ok := all[a]; !ok {
			t.Errorf("Balances lacks %s", a)
		}
	}
	if sum != 0 {
		t.Errorf("sum of balances = %d, want 0", sum)
	}
}

func testPostIdempotent(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	fund(t, s, "fund", "alice", 100)
	fund(t, s, "fund", "alice", 100)
	// Same id, different legs: still the first posting only.
	must(t, s.Post(ctx, ledger.Posting{ID: "fund", Legs: []ledger.Leg{ledger.Credit(ledger.Spendable("alice"), 5), ledger.Debit(ledger.Revenue, 5)}}))
	if got := balance(t, s, ledger.Spendable("alice")); got != 100 {
		t.Errorf("after posting one id three times, balance = %d, want 100", got)
	}
}

func testPostRefusals(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	fund(t, s, "fund", "alice", 100)
	cases := []struct {
		name string
		p    ledger.Posting
		is   error
		code string
	}{
		{"no legs", ledger.Posting{ID: "r1"}, ledger.ErrMalformed, "OP.MALFORMED"},
		{"zero amount", ledger.Posting{ID: "r2", Legs: []ledger.Leg{{Account: "a:spendable", Amount: 0}}}, ledger.ErrMalformed, "OP.MALFORMED"},
		{"empty id", ledger.Posting{Legs: purchase("alice", "bob", 1)}, ledger.ErrMalformed, "OP.MALFORMED"},
		{"unbalanced", ledger.Posting{ID: "r3", Legs: []ledger.Leg{ledger.Debit(ledger.Spendable("alice"), 5), ledger.Credit(ledger.Earned("bob"), 4)}}, ledger.ErrUnbalanced, "LEDGER.UNBALANCED"},
		{"overdraft", ledger.Posting{ID: "r4", Legs: purchase("alice", "bob", 101)}, ledger.ErrOverdraft, "LEDGER.OVERDRAFT"},
		{"overdraft of one leg among many", ledger.Posting{ID: "r5", Legs: append(purchase("alice", "bob", 50), purchase("carol", "bob", 1)...)}, ledger.ErrOverdraft, "LEDGER.OVERDRAFT"},
	}
	for _, c := range cases {
		err := s.Post(ctx, c.p)
		if !errors.Is(err, c.is) || netting.Code(err) != c.code {
			t.Errorf("%s: err = %v (code %q), want %v (%s)", c.name, err, netting.Code(err), c.is, c.code)
		}
		if c.p.ID != "" {
			if ok, _ := s.HasPosting(ctx, c.p.ID); ok {
				t.Errorf("%s: refused posting was stored", c.name)
			}
		}
	}
	var od *ledger.Overdraft
	if err := s.Post(ctx, ledger.Posting{ID: "r6", Legs: purchase("alice", "bob", 150)}); !errors.As(err, &od) || od.Account != ledger.Spendable("alice") {
		t.Errorf("overdraft error %v does not name alice's spendable", err)
	}
	if got := balance(t, s, ledger.Spendable("alice")); got != 100 {
		t.Errorf("refusals changed alice: %d", got)
	}
	if got := balance(t, s, ledger.Earned("bob")); got != 0 {
		t.Errorf("refusals changed bob (atomicity): %d", got)
	}
	// Spending exactly to zero is allowed.
	must(t, s.Post(ctx, ledger.Posting{ID: "all-in", Legs: purchase("alice", "bob", 100)}))
	if got := balance(t, s, ledger.Spendable("alice")); got != 0 {
		t.Errorf("alice = %d, want 0", got)
	}
}

func testConcurrentSpend(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	fund(t, s, "fund", "alice", 10)
	const workers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for w := range workers {
		wg.Go(func() {
			for i := range 3 {
				err := s.Post(ctx, ledger.Posting{ID: fmt.Sprintf("spend-%d-%d", w, i), Legs: purchase("alice", "bob", 1)})
				switch {
				case err == nil:
					mu.Lock()
					ok++
					mu.Unlock()
				case !errors.Is(err, ledger.ErrOverdraft):
					t.Errorf("spend: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if ok != 10 {
		t.Errorf("%d spends of 1 succeeded against a balance of 10, want exactly 10", ok)
	}
	if got := balance(t, s, ledger.Spendable("alice")); got != 0 {
		t.Errorf("alice = %d, want 0", got)
	}
}

func testAppendRead(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	createSession(t, s, "s1", 16)
	before, err := s.Now(ctx)
	must(t, err)
	recs := chain("s1", 0, netting.GenesisHash, "k0", "k1")
	recs[0].RecordedAt = time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC) // must be ignored
	must(t, s.Append(ctx, recs))
	more := chain("s1", 2, recs[1].Hash, "k2")
	must(t, s.Append(ctx, more))
	after, err := s.Now(ctx)
	must(t, err)
	got, err := s.ReadJournal(ctx, "s1")
	must(t, err)
	if len(got) != 3 {
		t.Fatalf("journal has %d rows, want 3", len(got))
	}
	want := append(recs, more...)
	for i, r := range got {
		w := want[i]
		if r.SessionID != w.SessionID || r.Seq != w.Seq || r.Key != w.Key || r.PrevHash != w.PrevHash || r.Hash != w.Hash || fmt.Sprint(r.Legs) != fmt.Sprint(w.Legs) {
			t.Errorf("row %d = %+v, want %+v", i, r, w)
		}
		if r.RecordedAt.Before(before.Add(-time.Millisecond)) || r.RecordedAt.After(after.Add(time.Millisecond)) {
			t.Errorf("row %d RecordedAt %v not stamped by the store clock (between %v and %v)", i, r.RecordedAt, before, after)
		}
	}
	if _, err := netting.VerifyChain("s1", got); err != nil {
		t.Errorf("chain read back does not verify: %v", err)
	}
	r, ok, err := s.LookupKey(ctx, "k1")
	must(t, err)
	if !ok || r.SessionID != "s1" || r.Seq != 1 || r.Hash != recs[1].Hash {
		t.Errorf("LookupKey(k1) = %+v, %v", r, ok)
	}
	if _, ok, err := s.LookupKey(ctx, "nope"); err != nil || ok {
		t.Errorf("LookupKey(nope) = %v, %v", ok, err)
	}
	if empty, err := s.ReadJournal(ctx, "no-such-session"); err != nil || len(empty) != 0 {
		t.Errorf("ReadJournal(unknown) = %v, %v; want empty, nil", empty, err)
	}
}

func testAppendKeyConflict(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	createSession(t, s, "a", 16)
	createSession(t, s, "b", 16)
	must(t, s.Append(ctx, chain("a", 0, netting.GenesisHash, "shared-key")))
	// In another session, with a fresh key before the conflicting one: the
	// whole batch must be refused.
	batch := chain("b", 0, netting.GenesisHash, "fresh", "shared-key")
	err := s.Append(ctx, batch)
	var kc *netting.KeyConflictError
	if !errors.As(err, &kc) || !errors.Is(err, netting.ErrKeyConflict) || len(kc.Keys) != 1 || kc.Keys[0] != "shared-key" {
		t.Fatalf("append of a journaled key: %v, want KeyConflictError{[shared-key]}", err)
	}
	if got, _ := s.ReadJournal(ctx, "b"); len(got) != 0 {
		t.Errorf("refused batch left %d rows (not atomic)", len(got))
	}
	if _, ok, _ := s.LookupKey(ctx, "fresh"); ok {
		t.Errorf("refused batch left key 'fresh' behind")
	}
	// A key repeated inside one batch.
	dup := chain("b", 0, netting.GenesisHash, "x", "y")
	dup[1].Key = "x"
	if err := s.Append(ctx, dup); !errors.Is(err, netting.ErrKeyConflict) {
		t.Errorf("batch repeating a key: %v, want ErrKeyConflict", err)
	}
	if got, _ := s.ReadJournal(ctx, "b"); len(got) != 0 {
		t.Errorf("refused batch left %d rows", len(got))
	}
	must(t, s.Append(ctx, chain("b", 0, netting.GenesisHash, "fresh")))
	// Every taken key of the batch is named, wherever it sits in the batch
	// (a store that writes in chunks must not stop at the first chunk).
	must(t, s.Append(ctx, chain("a", 1, mustJournalHead(t, s, "a"), "t0", "t1", "t2")))
	wide := chain("b", 1, mustJournalHead(t, s, "b"), "t0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "t1", "f9", "t2")
	err = s.Append(ctx, wide)
	if !errors.As(err, &kc) || fmt.Sprint(sortedCopy(kc.Keys)) != "[t0 t1 t2]" {
		t.Errorf("append of 11 rows with taken keys at 0, 8 and 10: %v, want KeyConflictError{[t0 t1 t2]}", err)
	}
	if got, _ := s.ReadJournal(ctx, "b"); len(got) != 1 {
		t.Errorf("refused batch left %d rows, want the 1 from before", len(got))
	}
}

func mustJournalHead(t *testing.T, s netting.SharedStore, session string) string {
	t.Helper()
	j, err := s.ReadJournal(ctxT(t), session)
	must(t, err)
	if len(j) == 0 {
		return netting.GenesisHash
	}
	return j[len(j)-1].Hash
}

func sortedCopy(keys []string) []string {
	out := slices.Clone(keys)
	slices.Sort(out)
	return out
}

func testAppendSeqConflict(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	createSession(t, s, "s", 16)
	createSession(t, s, "t", 16)
	first := chain("s", 0, netting.GenesisHash, "a0", "a1")
	must(t, s.Append(ctx, first))
	cases := map[string][]netting.JournalRecord{
		"rewrite seq 1": chain("s", 1, first[0].Hash, "b1"),
		"gap":           chain("s", 3, first[1].Hash, "b3"),
		"start at 0":    chain("s", 0, netting.GenesisHash, "b0"),
		"non contiguous": func() []netting.JournalRecord {
			r := chain("s", 2, first[1].Hash, "c2", "c3")
			r[1].Seq = 4
			return r
		}(),
		"mixed sessions": func() []netting.JournalRecord {
			r := chain("s", 2, first[1].Hash, "d2", "d3")
			r[1].SessionID = "t"
			return r
		}(),
	}
	for name, recs := range cases {
		if err := s.Append(ctx, recs); !errors.Is(err, netting.ErrSeqConflict) {
			t.Errorf("%s: %v, want ErrSeqConflict", name, err)
		}
	}
	got, err := s.ReadJournal(ctx, "s")
	must(t, err)
	if len(got) != 2 {
		t.Errorf("journal has %d rows after refused appends, want 2", len(got))
	}
	if got, _ := s.ReadJournal(ctx, "t"); len(got) != 0 {
		t.Errorf("session t got rows from a mixed batch")
	}
}

func testAppendUnknownAndSealed(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	if err := s.Append(ctx, chain("ghost", 0, netting.GenesisHash, "g0")); !errors.Is(err, netting.ErrSessionNotFound) {
		t.Errorf("append to unknown session: %v, want ErrSessionNotFound", err)
	}
	createSession(t, s, "s", 16)
	first := chain("s", 0, netting.GenesisHash, "k0")
	must(t, s.Append(ctx, first))
	if _, err := s.ClaimSettle(ctx, "s", "settler", time.Minute); err != nil {
		t.Fatal(err)
	}
	err := s.Append(ctx, chain("s", 1, first[0].Hash, "k1"))
	if !errors.Is(err, netting.ErrSessionSettled) || netting.Code(err) != "SESSION.SETTLED" {
		t.Errorf("append after a settle claim: %v, want ErrSessionSettled", err)
	}
	if got, _ := s.ReadJournal(ctx, "s"); len(got) != 1 {
		t.Errorf("sealed journal grew to %d rows", len(got))
	}
	m, err := s.Session(ctx, "s")
	must(t, err)
	if !m.Sealed {
		t.Errorf("Session.Sealed = false after a claim")
	}
}

func testLegsRoundTrip(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	createSession(t, s, "s", 16)
	legs := []ledger.Leg{
		ledger.Debit("ünïcode:spendable", 9_000_000_000_000),
		ledger.Credit("platform:revenue", 1),
		ledger.Credit("b:earned", 8_999_999_999_999),
		ledger.Debit("a:earned", 7),
		ledger.Credit("a:earned", 7),
	}
	r := netting.JournalRecord{SessionID: "s", Seq: 0, Key: "k|with;odd:chars", Legs: legs, PrevHash: netting.GenesisHash}
	r.Hash = netting.ChainHash(r.PrevHash, r.Key, r.Legs)
	must(t, s.Append(ctx, []netting.JournalRecord{r}))
	got, err := s.ReadJournal(ctx, "s")
	must(t, err)
	if len(got) != 1 || fmt.Sprint(got[0].Legs) != fmt.Sprint(legs) || got[0].Key != r.Key {
		t.Fatalf("round trip: %+v, want legs %v", got, legs)
	}
	if _, err := netting.VerifyChain("s", got); err != nil {
		t.Errorf("verify after round trip: %v", err)
	}
}

func testCreateSession(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	before, err := s.Now(ctx)
	must(t, err)
	m := createSession(t, s, "sess:w:n-1", 5)
	if m.ID != "sess:w:n-1" || m.Scope != "scope-sess:w:n-1" || m.NodeID != "node-a" || m.ChunkWidth != 5 {
		t.Errorf("created %+v", m)
	}
	if m.OpenedAt.Before(before.Add(-time.Millisecond)) {
		t.Errorf("OpenedAt %v before store now %v", m.OpenedAt, before)
	}
	got, err := s.Session(ctx, "sess:w:n-1")
	must(t, err)
	if got.ChunkWidth != 5 || got.Scope != m.Scope || !got.OpenedAt.Equal(m.OpenedAt) || got.Settled || got.Replaying || got.Sealed {
		t.Errorf("Session = %+v, want %+v", got, m)
	}
	if _, err := s.CreateSession(ctx, netting.SessionMeta{ID: "sess:w:n-1", ChunkWidth: 3}); !errors.Is(err, netting.ErrSessionExists) {
		t.Errorf("duplicate create: %v, want ErrSessionExists", err)
	}
	if _, err := s.Session(ctx, "missing"); !errors.Is(err, netting.ErrSessionNotFound) {
		t.Errorf("Session(missing): %v, want ErrSessionNotFound", err)
	}
	if _, err := s.CreateSession(ctx, netting.SessionMeta{ID: "w0", ChunkWidth: 0}); err == nil {
		t.Errorf("chunk width 0 accepted")
	}
}

func testListUnsettled(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	createSession(t, s, "empty", 16)
	createSession(t, s, "old", 16)
	createSession(t, s, "new", 16)
	createSession(t, s, "done", 16)
	old := chain("old", 0, netting.GenesisHash, "o0")
	must(t, s.Append(ctx, old))
	waitStoreTick(t, s)
	must(t, s.Append(ctx, chain("new", 0, netting.GenesisHash, "n0", "n1")))
	waitStoreTick(t, s)
	must(t, s.Append(ctx, chain("done", 0, netting.GenesisHash, "d0")))
	f, err := s.ClaimSettle(ctx, "done", "me", time.Minute)
	must(t, err)
	must(t, s.FinishSettle(ctx, f, netting.ModeNetted))
	// "old" gets a newer row: ordering is by the last row, not the first.
	waitStoreTick(t, s)
	must(t, s.Append(ctx, chain("old", 1, old[0].Hash, "o1")))

	list, err := s.ListUnsettled(ctx, 0)
	must(t, err)
	if len(list) != 2 || list[0].ID != "new" || list[1].ID != "old" {
		t.Fatalf("ListUnsettled = %v, want [new old]", ids(list))
	}
	if list[0].Records != 2 || list[1].Records != 2 {
		t.Errorf("Records = %d, %d, want 2, 2", list[0].Records, list[1].Records)
	}
	jr, _ := s.ReadJournal(ctx, "old")
	if !list[1].LastRecordedAt.Equal(jr[1].RecordedAt) {
		t.Errorf("LastRecordedAt = %v, want %v", list[1].LastRecordedAt, jr[1].RecordedAt)
	}
	if list[0].ChunkWidth != 16 || list[0].Scope != "scope-new" || list[0].Released {
		t.Errorf("entry = %+v", list[0])
	}
	lim, err := s.ListUnsettled(ctx, 1)
	must(t, err)
	if len(lim) != 1 || lim[0].ID != "new" {
		t.Errorf("ListUnsettled(1) = %v, want [new]", ids(lim))
	}
	// Released shows a crash between ReleaseSession and FinishSettle.
	f2, err := s.ClaimSettle(ctx, "new", "me", time.Minute)
	must(t, err)
	if _, err := s.ReleaseSession(ctx, f2, nil); err != nil {
		t.Fatal(err)
	}
	list, err = s.ListUnsettled(ctx, 0)
	must(t, err)
	if len(list) != 2 || !list[0].Released || list[1].Released || !list[0].Sealed {
		t.Errorf("after release: %+v", list)
	}
}

func ids(l []netting.UnsettledSession) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = s.ID
	}
	return out
}

// waitStoreTick polls the store's clock until it has moved past its current
// reading, so rows appended after it carry a strictly later timestamp.
func waitStoreTick(t *testing.T, s netting.Store) time.Time {
	t.Helper()
	return waitStoreAfter(t, s, mustNow(t, s))
}

func mustNow(t *testing.T, s netting.Store) time.Time {
	t.Helper()
	n, err := s.Now(ctxT(t))
	must(t, err)
	return n
}

func waitStoreAfter(t *testing.T, s netting.Store, at time.Time) time.Time {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := mustNow(t, s)
		if n.After(at) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("store clock stuck at %v", n)
		}
	}
}

func testClaimSettle(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	if _, err := s.ClaimSettle(ctx, "missing", "a", time.Minute); !errors.Is(err, netting.ErrSessionNotFound) {
		t.Errorf("claim of unknown session: %v", err)
	}
	createSession(t, s, "s", 16)
	f1, err := s.ClaimSettle(ctx, "s", "node-a/1", time.Hour)
	must(t, err)
	if f1.Token < 1 || f1.SessionID != "s" || f1.Owner != "node-a/1" {
		t.Errorf("fence = %+v", f1)
	}
	_, err = s.ClaimSettle(ctx, "s", "node-b/1", time.Hour)
	var held *netting.ClaimHeldError
	if !errors.As(err, &held) || !errors.Is(err, netting.ErrSettleClaimed) || held.Owner != "node-a/1" {
		t.Fatalf("second owner's claim: %v, want ClaimHeldError naming node-a/1", err)
	}
	// The holder may claim again; the token grows and fences the old one.
	f2, err := s.ClaimSettle(ctx, "s", "node-a/1", time.Hour)
	must(t, err)
	if f2.Token <= f1.Token {
		t.Errorf("re-claim token %d not above %d", f2.Token, f1.Token)
	}
	if err := s.MarkReplaying(ctx, f1); !errors.Is(err, netting.ErrFenced) {
		t.Errorf("write with superseded token: %v, want ErrFenced", err)
	}
}

func testClaimExpiry(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	createSession(t, s, "s", 16)
	fund(t, s, "fund", "alice", 100)
	f1, err := s.ClaimSettle(ctx, "s", "dead-node", time.Millisecond)
	must(t, err)
	waitStoreAfter(t, s, mustNow(t, s).Add(2*time.Millisecond))
	f2, err := s.ClaimSettle(ctx, "s", "sweeper", time.Minute)
	must(t, err)
	if f2.Token <= f1.Token {
		t.Fatalf("takeover token %d not above %d", f2.Token, f1.Token)
	}
	// The dead node wakes up: every settle write it attempts is fenced.
	err = s.PostFenced(ctx, f1, ledger.Posting{ID: "late", Legs: purchase("alice", "bob", 1)})
	var fe *netting.FencedError
	if !errors.As(err, &fe) || fe.Token != f1.Token || fe.Current != f2.Token || netting.Code(err) != "SETTLE.FENCED" {
		t.Errorf("stale PostFenced: %v, want FencedError{%d, %d}", err, f1.Token, f2.Token)
	}
	if ok, _ := s.HasPosting(ctx, "late"); ok {
		t.Errorf("fenced posting was written")
	}
	if _, err := s.ReleaseSession(ctx, f1, nil); !errors.Is(err, netting.ErrFenced) {
		t.Errorf("stale ReleaseSession: %v", err)
	}
	if err := s.FinishSettle(ctx, f1, netting.ModeNetted); !errors.Is(err, netting.ErrFenced) {
		t.Errorf("stale FinishSettle: %v", err)
	}
	must(t, s.PostFenced(ctx, f2, ledger.Posting{ID: "live", Legs: purchase("alice", "bob", 1)}))
}

func testConcurrentClaims(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	createSession(t, s, "s", 16)
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var wins []netting.Fence
	for i := range n {
		wg.Go(func() {
			f, err := s.ClaimSettle(ctx, "s", fmt.Sprintf("owner-%d", i), time.Hour)
			switch {
			case err == nil:
				mu.Lock()
				wins = append(wins, f)
				mu.Unlock()
			case !errors.Is(err, netting.ErrSettleClaimed):
				t.Errorf("claim %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("%d concurrent claims won, want exactly 1: %+v", len(wins), wins)
	}
}

func testFencedWrites(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	createSession(t, s, "s", 16)
	fund(t, s, "fund", "alice", 10)
	f, err := s.ClaimSettle(ctx, "s", "me", time.Hour)
	must(t, err)
	must(t, s.PostFenced(ctx, f, ledger.Posting{ID: "p1", Legs: purchase("alice", "bob", 4)}))
	must(t, s.PostFenced(ctx, f, ledger.Posting{ID: "p1", Legs: purchase("alice", "bob", 4)})) // idempotent
	if got := balance(t, s, ledger.Spendable("alice")); got != 6 {
		t.Errorf("alice = %d, want 6", got)
	}
	if err := s.PostFenced(ctx, f, ledger.Posting{ID: "p2", Legs: purchase("alice", "bob", 7)}); !errors.Is(err, ledger.ErrOverdraft) {
		t.Errorf("fenced overdraft: %v, want ErrOverdraft", err)
	}
	if err := s.PostFenced(ctx, netting.Fence{SessionID: "s", Owner: "me", Token: f.Token + 1}, ledger.Posting{ID: "p3", Legs: purchase("alice", "bob", 1)}); !errors.Is(err, netting.ErrFenced) {
		t.Errorf("future token: %v, want ErrFenced", err)
	}
	if err := s.PostFenced(ctx, netting.Fence{SessionID: "other", Token: 1}, ledger.Posting{ID: "p4", Legs: purchase("alice", "bob", 1)}); err == nil {
		t.Errorf("fence of an unknown session accepted")
	}
	must(t, s.MarkReplaying(ctx, f))
	must(t, s.MarkReplaying(ctx, f))
	m, err := s.Session(ctx, "s")
	must(t, err)
	if !m.Replaying {
		t.Errorf("Replaying not stored")
	}
}

func testFinishSettle(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	createSession(t, s, "s", 16)
	must(t, s.Append(ctx, chain("s", 0, netting.GenesisHash, "k")))
	f, err := s.ClaimSettle(ctx, "s", "me", time.Hour)
	must(t, err)
	must(t, s.FinishSettle(ctx, f, netting.ModeReplayed))
	m, err := s.Session(ctx, "s")
	must(t, err)
	if !m.Settled || m.SettleMode != netting.ModeReplayed || m.SettledAt.IsZero() {
		t.Errorf("after FinishSettle: %+v", m)
	}
	must(t, s.FinishSettle(ctx, f, netting.ModeNetted)) // no change, no error
	m, _ = s.Session(ctx, "s")
	if m.SettleMode != netting.ModeReplayed {
		t.Errorf("second FinishSettle changed the mode to %s", m.SettleMode)
	}
	if l, _ := s.ListUnsettled(ctx, 0); len(l) != 0 {
		t.Errorf("settled session still listed: %v", ids(l))
	}
	// The claim ended with the settle: another settler may claim (and will
	// find the session settled).
	f2, err := s.ClaimSettle(ctx, "s", "other", time.Hour)
	must(t, err)
	if f2.Token <= f.Token {
		t.Errorf("token did not grow")
	}
}

func deltas(legs ...ledger.Leg) []ledger.AccountDelta {
	var out []ledger.AccountDelta
	for _, d := range ledger.NetDeltas(legs) {
		if ledger.IsWallet(d.Account) && d.Delta != 0 {
			out = append(out, d)
		}
	}
	return out
}

func testReserve(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	fund(t, s, "fa", "alice", 100)
	fund(t, s, "fc", "carol", 5)
	reqs := [][]ledger.AccountDelta{
		deltas(purchase("alice", "bob", 60)...),
		deltas(purchase("alice", "bob", 50)...), // 100 - 60 - 50 < 0: refused
		deltas(purchase("alice", "bob", 40)...), // exactly to zero: granted
		// dave has nothing: refused at its first leg.
		deltas(purchase("dave", "bob", 1)...),
		// Two spends; the second fails, so the first (carol) must be undone.
		{{Account: ledger.Spendable("carol"), Delta: -5}, {Account: ledger.Spendable("alice"), Delta: -1}},
	}
	granted, err := s.Reserve(ctx, reqs)
	must(t, err)
	want := []bool{true, false, true, false, false}
	if fmt.Sprint(granted) != fmt.Sprint(want) {
		t.Fatalf("granted = %v, want %v", granted, want)
	}
	if got := pending(t, s, ledger.Spendable("alice")); got != -100 {
		t.Errorf("alice pending = %d, want -100", got)
	}
	if got := pending(t, s, ledger.Earned("bob")); got != 100 {
		t.Errorf("bob pending = %d, want +100 (credits are reserved too)", got)
	}
	if r := reserved(t, s); r[ledger.Spendable("alice")] != (netting.Reserved{Debits: -100}) || r[ledger.Earned("bob")] != (netting.Reserved{Credits: 100}) {
		t.Errorf("ReservedAll = %v, want alice's debits and bob's credits each on its side", r)
	}
	if got := pending(t, s, ledger.Spendable("carol")); got != 0 {
		t.Errorf("carol pending = %d, want 0 (undone when alice's leg failed)", got)
	}
	if got := pending(t, s, ledger.Spendable("dave")); got != 0 {
		t.Errorf("dave pending = %d, want 0", got)
	}
	all, err := s.PendingAll(ctx)
	must(t, err)
	if len(all) != 2 || all[ledger.Spendable("alice")] != -100 || all[ledger.Earned("bob")] != 100 {
		t.Errorf("PendingAll = %v", all)
	}
	must(t, s.Unreserve(ctx, reqs[2]))
	if got := pending(t, s, ledger.Spendable("alice")); got != -60 {
		t.Errorf("after Unreserve alice pending = %d, want -60", got)
	}
	if g, err := s.Reserve(ctx, nil); err != nil || len(g) != 0 {
		t.Errorf("Reserve(nil) = %v, %v", g, err)
	}
	// A movement between platform accounts reserves nothing and is granted.
	if g, err := s.Reserve(ctx, [][]ledger.AccountDelta{{}, nil}); err != nil || fmt.Sprint(g) != "[true true]" {
		t.Errorf("Reserve of empty requests = %v, %v; want [true true]", g, err)
	}
}

// testReserveCurrentBalance is "no stale headroom": the check reads the
// balance as it is now, not as it was when the account was first touched.
func testReserveCurrentBalance(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	fund(t, s, "fa", "alice", 100)
	g, err := s.Reserve(ctx, [][]ledger.AccountDelta{deltas(purchase("alice", "bob", 10)...)})
	must(t, err)
	if !g[0] {
		t.Fatal("first reservation refused")
	}
	// Alice spends 80 directly on the ledger (another product, a settle).
	must(t, s.Post(ctx, ledger.Posting{ID: "direct", Legs: purchase("alice", "zed", 80)}))
	// Headroom is now 100-80-10 = 10: 20 must be refused, 10 granted.
	g, err = s.Reserve(ctx, [][]ledger.AccountDelta{deltas(purchase("alice", "bob", 20)...), deltas(purchase("alice", "bob", 10)...)})
	must(t, err)
	if g[0] || !g[1] {
		t.Errorf("granted = %v, want [false true] against the current balance", g)
	}
	// And credits arriving on the ledger raise headroom at once.
	fund(t, s, "fa2", "alice", 50)
	g, err = s.Reserve(ctx, [][]ledger.AccountDelta{deltas(purchase("alice", "bob", 50)...)})
	must(t, err)
	if !g[0] {
		t.Errorf("reservation refused after a fresh credit")
	}
}

func testConcurrentReserve(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	fund(t, s, "fa", "alice", 20)
	const workers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range workers {
		wg.Go(func() {
			for range 5 {
				g, err := s.Reserve(ctx, [][]ledger.AccountDelta{deltas(purchase("alice", "bob", 1)...)})
				if err != nil {
					t.Errorf("reserve: %v", err)
					return
				}
				if g[0] {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if ok != 20 {
		t.Errorf("%d reservations of 1 granted against 20 credits, want exactly 20", ok)
	}
	if got := pending(t, s, ledger.Spendable("alice")); got != -20 {
		t.Errorf("pending = %d, want -20", got)
	}
}

func testReleaseOnce(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	fund(t, s, "fa", "alice", 100)
	createSession(t, s, "s", 16)
	d := deltas(purchase("alice", "bob", 30)...)
	g, err := s.Reserve(ctx, [][]ledger.AccountDelta{d})
	must(t, err)
	if !g[0] {
		t.Fatal("refused")
	}
	f, err := s.ClaimSettle(ctx, "s", "me", time.Hour)
	must(t, err)
	released, err := s.ReleaseSession(ctx, f, d)
	must(t, err)
	if !released {
		t.Fatal("first release returned false")
	}
	released, err = s.ReleaseSession(ctx, f, d)
	must(t, err)
	if released {
		t.Error("second release returned true")
	}
	// Even a newer claim (a sweeper finishing a crashed settle) cannot
	// release twice.
	must(t, s.FinishSettle(ctx, f, netting.ModeNetted))
	f2, err := s.ClaimSettle(ctx, "s", "sweeper", time.Hour)
	must(t, err)
	if released, err := s.ReleaseSession(ctx, f2, d); err != nil || released {
		t.Errorf("release under a new claim = %v, %v; want false, nil", released, err)
	}
	if got := pending(t, s, ledger.Spendable("alice")); got != 0 {
		t.Errorf("alice pending = %d, want 0 after exactly one release", got)
	}
	if got := pending(t, s, ledger.Earned("bob")); got != 0 {
		t.Errorf("bob pending = %d, want 0", got)
	}
}

func testReplacePending(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	fund(t, s, "fa", "alice", 100)
	_, err := s.Reserve(ctx, [][]ledger.AccountDelta{deltas(purchase("alice", "bob", 30)...)})
	must(t, err)
	adjusted, err := s.ReplacePending(ctx, map[string]netting.Reserved{ledger.Spendable("alice"): {Debits: -30}, ledger.Spendable("carol"): {Debits: -9, Credits: 4}})
	must(t, err)
	// alice unchanged, bob 30 -> 0, carol 0 -> -9/+4.
	if adjusted != 2 {
		t.Errorf("adjusted = %d, want 2", adjusted)
	}
	all, err := s.PendingAll(ctx)
	must(t, err)
	if len(all) != 2 || all[ledger.Spendable("alice")] != -30 || all[ledger.Spendable("carol")] != -5 {
		t.Errorf("PendingAll = %v", all)
	}
	if r := reserved(t, s); len(r) != 2 || r[ledger.Spendable("carol")] != (netting.Reserved{Debits: -9, Credits: 4}) {
		t.Errorf("ReservedAll = %v, want carol's two sides as replaced", r)
	}
	adjusted, err = s.ReplacePending(ctx, nil)
	must(t, err)
	if adjusted != 2 {
		t.Errorf("clearing adjusted %d, want 2", adjusted)
	}
	if all, _ := s.PendingAll(ctx); len(all) != 0 {
		t.Errorf("after clearing: %v", all)
	}
}

func testNowAndClose(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	a := mustNow(t, s)
	b := waitStoreAfter(t, s, a)
	if !b.After(a) {
		t.Errorf("store clock went from %v to %v", a, b)
	}
	must(t, s.Close())
	must(t, s.Close())
	if _, err := s.Balance(ctx, "x"); err == nil {
		t.Errorf("Balance after Close succeeded")
	}
}
