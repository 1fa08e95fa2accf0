package sqlstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// The journal's key index (netting_keys) is outside the hash chain, which
// covers the batch bodies: an index row deleted or moved by hand is caught
// by the store's key index check, which the money audit runs, naming the
// key and its batch. Before the check nothing caught it, and a resend of
// a key whose row was deleted was journaled again.

func TestKeyIndexSQLite(t *testing.T) {
	testKeyIndex(t, func(t *testing.T) *sqlstore.Store { return openSQLite(t) })
}

// testKeyIndexPostgres is TestKeyIndexSQLite on TestPostgres's server,
// each case on a database of its template.
func testKeyIndexPostgres(t *testing.T, tm *postgresTemplate) {
	testKeyIndex(t, func(t *testing.T) *sqlstore.Store { return tm.open(t) })
}

// keyIndexJournal writes session s's journal as two batches, k0..k2 and
// k3..k4, and a refused key's marker ("no"), and returns the rows.
func keyIndexJournal(t *testing.T, s *sqlstore.Store) []netting.JournalRecord {
	t.Helper()
	ctx := testCtx(t)
	if _, err := s.CreateSession(ctx, netting.SessionMeta{ID: "s", Scope: "shop", NodeID: "n1", ChunkWidth: 16}); err != nil {
		t.Fatal(err)
	}
	recs := keyIndexRows("s", 0, netting.GenesisHash, "k0", "k1", "k2", "k3", "k4")
	if err := s.AppendRecording(ctx, recs[:3], []netting.RefusedKey{{Key: "no", SessionID: "s", Reason: netting.ReasonInsufficientFunds}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, recs[3:]); err != nil {
		t.Fatal(err)
	}
	return recs
}

// keyIndexRows chains one row per key from seq and prev.
func keyIndexRows(sid string, seq int64, prev string, keys ...string) []netting.JournalRecord {
	var out []netting.JournalRecord
	for i, key := range keys {
		legs := []ledger.Leg{ledger.Debit("w:a", 1), ledger.Credit("w:b", 1)}
		r := netting.JournalRecord{SessionID: sid, Seq: seq + int64(i), Key: key, Legs: legs, PrevHash: prev, Hash: netting.ChainHash(prev, key, legs)}
		out = append(out, r)
		prev = r.Hash
	}
	return out
}

// auditKeyIndex runs the store's check and the money audit, and returns
// the check's faults (nil when it passes) and the audit's problems.
func auditKeyIndex(t *testing.T, s *sqlstore.Store) ([]netting.KeyIndexFault, []string) {
	t.Helper()
	ctx := testCtx(t)
	var faults []netting.KeyIndexFault
	err := s.VerifyKeyIndex(ctx)
	var brk *netting.KeyIndexBrokenError
	switch {
	case errors.As(err, &brk):
		if !errors.Is(err, netting.ErrKeyIndexBroken) || netting.Code(err) != netting.CodeKeyIndexBroken || brk.Total != len(brk.Faults) {
			t.Errorf("VerifyKeyIndex = %v (code %q, %d of %d faults listed)", err, netting.Code(err), len(brk.Faults), brk.Total)
		}
		faults = brk.Faults
	case err != nil:
		t.Fatalf("VerifyKeyIndex: %v", err)
	}
	rep, err := econ.Audit(ctx, s)
	if err != nil {
		t.Fatalf("Audit: %v", err)
	}
	if !rep.KeyIndexChecked || rep.KeyIndexFaults != len(faults) {
		t.Errorf("Audit: key index checked %v, %d faults; the store found %d", rep.KeyIndexChecked, rep.KeyIndexFaults, len(faults))
	}
	return faults, rep.Problems(false)
}

// wantFault checks that the first fault names key in batch sid@firstSeq
// at offset, and that the audit's problems name the key and the code.
func wantFault(t *testing.T, faults []netting.KeyIndexFault, problems []string, key, sid string, firstSeq, offset int64) {
	t.Helper()
	if len(faults) == 0 {
		t.Fatalf("key index check passed; want a fault naming %q", key)
	}
	if f := faults[0]; f.Key != key || f.SessionID != sid || f.FirstSeq != firstSeq || f.Offset != offset || f.Batch == 0 || f.Reason == "" {
		t.Errorf("first fault %+v; want key %q in batch %s@%d offset %d", f, key, sid, firstSeq, offset)
	}
	text := strings.Join(problems, "\n")
	if !strings.Contains(text, `"`+key+`"`) || !strings.Contains(text, netting.CodeKeyIndexBroken) {
		t.Errorf("audit problems do not name key %q and %s:\n%s", key, netting.CodeKeyIndexBroken, text)
	}
}

func testKeyIndex(t *testing.T, open func(t *testing.T) *sqlstore.Store) {
	t.Run("Untouched", func(t *testing.T) {
		s := open(t)
		keyIndexJournal(t, s)
		if faults, problems := auditKeyIndex(t, s); len(faults) != 0 || len(problems) != 0 {
			t.Errorf("untouched store: faults %+v, problems %q", faults, problems)
		}
	})
	t.Run("EmptyStore", func(t *testing.T) {
		if faults, problems := auditKeyIndex(t, open(t)); len(faults) != 0 || len(problems) != 0 {
			t.Errorf("empty store: faults %+v, problems %q", faults, problems)
		}
	})
	t.Run("RowDeleted", func(t *testing.T) {
		s := open(t)
		recs := keyIndexJournal(t, s)
		ctx := testCtx(t)
		if err := s.ExecForTest(ctx, `DELETE FROM netting_keys WHERE key = ?`, "k1"); err != nil {
			t.Fatal(err)
		}
		faults, problems := auditKeyIndex(t, s)
		wantFault(t, faults, problems, "k1", "s", 0, 1)
		if len(faults) != 1 {
			t.Errorf("faults %+v; want only k1's", faults)
		}
		// The append's conflict check reads the index alone, so a resend
		// of k1 is journaled again (docs/decisions.md): the audit still
		// names the first batch's k1, which now has no entry.
		again := keyIndexRows("s", 5, recs[4].Hash, "k1")
		if err := s.Append(ctx, again); err != nil {
			t.Fatalf("resend of k1 after its index row was deleted: %v", err)
		}
		faults, problems = auditKeyIndex(t, s)
		wantFault(t, faults, problems, "k1", "s", 0, 1)
		if len(faults) != 1 {
			t.Errorf("faults after the resend %+v; want only the first k1's", faults)
		}
	})
	t.Run("WrongOffset", func(t *testing.T) {
		s := open(t)
		keyIndexJournal(t, s)
		if err := s.ExecForTest(testCtx(t), `UPDATE netting_keys SET idx = 0 WHERE key = ?`, "k4"); err != nil {
			t.Fatal(err)
		}
		faults, problems := auditKeyIndex(t, s)
		// k4's entry names offset 0 of the second batch (k3's row), and
		// k4's own row at offset 1 has no entry.
		wantFault(t, faults, problems, "k4", "s", 3, 0)
		if len(faults) != 2 || faults[1].Key != "k4" || faults[1].Offset != 1 {
			t.Errorf("faults %+v; want k4's entry and k4's row", faults)
		}
	})
	t.Run("OffsetPastTheBatch", func(t *testing.T) {
		s := open(t)
		keyIndexJournal(t, s)
		if err := s.ExecForTest(testCtx(t), `UPDATE netting_keys SET idx = 7 WHERE key = ?`, "k2"); err != nil {
			t.Fatal(err)
		}
		faults, problems := auditKeyIndex(t, s)
		wantFault(t, faults, problems, "k2", "s", 0, 7)
	})
	t.Run("NoSuchBatch", func(t *testing.T) {
		s := open(t)
		keyIndexJournal(t, s)
		if err := s.ExecForTest(testCtx(t), `UPDATE netting_keys SET batch = 99999 WHERE key = ?`, "k3"); err != nil {
			t.Fatal(err)
		}
		faults, _ := auditKeyIndex(t, s)
		// k3's row in the second batch has lost its entry (batch order:
		// it comes first), and the entry points at no batch.
		if len(faults) != 2 || faults[0].Key != "k3" || faults[0].Offset != 0 || faults[1].Key != "k3" || faults[1].Batch != 99999 || faults[1].SessionID != "" {
			t.Errorf("faults %+v; want k3's row without an entry, then its entry pointing nowhere", faults)
		}
	})
	t.Run("ManyFaultsCounted", func(t *testing.T) {
		s := open(t)
		ctx := testCtx(t)
		if _, err := s.CreateSession(ctx, netting.SessionMeta{ID: "m", Scope: "many", NodeID: "n1", ChunkWidth: 16}); err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 150)
		for i := range keys {
			keys[i] = "many-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		}
		if err := s.Append(ctx, keyIndexRows("m", 0, netting.GenesisHash, keys...)); err != nil {
			t.Fatal(err)
		}
		if err := s.ExecForTest(ctx, `DELETE FROM netting_keys WHERE key LIKE 'many-%'`); err != nil {
			t.Fatal(err)
		}
		err := s.VerifyKeyIndex(ctx)
		var brk *netting.KeyIndexBrokenError
		if !errors.As(err, &brk) || brk.Total != 150 || len(brk.Faults) != 100 || !strings.Contains(err.Error(), "and 149 more") {
			t.Fatalf("VerifyKeyIndex = %v; want 150 faults, 100 listed", err)
		}
		rep, err := econ.Audit(ctx, s)
		if err != nil || rep.KeyIndexFaults != 150 || !strings.Contains(strings.Join(rep.Problems(false), "\n"), "50 more faults") {
			t.Errorf("Audit: %d faults, problems %q, %v", rep.KeyIndexFaults, rep.Problems(false), err)
		}
	})
}

var _ econ.KeyIndexVerifier = (*sqlstore.Store)(nil)
