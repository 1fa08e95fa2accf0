package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// behaviourCases are the netting behaviours of the netting specification
// (restated from seed 000), one test per claim, run through real
// ClusterNodes on the store under test.
var behaviourCases = []contractCase{
	{"Netting/RecordValidation", testRecordValidation},
	{"Netting/IdempotentKeys", testIdempotentKeys},
	{"Netting/SeqAndHashChain", testSeqAndChain},
	{"Netting/GroupCommit", testGroupCommit},
	{"Netting/ConcurrentRecords", testConcurrentRecords},
	{"Netting/SettleNetted", testSettleNetted},
	{"Netting/SettleChunksWithClearing", testSettleChunks},
	{"Netting/SettleEmptyJournal", testSettleEmpty},
	{"Netting/CompensateThenReplay", testCompensateReplay},
	{"Netting/SharedReservationsAcrossNodes", testSharedReservations},
	{"Netting/EpochRotationBySize", testRotationBySize},
	{"Netting/RecoverRestoresOutcomes", testRecover},
	{"Netting/ChainBroken", testChainBroken},
	{"Netting/SettleReadsJournalOnce", testSettleReadsOnce},
	{"Netting/Ownership", testOwnership},
	{"Netting/SweepAgesAndBound", testSweepBound},
	{"Netting/Reconcile", testReconcile},
	{"Ours1/AcceptedMeansDurable", testOursDurable},
	{"Ours2/FencedConcurrentSettles", testOursFenced},
	{"Ours2/ConcurrentSettlesRace", testOursFencedRace},
	{"Ours3/HalfSettledFinished", testOursHalfSettled},
	{"Ours4/NoStaleHeadroom", testOursNoStaleHeadroom},
	{"Ours5/SweepAgesOnTheStoreClock", testOursOneClock},
	{"Ours6/StoredChunkWidth", testOursChunkWidth},
	{"Ours7/ReplayRemembered", testOursReplayRemembered},
}

var threeNodes = []string{"econ-1", "econ-2", "econ-3"}

func buy(buyer, seller string, amount int64) []ledger.Leg { return purchase(buyer, seller, amount) }

func testRecordValidation(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	ctx := ctxT(t)
	cases := []struct {
		name string
		m    netting.Movement
		code string
	}{
		{"no legs", netting.Movement{Key: "k1"}, "OP.MALFORMED"},
		{"zero leg", netting.Movement{Key: "k2", Legs: []ledger.Leg{{Account: "a:spendable", Amount: 0}}}, "OP.MALFORMED"},
		{"empty key", netting.Movement{Legs: buy("a", "b", 1)}, "OP.MALFORMED"},
		{"unbalanced", netting.Movement{Key: "k3", Legs: []ledger.Leg{ledger.Debit("a:spendable", 2), ledger.Credit("b:earned", 1)}}, "LEDGER.UNBALANCED"},
	}
	for _, cs := range cases {
		out, err := sess.Record(ctx, cs.m)
		if netting.Code(err) != cs.code || out.Status != 0 {
			t.Errorf("%s: (%+v, %v), want error %s", cs.name, out, err, cs.code)
		}
	}
	if j, _ := s.ReadJournal(ctx, sess.ID()); len(j) != 0 {
		t.Errorf("invalid movements journaled: %d rows", len(j))
	}
	if p, _ := s.PendingAll(ctx); len(p) != 0 {
		t.Errorf("invalid movements reserved: %v", p)
	}
}

