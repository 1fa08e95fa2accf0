package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// unknownCases are the "outcome unknown, do not guess" paths of the money:
// a store call whose reply is lost, so the session cannot tell from the
// error whether the write landed. The fault store fails the reply after
// the real call (it landed) or before it (it did not); either way the
// session must find out from the store — read the journal back, resume the
// settle with its idempotent postings and once-only release — and never
// guess. Every case ends with the money audit.
var unknownCases = []contractCase{
	{"Unknown/CommitLanded", testUnknownCommitLanded},
	{"Unknown/CommitNotLanded", testUnknownCommitNotLanded},
	{"Unknown/CommitJournalUnreadable", testUnknownCommitUnreadable},
	{"Unknown/CommitOtherWriter", testUnknownCommitOtherWriter},
	{"Unknown/SettleWrites", testUnknownSettleWrites},
}

// A group commit whose transaction committed but whose reply was lost:
// the session reads the journal back and answers the truth — accepted,
// reserved once — and the journal continues after it.
func testUnknownCommitLanded(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "alice", 100)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	accept(t, sess, "k0", buy("alice", "bob", 10)...)
	c.store.failReply(faultPoint{call: faultCommit, after: true}, 1)
	if seq := accept(t, sess, "k1", buy("alice", "bob", 20)...); seq != 1 {
		t.Errorf("seq after a lost reply = %d, want 1", seq)
	}
	if p := pending(t, s, ledger.Spendable("alice")); p != -30 {
		t.Errorf("alice pending %d, want -30 (the landed movement reserved once)", p)
	}
	if seq := accept(t, sess, "k1", buy("alice", "bob", 20)...); seq != 1 {
		t.Errorf("retried key answered seq %d, want 1", seq)
	}
	if seq := accept(t, sess, "k2", buy("alice", "bob", 1)...); seq != 2 {
		t.Errorf("next seq %d, want 2", seq)
	}
	if rep := settle(t, sess); rep.Netted != 3 {
		t.Errorf("settled %d movements, want 3", rep.Netted)
	}
	if b := balance(t, s, ledger.Earned("bob")); b != 31 {
		t.Errorf("bob = %d, want 31", b)
	}
	checkMoney(t, s, true)
}

// A group commit that never reached the store, reported as the same kind
// of error: the read-back finds no row, so the Record fails (it is not
// accepted), nothing stays reserved, the session stays open, and a retry
// of the key is accepted.
func testUnknownCommitNotLanded(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "alice", 100)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	c.store.failReply(faultPoint{call: faultCommit}, 1)
	out, err := sess.Record(ctxT(t), netting.Movement{Key: "k0", Legs: buy("alice", "bob", 40)})
	if !errors.Is(err, errInjected) || out.Status != 0 {
		t.Fatalf("record whose commit did not land: (%+v, %v), want the injected error", out, err)
	}
	if p, _ := s.PendingAll(ctxT(t)); len(p) != 0 {
		t.Errorf("pending after a commit that did not land: %v", p)
	}
	if seq := accept(t, sess, "k0", buy("alice", "bob", 40)...); seq != 0 {
		t.Errorf("retry seq %d, want 0", seq)
	}
	settle(t, sess)
	checkMoney(t, s, true)
}

