package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// The refusals of port v4: a key the funds check refused keeps that refusal
// as its first answer for ever (issue 27).
var refusalCases = []contractCase{
	{"Keys/RefusalIsRemembered", testRefusalRemembered},
	{"Keys/RefusedKeyAnswersFirstRefusal", testRefusedKeyFinal},
}

// The store's part: AppendRecording remembers a refusal in the append's
// transaction, LookupAnswer returns it, a later append of the key is a key
// conflict, and a key with a first answer keeps it (a refusal of a
// journaled key, or a second refusal, writes nothing).
func testRefusalRemembered(t *testing.T, s netting.SharedStore) {
	ctx := ctxT(t)
	if _, err := s.CreateSession(ctx, netting.SessionMeta{ID: "s", Scope: "shop", NodeID: "n1", ChunkWidth: 4}); err != nil {
		t.Fatal(err)
	}
	legs := sink("w", 5)
	row := netting.JournalRecord{SessionID: "s", Seq: 0, Key: "ok", Legs: legs, PrevHash: netting.GenesisHash, Hash: netting.ChainHash(netting.GenesisHash, "ok", legs)}
	must(t, s.AppendRecording(ctx, []netting.JournalRecord{row}, []netting.RefusedKey{
		{Key: "no", SessionID: "s", Reason: netting.ReasonInsufficientFunds},
		{Key: "ok", SessionID: "s", Reason: netting.ReasonInsufficientFunds}, // journaled: not remembered
	}))
	must(t, s.AppendRecording(ctx, nil, []netting.RefusedKey{{Key: "no", SessionID: "other", Reason: "LATER"}}))
	if a, err := s.LookupAnswer(ctx, "no"); err != nil || !a.Found || !a.Refused || a.Refusal.Reason != netting.ReasonInsufficientFunds || a.Refusal.SessionID != "s" || a.Refusal.RefusedAt.IsZero() {
		t.Errorf("LookupAnswer(no) = %+v, %v; want its first refusal, stamped", a, err)
	}
	if a, err := s.LookupAnswer(ctx, "ok"); err != nil || !a.Found || a.Refused || a.Record.Hash != row.Hash {
		t.Errorf("LookupAnswer(ok) = %+v, %v; want its journal row", a, err)
	}
	if a, err := s.LookupAnswer(ctx, "never"); err != nil || a.Found {
		t.Errorf("LookupAnswer(never) = %+v, %v; want not found", a, err)
	}
	if _, ok, err := s.LookupKey(ctx, "no"); err != nil || ok {
		t.Errorf("LookupKey(no) = %v, %v: a refusal is not a journal row", ok, err)
	}
	next := netting.JournalRecord{SessionID: "s", Seq: 1, Key: "no", Legs: legs, PrevHash: row.Hash, Hash: netting.ChainHash(row.Hash, "no", legs)}
	var kc *netting.KeyConflictError
	if err := s.Append(ctx, []netting.JournalRecord{next}); !errors.As(err, &kc) || len(kc.Keys) != 1 || kc.Keys[0] != "no" {
		t.Errorf("append of a refused key: %v, want a key conflict on it", err)
	}
	both := []netting.JournalRecord{next, {SessionID: "s", Seq: 2, Key: "ok", Legs: legs, PrevHash: next.Hash, Hash: netting.ChainHash(next.Hash, "ok", legs)}}
	if err := s.Append(ctx, both); !errors.As(err, &kc) || !slices.Equal(kc.Keys, []string{"no", "ok"}) {
		t.Errorf("append of a refused and a journaled key: %v, want a key conflict naming both", err)
	}
	if _, err := s.ReserveAndAppend(ctx, nil, [][]ledger.AccountDelta{nil}, func([]bool) []netting.JournalRecord { return []netting.JournalRecord{next} }); !errors.As(err, &kc) {
		t.Errorf("group commit of a refused key: %v, want a key conflict", err)
	}
	if j, err := s.ReadJournal(ctx, "s"); err != nil || len(j) != 1 {
		t.Errorf("journal = %d rows, %v; want the one accepted", len(j), err)
	}
}

// A key the funds check refused answers that refusal again — in the same
// epoch, after a rotation, after a settle, on another node under another
// scope, after its node crashed, with other legs — though the funds are
// there since, and it never lands.
func testRefusedKeyFinal(t *testing.T, s netting.SharedStore) {
	c := newCluster(t, s, threeNodes, func(cfg *netting.ClusterConfig) { cfg.MaxMovements = 2 })
	scope := c.scopeOf("econ-1", 0)
	rec := func(node, scope, key string, legs ...ledger.Leg) netting.Outcome {
		t.Helper()
		out, err := c.nodes[node].Record(ctxT(t), scope, netting.Movement{Key: key, Legs: legs})
		must(t, err)
		return out
	}
	first := rec("econ-1", scope, "K", sink("w", 100)...)
	if first.Status != netting.Rejected || first.Reason != netting.ReasonInsufficientFunds || first.Seq != -1 {
		t.Fatalf("K with no funds = %+v, want REJECTED INSUFFICIENT_FUNDS", first)
	}
	fund(t, s, "f", "w", 100)
	resend := func(when, node, scope string, legs ...ledger.Leg) {
		t.Helper()
		if out := rec(node, scope, "K", legs...); out != first {
			t.Errorf("K resent %s = %+v, want its first answer %+v", when, out, first)
		}
	}
	resend("in the same epoch", "econ-1", scope, sink("w", 100)...)
	rec("econ-1", scope, "pad-1", mint("x", 1)...)
	rec("econ-1", scope, "pad-2", mint("x", 1)...) // the epoch is full: it rotates
	resend("after a rotation", "econ-1", scope, sink("w", 100)...)
	for _, n := range c.nodes {
		if _, err := n.SettleAll(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	resend("after a settle", "econ-1", scope, sink("w", 100)...)
	resend("on another node, another scope", "econ-2", c.scopeOf("econ-2", 0), sink("w", 100)...)
	c.restart("econ-1")
	resend("after its node crashed", "econ-1", scope, sink("w", 100)...)
	resend("with other legs (a credit that would be granted)", "econ-1", scope, mint("w", 7)...)
	for _, n := range c.nodes {
		if _, err := n.SettleAll(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	if b := balance(t, s, "platform:sink"); b != 0 {
		t.Errorf("sink = %d, want 0: K never lands", b)
	}
	if b := balance(t, s, ledger.Spendable("w")); b != 100 {
		t.Errorf("w = %d, want 100", b)
	}
	if _, ok, err := s.LookupKey(ctxT(t), "K"); err != nil || ok {
		t.Errorf("K journaled: %v, %v", ok, err)
	}
	checkMoney(t, s, true)
}