func testIdempotentKeys(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "alice", 100)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	first := accept(t, sess, "buy-1", buy("alice", "bob", 10)...)
	again := record(t, sess, "buy-1", buy("alice", "bob", 10)...)
	if again.Status != netting.Accepted || again.Seq != first {
		t.Errorf("repeat: %+v, want accepted seq %d", again, first)
	}
	// The key decides, not the legs: a repeat answers the key's outcome
	// even with legs that would not validate now.
	if again, err := sess.Record(ctxT(t), netting.Movement{Key: "buy-1"}); err != nil || again.Status != netting.Accepted || again.Seq != first {
		t.Errorf("repeat without legs: %+v, %v; want accepted seq %d", again, err, first)
	}
	rej := record(t, sess, "too-much", buy("alice", "bob", 1000)...)
	if rej.Status != netting.Rejected || rej.Reason != netting.ReasonInsufficientFunds {
		t.Fatalf("overspend: %+v", rej)
	}
	fund(t, s, "f2", "alice", 5000)
	if again := record(t, sess, "too-much", buy("alice", "bob", 1000)...); again.Status != netting.Rejected {
		t.Errorf("a rejected key answered %+v the second time, want the earlier rejection", again)
	}
	// Concurrent duplicates of one new key: one row.
	var wg sync.WaitGroup
	outs := make([]netting.Outcome, 8)
	for i := range outs {
		wg.Go(func() {
			o, err := sess.Record(ctxT(t), netting.Movement{Key: "dup", Legs: buy("alice", "bob", 1)})
			if err != nil {
				t.Errorf("dup: %v", err)
			}
			outs[i] = o
		})
	}
	wg.Wait()
	for _, o := range outs {
		if o != outs[0] || o.Status != netting.Accepted {
			t.Errorf("concurrent duplicates answered differently: %+v", outs)
			break
		}
	}
	j, err := s.ReadJournal(ctxT(t), sess.ID())
	must(t, err)
	if len(j) != 2 {
		t.Errorf("journal has %d rows, want 2 (buy-1, dup)", len(j))
	}
	if p := pending(t, s, ledger.Spendable("alice")); p != -11 {
		t.Errorf("alice pending = %d, want -11 (each key reserved once)", p)
	}
	// A key journaled by an earlier epoch answers with that epoch's outcome
	// and is not journaled again.
	settle(t, sess)
	next := c.open("econ-1", c.scopeOf("econ-1", 0))
	old := record(t, next, "buy-1", buy("alice", "bob", 10)...)
	if old.Status != netting.Accepted || old.Seq != first {
		t.Errorf("key from a settled epoch: %+v, want accepted seq %d", old, first)
	}
	if j, _ := s.ReadJournal(ctxT(t), next.ID()); len(j) != 0 {
		t.Errorf("old key journaled again in the new epoch")
	}
	if p := pending(t, s, ledger.Spendable("alice")); p != 0 {
		t.Errorf("pending after the conflict = %d, want 0 (reservation undone)", p)
	}
}

func testSeqAndChain(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "alice", 100)
	sess := c.open("econ-2", c.scopeOf("econ-2", 0))
	for i := range 5 {
		if seq := accept(t, sess, fmt.Sprintf("k%d", i), buy("alice", "bob", 1)...); seq != int64(i) {
			t.Errorf("seq = %d, want %d", seq, i)
		}
	}
	j, err := s.ReadJournal(ctxT(t), sess.ID())
	must(t, err)
	prev := netting.GenesisHash
	for i, r := range j {
		if r.PrevHash != prev {
			t.Errorf("row %d prevHash %s, want %s", i, r.PrevHash, prev)
		}
		// The hash is over "prevHash|key|account:CREDIT:amount;…".
		want := sha256Hex(fmt.Sprintf("%s|k%d|alice:spendable:CREDIT:1;bob:earned:CREDIT:-1", prev, i))
		if r.Hash != want {
			t.Errorf("row %d hash %s, want %s", i, r.Hash, want)
		}
		prev = r.Hash
	}
	if netting.GenesisHash != "0000000000000000000000000000000000000000000000000000000000000000" {
		t.Errorf("genesis = %s", netting.GenesisHash)
	}
	rep := settle(t, sess)
	if rep.JournalHead != prev || rep.Netted != 5 {
		t.Errorf("report head %s netted %d, want %s 5", rep.JournalHead, rep.Netted, prev)
	}
}