// A lost reply and a journal that cannot be read either: the session
// cannot know, so it fails the Record and stops accepting (the node moves
// the scope to a fresh epoch). The row did land: settling the session
// settles the movement once, a retried key answers accepted from the
// journal, and the reservation it left is exactly what the journal says
// (ReconcileReservations adjusts nothing).
func testUnknownCommitUnreadable(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, func(cfg *netting.ClusterConfig) {
		cfg.SettleLease = time.Millisecond
	})
	fund(t, s, "f", "alice", 100)
	scope := c.scopeOf("econ-1", 0)
	sess := c.open("econ-1", scope)
	accept(t, sess, "k0", buy("alice", "bob", 10)...)
	c.store.failReply(faultPoint{call: faultCommit, after: true}, 1)
	c.store.failReply(faultPoint{call: faultRead}, 1)
	if _, err := sess.Record(ctxT(t), netting.Movement{Key: "k1", Legs: buy("alice", "bob", 20)}); !errors.Is(err, errInjected) {
		t.Fatalf("record with the outcome unknown: %v, want the injected error", err)
	}
	if _, err := sess.Record(ctxT(t), netting.Movement{Key: "k2", Legs: buy("alice", "bob", 1)}); netting.Code(err) != netting.CodeSettled {
		t.Errorf("record after an unresolved commit: %v, want SESSION.SETTLED (the session stops accepting)", err)
	}
	rec, found, err := s.LookupKey(ctxT(t), "k1")
	must(t, err)
	if !found || rec.SessionID != sess.ID() {
		t.Fatalf("setup: the commit should have landed")
	}
	if p := pending(t, s, ledger.Spendable("alice")); p != -30 {
		t.Errorf("alice pending %d, want -30 (the landed row's reservation)", p)
	}
	res, err := netting.ReconcileReservations(ctxT(t), s)
	must(t, err)
	if res.Adjusted != 0 {
		t.Errorf("reconcile adjusted %d counters, want 0", res.Adjusted)
	}
	// A fresh epoch answers the retried key from the row that landed.
	next := c.open("econ-1", scope)
	if out := record(t, next, "k1", buy("alice", "bob", 20)...); out.Status != netting.Accepted || out.Seq != rec.Seq {
		t.Errorf("retried key: %+v, want accepted at seq %d", out, rec.Seq)
	}
	settle(t, next)
	waitStoreAfter(t, s, mustNow(t, s).Add(2*time.Millisecond))
	r, err := c.nodes["econ-2"].Recover(ctxT(t), sess.ID())
	must(t, err)
	if rep := settle(t, r); rep.Netted != 2 {
		t.Errorf("the closed session settled %d movements, want 2", rep.Netted)
	}
	if b := balance(t, s, ledger.Earned("bob")); b != 30 {
		t.Errorf("bob = %d, want 30 (each movement once)", b)
	}
	checkMoney(t, s, true)
}

// A lost reply, and the journal read back holds another writer's row where
// ours would be: the session does not guess which rows are whose; it fails
// the Record and stops accepting. Nothing of ours was applied.
func testUnknownCommitOtherWriter(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, nil)
	fund(t, s, "f", "alice", 100)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	legs := []ledger.Leg{ledger.Debit("platform:a", 1), ledger.Credit("platform:b", 1)}
	other := netting.JournalRecord{SessionID: sess.ID(), Seq: 0, Key: "other", Legs: legs, PrevHash: netting.GenesisHash,
		Hash: netting.ChainHash(netting.GenesisHash, "other", legs)}
	c.store.setAppendHook(func([]netting.JournalRecord) error {
		c.store.setAppendHook(nil)
		must(t, s.Append(ctxT(t), []netting.JournalRecord{other}))
		return errInjected
	})
	if _, err := sess.Record(ctxT(t), netting.Movement{Key: "k0", Legs: buy("alice", "bob", 10)}); !errors.Is(err, errInjected) {
		t.Fatalf("record: %v, want the injected error", err)
	}
	if _, err := sess.Record(ctxT(t), netting.Movement{Key: "k1", Legs: buy("alice", "bob", 10)}); netting.Code(err) != netting.CodeSettled {
		t.Errorf("record after the journal moved under the session: %v, want SESSION.SETTLED", err)
	}
	if p, _ := s.PendingAll(ctxT(t)); len(p) != 0 {
		t.Errorf("pending %v, want none", p)
	}
	if rep := settle(t, sess); rep.Netted != 1 {
		t.Errorf("settled %d rows, want the other writer's 1", rep.Netted)
	}
	checkMoney(t, s, true)
}

// Every settle write whose reply is lost, landed or not: the settle
// returns the error (it does not guess), and a resumed settle — the same
// object, or a sweep on another node — finishes it with every movement
// applied once and every reservation returned once.
func testUnknownSettleWrites(t *testing.T, s netting.SharedStore) {
	cases := []struct {
		name   string
		fault  faultPoint
		replay bool // a refused chunk sends the settle down the replay path
	}{
		{"ChunkLanded", faultPoint{call: faultPost, id: "c1", after: true}, false},
		{"ChunkNotLanded", faultPoint{call: faultPost, id: "c1"}, false},
		{"CompensationLanded", faultPoint{call: faultPost, id: "c0_comp", after: true}, true},
		{"CompensationNotLanded", faultPoint{call: faultPost, id: "c0_comp"}, true},
		{"ReplayLanded", faultPoint{call: faultPost, id: "mv0", after: true}, true},
		{"ReplayNotLanded", faultPoint{call: faultPost, id: "mv0"}, true},
		{"ReleaseLanded", faultPoint{call: faultRelease, after: true}, true},
		{"ReleaseNotLanded", faultPoint{call: faultRelease}, false},
		{"FinishLanded", faultPoint{call: faultFinish, after: true}, false},
		{"FinishNotLanded", faultPoint{call: faultFinish}, true},
	}
	for i, tc := range cases {
		for _, resumeElsewhere := range []bool{false, true} {
			name := tc.name + "/SameObject"
			if resumeElsewhere {
				name = tc.name + "/Sweep"
			}
			t.Run(name, func(t *testing.T) {
				testUnknownSettleWrite(t, s, fmt.Sprintf("u%d%v", i, resumeElsewhere), tc.fault, tc.replay, resumeElsewhere)
			})
		}
	}
}