func testGroupCommit(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "alice", 1000)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	c.store.setAppendHook(func([]netting.JournalRecord) error {
		once.Do(func() {
			close(entered)
			<-release
		})
		return nil
	})
	const n = 20
	var wg sync.WaitGroup
	results := make([]netting.Outcome, n)
	wg.Go(func() { results[0] = record(t, sess, "g0", buy("alice", "bob", 1)...) })
	<-entered
	// The first append is in flight; these queue behind it.
	for i := 1; i < n; i++ {
		wg.Go(func() { results[i] = record(t, sess, fmt.Sprintf("g%d", i), buy("alice", "bob", 1)...) })
	}
	pollUntil(t, "all records queued", func() bool { return sess.Waiting() == n })
	close(release)
	wg.Wait()
	if got := c.store.appends.Load(); got != 2 {
		t.Errorf("%d appends for %d concurrent records, want 2 (one group commit behind the first)", got, n)
	}
	if got := c.store.reserves.Load(); got != 2 {
		t.Errorf("%d reserve calls, want 2", got)
	}
	seqs := map[int64]bool{}
	for _, r := range results {
		if r.Status != netting.Accepted || seqs[r.Seq] {
			t.Fatalf("results %+v", results)
		}
		seqs[r.Seq] = true
	}
	j, err := s.ReadJournal(ctxT(t), sess.ID())
	must(t, err)
	if len(j) != n {
		t.Errorf("journal rows = %d, want %d", len(j), n)
	}
	if err := sess.Flush(ctxT(t)); err != nil {
		t.Error(err)
	}
}

func testSettleNetted(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f1", "v1", 1000)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	for i := range 10 {
		accept(t, sess, fmt.Sprintf("buy_%d", i), buy("v1", "c1", 10)...)
	}
	rep := settle(t, sess)
	if rep.Mode != netting.ModeNetted || rep.Netted != 10 || rep.Postings != 1 || len(rep.Rejected) != 0 || rep.AlreadySettled {
		t.Errorf("report %+v, want netted 10 movements in 1 posting", rep)
	}
	if b := balance(t, s, ledger.Spendable("v1")); b != 900 {
		t.Errorf("v1 = %d, want 900", b)
	}
	if b := balance(t, s, ledger.Earned("c1")); b != 100 {
		t.Errorf("c1 = %d, want 100", b)
	}
	if !has(t, s, "net_"+sess.ID()+"_c0") {
		t.Errorf("chunk posting net_%s_c0 missing", sess.ID())
	}
	if !sess.WasSettled() {
		t.Error("WasSettled = false")
	}
	checkMoney(t, s, true)
	_, err := sess.Record(ctxT(t), netting.Movement{Key: "late", Legs: buy("v1", "c1", 1)})
	if !errors.Is(err, netting.ErrSessionSettled) || netting.Code(err) != "SESSION.SETTLED" {
		t.Errorf("record after settle: %v, want SESSION.SETTLED", err)
	}
	before, _ := s.Balances(ctxT(t))
	again := settle(t, sess)
	if !again.AlreadySettled || again.Mode != rep.Mode || again.Postings != rep.Postings {
		t.Errorf("second settle %+v", again)
	}
	after, _ := s.Balances(ctxT(t))
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("second settle moved money: %v -> %v", before, after)
	}
	// A different object (another node recovering it) settles nothing either.
	rec, err := c.nodes["econ-2"].Recover(ctxT(t), sess.ID())
	must(t, err)
	if !rec.WasSettled() {
		t.Errorf("recovered settled session: WasSettled false")
	}
	r3 := settle(t, rec)
	if !r3.AlreadySettled || r3.Mode != netting.ModeNetted || r3.Postings != 1 || r3.JournalHead != rep.JournalHead {
		t.Errorf("settle of recovered settled session: %+v", r3)
	}
	after2, _ := s.Balances(ctxT(t))
	if fmt.Sprint(before) != fmt.Sprint(after2) {
		t.Errorf("settle of recovered session moved money")
	}
}

func testSettleChunks(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, func(cfg *netting.ClusterConfig) { cfg.ChunkWidth = 2 })
	for i := range 3 {
		fund(t, s, fmt.Sprintf("f%d", i), fmt.Sprintf("b%d", i), 100)
	}
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	if sess.ChunkWidth() != 2 {
		t.Fatalf("chunk width %d", sess.ChunkWidth())
	}
	// Five positions: b0, s0, b1, b2, s1 (s0 nets to zero and is dropped).
	accept(t, sess, "m0", buy("b0", "s0", 10)...)
	accept(t, sess, "m1", buy("b1", "s0", 5)...)
	accept(t, sess, "m2", ledger.Debit(ledger.Earned("s0"), 15), ledger.Credit(ledger.Earned("s1"), 15))
	accept(t, sess, "m3", buy("b2", "s1", 7)...)
	rep := settle(t, sess)
	// Positions: b0 +10, b1 +5, s1 −22, b2 +7 (s0 nets to 0) → 2 chunks.
	if rep.Postings != 2 || rep.Mode != netting.ModeNetted {
		t.Fatalf("report %+v, want 2 chunk postings", rep)
	}
	for i := range 2 {
		if !has(t, s, fmt.Sprintf("net_%s_c%d", sess.ID(), i)) {
			t.Errorf("chunk %d missing", i)
		}
	}
	if has(t, s, fmt.Sprintf("net_%s_c2", sess.ID())) {
		t.Errorf("a third chunk was posted")
	}
	want := map[string]int64{
		ledger.Spendable("b0"): 90, ledger.Spendable("b1"): 95, ledger.Spendable("b2"): 93,
		ledger.Earned("s0"): 0, ledger.Earned("s1"): 22,
	}
	for a, w := range want {
		if b := balance(t, s, a); b != w {
			t.Errorf("%s = %d, want %d", a, b, w)
		}
	}
	checkMoney(t, s, true)
}

func testSettleEmpty(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "alice", 10)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	rep := settle(t, sess)
	if rep.Mode != netting.ModeNetted || rep.Postings != 0 || rep.Netted != 0 || rep.JournalHead != netting.GenesisHash {
		t.Errorf("empty settle report %+v", rep)
	}
	if sess.WasSettled() {
		t.Errorf("empty session marked settled")
	}
	m, err := s.Session(ctxT(t), sess.ID())
	must(t, err)
	if m.Settled {
		t.Errorf("empty session settled in the store")
	}
	// Still open.
	accept(t, sess, "after-empty-settle", buy("alice", "bob", 1)...)
	settle(t, sess)
	checkMoney(t, s, true)
}

// overdraftAfterAccept makes alice's accepted spend unpostable: her credits
// leave through a direct ledger posting (outside any session) after the
// session accepted against them.
func testCompensateReplay(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, func(cfg *netting.ClusterConfig) { cfg.ChunkWidth = 2 })
	fund(t, s, "fa", "alice", 100)
	fund(t, s, "fz", "zed", 100)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	// Positions in first-touch order: zed, yan | alice, bob.
	accept(t, sess, "z1", buy("zed", "yan", 30)...)
	accept(t, sess, "a1", buy("alice", "bob", 40)...)
	accept(t, sess, "a2", buy("alice", "bob", 50)...)
	must(t, s.Post(ctxT(t), ledger.Posting{ID: "outside", Legs: buy("alice", "shop", 60)}))
	rep := settle(t, sess)
	if rep.Mode != netting.ModeReplayed {
		t.Fatalf("mode %s, want replayed", rep.Mode)
	}
	id := sess.ID()
	if !has(t, s, "net_"+id+"_c0") || !has(t, s, "net_"+id+"_c0_comp") {
		t.Errorf("chunk 0 was not posted and compensated")
	}
	if has(t, s, "net_"+id+"_c1") {
		t.Errorf("the refused chunk exists")
	}
	// alice has 40 left: a1 (40) replays, a2 (50) is refused.
	if !has(t, s, "mv_"+id+"_0") || !has(t, s, "mv_"+id+"_1") || has(t, s, "mv_"+id+"_2") {
		t.Errorf("replay postings wrong")
	}
	if len(rep.Rejected) != 1 || rep.Rejected[0].Key != "a2" || rep.Rejected[0].Code != "LEDGER.OVERDRAFT" {
		t.Errorf("rejected = %+v, want [{a2 LEDGER.OVERDRAFT}]", rep.Rejected)
	}
	if rep.Postings != 3 || rep.Netted != 3 {
		t.Errorf("report %+v, want 3 postings (1 compensation + 2 replays)", rep)
	}
	want := map[string]int64{ledger.Spendable("zed"): 70, ledger.Earned("yan"): 30, ledger.Spendable("alice"): 0, ledger.Earned("bob"): 40}
	for a, w := range want {
		if b := balance(t, s, a); b != w {
			t.Errorf("%s = %d, want %d", a, b, w)
		}
	}
	checkMoney(t, s, true)
	m, _ := s.Session(ctxT(t), id)
	if !m.Settled || m.SettleMode != netting.ModeReplayed || !m.Replaying {
		t.Errorf("stored meta %+v", m)
	}
}