func testUnknownSettleWrite(t *testing.T, s netting.SharedStore, u string, fault faultPoint, replay, elsewhere bool) {
	c := newCluster(t, s, threeNodes, func(cfg *netting.ClusterConfig) {
		cfg.ChunkWidth = 1
		cfg.SettleLease = time.Millisecond
		cfg.EpochMaxAge = time.Minute
		cfg.Sweep = &netting.SweepConfig{SettleOlderThan: 2 * time.Minute}
	})
	buyer, other, seller := u+"-buyer", u+"-other", u+"-seller"
	fund(t, s, "f-"+buyer, buyer, 100)
	fund(t, s, "f-"+other, other, 100)
	sess := c.open("econ-1", c.scopeOf("econ-1", 0))
	id := sess.ID()
	accept(t, sess, u+"-k0", buy(buyer, seller, 30)...) // chunks: buyer, seller, other
	accept(t, sess, u+"-k1", buy(other, seller, 50)...)
	want := map[string]int64{ledger.Spendable(buyer): 70, ledger.Spendable(other): 50, ledger.Earned(seller): 80}
	if replay {
		// other's credits leave outside the session: chunk 2 (other's 50)
		// is refused, chunks 1 and 0 are compensated, the replay posts k0
		// and refuses k1.
		must(t, s.Post(ctxT(t), ledger.Posting{ID: "outside-" + u, Legs: buy(other, "shop", 60)}))
		want[ledger.Spendable(other)] = 40
		want[ledger.Earned(seller)] = 30
	}
	switch fault.id {
	case "c1", "c0_comp":
		fault.id = "net_" + id + "_" + fault.id
	case "mv0":
		fault.id = "mv_" + id + "_0"
	}
	c.store.failReply(fault, 1)
	if _, err := sess.Settle(ctxT(t)); !errors.Is(err, errInjected) {
		t.Fatalf("settle with a lost reply at %+v: %v, want the injected error", fault, err)
	}
	settler := sess
	if elsewhere {
		c.restart("econ-1")
		waitStoreAfter(t, s, mustNow(t, s).Add(2*time.Millisecond))
		sum, err := c.nodes["econ-3"].SweepOrphans(ctxT(t), netting.SweepOptions{Now: mustNow(t, s).Add(time.Hour)})
		must(t, err)
		if fault.call == faultFinish && fault.after {
			// The finish landed: nothing is left for the sweep.
			if len(sum.Orphans) != 0 {
				t.Errorf("sweep found orphans of a settled session: %+v", sum)
			}
		} else if len(sum.Settled) != 1 || sum.Settled[0].SessionID != id {
			t.Fatalf("sweep: %+v, want %s settled", sum, id)
		}
		var err2 error
		settler, err2 = c.nodes["econ-2"].Recover(ctxT(t), id)
		must(t, err2)
	}
	rep := settle(t, settler)
	wantMode := netting.ModeNetted
	if replay {
		wantMode = netting.ModeReplayed
	}
	if rep.Mode != wantMode || rep.Netted != 2 {
		t.Errorf("report %+v, want %s of 2 movements", rep, wantMode)
	}
	if replay && (len(rep.Rejected) != 1 || rep.Rejected[0].Key != u+"-k1") {
		t.Errorf("rejections %v, want %s-k1", rep.Rejected, u)
	}
	for a, w := range want {
		if b := balance(t, s, a); b != w {
			t.Errorf("%s = %d, want %d (each movement applied once)", a, b, w)
		}
	}
	checkMoney(t, s, true)
}