func testSharedReservations(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "alice", 100)
	a := c.open("econ-1", c.scopeOf("econ-1", 0))
	b := c.open("econ-2", c.scopeOf("econ-2", 0))
	accept(t, a, "on-node-1", buy("alice", "bob", 70)...)
	out := record(t, b, "on-node-2", buy("alice", "carol", 70)...)
	if out.Status != netting.Rejected || out.Reason != netting.ReasonInsufficientFunds {
		t.Errorf("second node promised the same credits: %+v", out)
	}
	accept(t, b, "rest", buy("alice", "carol", 30)...)
	if p := pending(t, s, ledger.Spendable("alice")); p != -100 {
		t.Errorf("pending = %d, want -100", p)
	}
	settle(t, a)
	if p := pending(t, s, ledger.Spendable("alice")); p != -30 {
		t.Errorf("pending after one settle = %d, want -30", p)
	}
	settle(t, b)
	checkMoney(t, s, true)
}

func testRotationBySize(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, func(cfg *netting.ClusterConfig) { cfg.MaxMovements = 3 })
	fund(t, s, "f", "alice", 100)
	n := c.nodes["econ-1"]
	scope := c.scopeOf("econ-1", 0)
	for i := range 7 {
		out, err := n.Record(ctxT(t), scope, netting.Movement{Key: fmt.Sprintf("r%d", i), Legs: buy("alice", "bob", 1)})
		must(t, err)
		if out.Status != netting.Accepted || out.Seq != int64(i%3) {
			t.Errorf("record %d: %+v, want seq %d", i, out, i%3)
		}
	}
	if _, err := n.SettleAll(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	u, err := s.ListUnsettled(ctxT(t), 0)
	must(t, err)
	if len(u) != 0 {
		t.Errorf("unsettled after SettleAll: %v", ids(u))
	}
	if b := balance(t, s, ledger.Earned("bob")); b != 7 {
		t.Errorf("bob = %d, want 7", b)
	}
	checkMoney(t, s, true)
	// Misrouted through Record too.
	other := c.scopeOf("econ-2", 0)
	if _, err := n.Record(ctxT(t), other, netting.Movement{Key: "x", Legs: buy("alice", "bob", 1)}); !errors.Is(err, netting.ErrMisrouted) {
		t.Errorf("Record on a foreign scope: %v", err)
	}
}

func testRecover(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "alice", 100)
	scope := c.scopeOf("econ-1", 0)
	sess := c.open("econ-1", scope)
	for i := range 5 {
		accept(t, sess, fmt.Sprintf("k%d", i), buy("alice", "bob", 2)...)
	}
	id := sess.ID()
	c.restart("econ-1") // the crash: the object is gone, the epoch unsettled
	rec, err := c.nodes["econ-1"].Recover(ctxT(t), id)
	must(t, err)
	if rec.ID() != id || rec.WasSettled() || rec.Accepted() != 5 {
		t.Errorf("recovered %s settled=%v accepted=%d", rec.ID(), rec.WasSettled(), rec.Accepted())
	}
	if out := record(t, rec, "k3", buy("alice", "bob", 2)...); out.Status != netting.Accepted || out.Seq != 3 {
		t.Errorf("retried key after recovery: %+v, want accepted seq 3", out)
	}
	if seq := accept(t, rec, "k5", buy("alice", "bob", 2)...); seq != 5 {
		t.Errorf("next seq after recovery = %d, want 5", seq)
	}
	// Recovery with a shared registry does not re-add.
	if p := pending(t, s, ledger.Spendable("alice")); p != -12 {
		t.Errorf("pending = %d, want -12", p)
	}
	rep := settle(t, rec)
	if rep.Netted != 6 || rep.Mode != netting.ModeNetted {
		t.Errorf("report %+v", rep)
	}
	if _, err := c.nodes["econ-1"].Recover(ctxT(t), "sess:none:x-1"); !errors.Is(err, netting.ErrSessionNotFound) {
		t.Errorf("recover unknown: %v", err)
	}
	checkMoney(t, s, true)
}

func testChainBroken(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "alice", 100)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	for i := range 4 {
		accept(t, sess, fmt.Sprintf("k%d", i), buy("alice", "bob", 5)...)
	}
	// Someone edits row 2's amount in the database.
	c.store.setReadHook(func(recs []netting.JournalRecord) []netting.JournalRecord {
		if len(recs) > 2 {
			recs[2].Legs = buy("alice", "bob", 1)
		}
		return recs
	})
	// The settle finds the break in its one read, under its claim, and
	// hands the claim back: econ-2 settles below without waiting for the
	// lease.
	_, err := sess.Settle(ctxT(t))
	var cb *netting.ChainBrokenError
	if !errors.As(err, &cb) || cb.Seq != 2 || netting.Code(err) != "CHAIN.BROKEN" {
		t.Fatalf("settle over a tampered row: %v, want CHAIN.BROKEN at seq 2", err)
	}
	if has(t, s, "net_"+sess.ID()+"_c0") {
		t.Errorf("posted despite a broken chain")
	}
	if _, err := c.nodes["econ-2"].Recover(ctxT(t), sess.ID()); netting.Code(err) != "CHAIN.BROKEN" {
		t.Errorf("recover over a tampered row: %v", err)
	}
	// Repaired (the hook removed), the session settles.
	c.store.setReadHook(nil)
	rec, err := c.nodes["econ-2"].Recover(ctxT(t), sess.ID())
	must(t, err)
	settle(t, rec)
	checkMoney(t, s, true)
}

// testSettleReadsJournalOnce: a settle reads the journal once, under its
// claim (the read is most of a long settle's cost), whether the session
// object journaled the rows itself or was recovered from them.
func testSettleReadsOnce(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "alice", 100)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	for i := range 3 {
		accept(t, sess, fmt.Sprintf("k%d", i), buy("alice", "bob", 5)...)
	}
	c.store.reads.Store(0)
	if rep := settle(t, sess); rep.Netted != 3 || rep.Mode != netting.ModeNetted {
		t.Errorf("report %+v", rep)
	}
	if n := c.store.reads.Load(); n != 1 {
		t.Errorf("settle read the journal %d times, want once", n)
	}
	other := c.open("econ-1", c.scopeOf("econ-1", 1))
	accept(t, other, "k9", buy("alice", "bob", 7)...)
	rec, err := c.nodes["econ-2"].Recover(ctxT(t), other.ID())
	must(t, err)
	c.store.reads.Store(0)
	if rep := settle(t, rec); rep.Netted != 1 {
		t.Errorf("recovered settle report %+v", rep)
	}
	if n := c.store.reads.Load(); n != 1 {
		t.Errorf("a recovered session's settle read the journal %d times, want once", n)
	}
	checkMoney(t, s, true)
}

func testOwnership(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	for i := range 50 {
		scope := fmt.Sprintf("scope-%d", i)
		owner := c.nodes["econ-1"].OwnerOf(scope)
		owners := 0
		for _, id := range threeNodes {
			n := c.nodes[id]
			if n.OwnerOf(scope) != owner {
				t.Fatalf("nodes disagree on %s", scope)
			}
			if n.Owns(scope) {
				owners++
				must(t, n.AssertOwns(scope))
				continue
			}
			err := n.AssertOwns(scope)
			var me *netting.MisroutedError
			if !errors.As(err, &me) || !errors.Is(err, netting.ErrMisrouted) || me.Owner != owner || me.NodeID != id || me.Scope != scope || netting.Code(err) != "SESSION.MISROUTED" {
				t.Errorf("AssertOwns(%s) on %s: %v", scope, id, err)
			}
			if _, err := n.OpenSession(ctxT(t), scope); !errors.As(err, &me) || me.Owner != owner {
				t.Errorf("OpenSession(%s) on %s: %v", scope, id, err)
			}
		}
		if owners != 1 {
			t.Errorf("%s has %d owners", scope, owners)
		}
	}
}

func testSweepBound(t *testing.T, s netting.SharedStore) {
	const bound = 3 * time.Minute
	c := newCluster(t, s, threeNodes, func(cfg *netting.ClusterConfig) {
		cfg.EpochMaxAge = time.Minute
		cfg.Sweep = &netting.SweepConfig{SettleOlderThan: bound}
	})
	fund(t, s, "f", "alice", 100)
	dead := c.open("econ-1", c.scopeOf("econ-1", 0))
	accept(t, dead, "k0", buy("alice", "bob", 10)...)
	accept(t, dead, "k1", buy("alice", "bob", 10)...)
	c.restart("econ-1")
	j, err := s.ReadJournal(ctxT(t), dead.ID())
	must(t, err)
	last := j[len(j)-1].RecordedAt
	sweeper := c.nodes["econ-2"]

	// Exactly at the bound: reported with its age, not settled.
	sum, err := sweeper.SweepOrphans(ctxT(t), netting.SweepOptions{Now: last.Add(bound)})
	must(t, err)
	if sum.Scanned != 1 || len(sum.Orphans) != 1 || sum.Orphans[0].SessionID != dead.ID() || sum.Orphans[0].Age != bound || len(sum.Settled) != 0 {
		t.Fatalf("sweep at the bound: %+v", sum)
	}
	if m, _ := s.Session(ctxT(t), dead.ID()); m.Settled || m.Sealed {
		t.Fatalf("sweep at the bound touched the session: %+v", m)
	}
	// Without a sweep configuration, never settled.
	reporter := c.nodes["econ-3"]
	noSweep, err := netting.OpenClusterNode(c.store, netting.ClusterConfig{NodeID: "econ-3", Nodes: threeNodes})
	must(t, err)
	sum, err = noSweep.SweepOrphans(ctxT(t), netting.SweepOptions{Now: last.Add(100 * bound)})
	must(t, err)
	if len(sum.Orphans) != 1 || len(sum.Settled) != 0 {
		t.Errorf("report-only sweep: %+v", sum)
	}
	_ = reporter
	// Strictly older: settled.
	sum, err = sweeper.SweepOrphans(ctxT(t), netting.SweepOptions{Now: last.Add(bound + time.Microsecond)})
	must(t, err)
	if len(sum.Settled) != 1 || sum.Settled[0].SessionID != dead.ID() || sum.Settled[0].Mode != netting.ModeNetted || len(sum.Failed) != 0 {
		t.Fatalf("sweep past the bound: %+v", sum)
	}
	if b := balance(t, s, ledger.Earned("bob")); b != 20 {
		t.Errorf("bob = %d, want 20", b)
	}
	checkMoney(t, s, true)
	// A live epoch of the sweeping node is not an orphan.
	live := c.nodes["econ-2"]
	scope := c.scopeOf("econ-2", 0)
	if _, err := live.Record(ctxT(t), scope, netting.Movement{Key: "live", Legs: buy("alice", "bob", 1)}); err != nil {
		t.Fatal(err)
	}
	sum, err = live.SweepOrphans(ctxT(t), netting.SweepOptions{})
	must(t, err)
	if sum.Scanned != 1 || len(sum.Orphans) != 0 {
		t.Errorf("own live epoch reported as orphan: %+v", sum)
	}
	if _, err := live.SettleAll(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func testReconcile(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "alice", 100)
	a := c.open("econ-1", c.scopeOf("econ-1", 0))
	accept(t, a, "k0", buy("alice", "bob", 30)...)
	b := c.open("econ-2", c.scopeOf("econ-2", 0))
	accept(t, b, "k1", buy("alice", "carol", 20)...)
	settle(t, b)
	// Drift: a lost counter, a stray one.
	_, err := s.ReplacePending(ctxT(t), map[string]netting.Reserved{ledger.Spendable("alice"): {Debits: -5}, "ghost:spendable": {Debits: -9}})
	must(t, err)
	// The plan names every counter the rebuild sets, and writes nothing.
	wantChanges := []netting.PendingChange{
		{Account: ledger.Spendable("alice"), Was: netting.Reserved{Debits: -5}, Now: netting.Reserved{Debits: -30}},
		{Account: ledger.Earned("bob"), Now: netting.Reserved{Credits: 30}},
		{Account: "ghost:spendable", Was: netting.Reserved{Debits: -9}},
	}
	slices.SortFunc(wantChanges, func(x, y netting.PendingChange) int { return strings.Compare(x.Account, y.Account) })
	plan, err := netting.PlanReconcile(ctxT(t), s)
	must(t, err)
	if !slices.Equal(plan.Changes, wantChanges) || plan.Adjusted != 3 || plan.Accounts != 2 {
		t.Errorf("plan = %+v, want changes %+v", plan, wantChanges)
	}
	if p := pending(t, s, ledger.Spendable("alice")); p != -5 {
		t.Errorf("alice pending = %d after the plan, want -5 (unchanged)", p)
	}
	res, err := netting.ReconcileReservations(ctxT(t), s)
	if !slices.Equal(res.Changes, wantChanges) {
		t.Errorf("reconcile changes = %+v, want %+v", res.Changes, wantChanges)
	}
	must(t, err)
	// alice -5 → -30, bob 0 → +30, ghost -9 → 0.
	if res.Adjusted != 3 || res.Accounts != 2 {
		t.Errorf("reconcile = %+v, want 3 adjusted over 2 accounts", res)
	}
	if p := pending(t, s, ledger.Spendable("alice")); p != -30 {
		t.Errorf("alice pending = %d, want -30", p)
	}
	if p := pending(t, s, ledger.Earned("bob")); p != 30 {
		t.Errorf("bob pending = %d, want 30", p)
	}
	if r := reserved(t, s); r[ledger.Spendable("alice")] != (netting.Reserved{Debits: -30}) || r[ledger.Earned("bob")] != (netting.Reserved{Credits: 30}) {
		t.Errorf("reserved after reconcile = %v, want alice's debit and bob's credit on their sides", r)
	}
	res, err = netting.ReconcileReservations(ctxT(t), s)
	must(t, err)
	if res.Adjusted != 0 || len(res.Changes) != 0 {
		t.Errorf("second reconcile adjusted %d: %+v", res.Adjusted, res.Changes)
	}
	settle(t, a)
	checkMoney(t, s, true)
}

// testConcurrentRecords hammers one session from many goroutines, some of
// whose contexts end mid-wait, and checks that exactly one committer ever
// appends (no seq conflicts), every acknowledged movement is journaled
// once, and a row exists without an acknowledgement only for a caller that
// gave up waiting.
func testConcurrentRecords(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "alice", 1_000_000)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	const workers, each = 16, 150
	var mu sync.Mutex
	acked := map[string]int64{}
	gaveUp := map[string]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("w%d-%d", w, i)
				ctx, cancel := context.WithCancel(ctxT(t))
				var canceller sync.WaitGroup
				if (w+i)%7 == 0 {
					// Some callers stop waiting at an arbitrary moment.
					canceller.Go(func() { runtime.Gosched(); cancel() })
				}
				out, err := sess.Record(ctx, netting.Movement{Key: key, Legs: buy("alice", "bob", 1)})
				cancel()
				canceller.Wait()
				mu.Lock()
				switch {
				case err == nil && out.Status == netting.Accepted:
					acked[key] = out.Seq
				case errors.Is(err, context.Canceled):
					gaveUp[key] = true
				default:
					mu.Unlock()
					t.Errorf("record %s: %+v %v", key, out, err)
					return
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	must(t, sess.Flush(ctxT(t)))
	j, err := s.ReadJournal(ctxT(t), sess.ID())
	must(t, err)
	if _, err := netting.VerifyChain(sess.ID(), j); err != nil {
		t.Fatal(err)
	}
	inJournal := map[string]int64{}
	for _, r := range j {
		inJournal[r.Key] = r.Seq
		if seq, ok := acked[r.Key]; ok && seq != r.Seq {
			t.Errorf("%s acknowledged at seq %d, journaled at %d", r.Key, seq, r.Seq)
		} else if !ok && !gaveUp[r.Key] {
			t.Errorf("%s journaled but never acknowledged", r.Key)
		}
	}
	for k := range acked {
		if _, ok := inJournal[k]; !ok {
			t.Errorf("%s acknowledged but not journaled", k)
		}
	}
	if p := pending(t, s, ledger.Spendable("alice")); p != -int64(len(j)) {
		t.Errorf("pending %d for %d journaled movements", p, len(j))
	}
	settle(t, sess)
	checkMoney(t, s, true)
}
