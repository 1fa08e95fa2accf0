package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// The spending rule across group commits must see the true sum even when
// the account's pending debits plus the batch's leave int64. Session a
// reserves all of w's balance (MaxInt64: pending debits −MaxInt64);
// session b, with own credits of 999, then asks to debit w 1,000. The true
// headroom is MaxInt64 − MaxInt64 − 1,000 + 999 = −1: the rule refuses.
// SQLite's blind add turns the counter's overflowing sum into a REAL
// (−2^63, rounded), and the one-statement check then read MaxInt64 +
// (−2^63) + 999 ≥ 0 and granted a debit nothing covers.
func TestSpendingRuleAcrossCommitsDoesNotWrapSQLite(t *testing.T) {
	testSpendingRuleAcrossCommitsDoesNotWrap(t, openSQLite(t))
}

// testBreaksPostgres runs the same on PostgreSQL (TestPostgres's
// server), whose single statement errs on a bigint overflow and declines
// the batch to the rule.
func testBreaksPostgres(t *testing.T, pg *testenv.PostgresServer, tm *postgresTemplate) {
	t.Run("SpendingRuleAcrossCommitsDoesNotWrap", func(t *testing.T) {
		testSpendingRuleAcrossCommitsDoesNotWrap(t, tm.open(t))
	})
	t.Run("RefusedKeyInGroupCommit", func(t *testing.T) {
		testRefusedKeyInGroupCommit(t, tm.open(t))
	})
	t.Run("UpgradeBatchesKeepsACorruptRow", func(t *testing.T) {
		url := pg.NewDatabase(t)
		testUpgradeBatchesKeepsACorruptRow(t, func(ctx context.Context, version int) (*sqlstore.Store, error) {
			return sqlstore.OpenPostgresAtVersion(ctx, url, version)
		})
	})
	t.Run("EmptyKeyReadsBack", func(t *testing.T) {
		testEmptyKeyReadsBack(t, func(t *testing.T) func(ctx context.Context, version int) (*sqlstore.Store, error) {
			url := pg.NewDatabase(t)
			return func(ctx context.Context, version int) (*sqlstore.Store, error) {
				return sqlstore.OpenPostgresAtVersion(ctx, url, version)
			}
		})
	})
}

func testSpendingRuleAcrossCommitsDoesNotWrap(t *testing.T, s *sqlstore.Store) {
	ctx := testCtx(t)
	const w = "w:spendable"
	if err := s.Post(ctx, ledger.Posting{ID: "fund", Legs: []ledger.Leg{ledger.Credit(w, math.MaxInt64), ledger.Debit(ledger.Revenue, math.MaxInt64)}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.CreateSession(ctx, netting.SessionMeta{ID: id, Scope: "shop-" + id, NodeID: "n1", ChunkWidth: 16}); err != nil {
			t.Fatal(err)
		}
	}
	row := func(sid, key string, amount int64) func([]bool) []netting.JournalRecord {
		return func(granted []bool) []netting.JournalRecord {
			if !granted[0] {
				return nil
			}
			legs := []ledger.Leg{ledger.Debit(w, amount), ledger.Credit("platform:sink", amount)}
			return []netting.JournalRecord{{SessionID: sid, Seq: 0, Key: key, Legs: legs, PrevHash: netting.GenesisHash, Hash: netting.ChainHash(netting.GenesisHash, key, legs)}}
		}
	}
	spend := func(amount int64) [][]ledger.AccountDelta {
		return [][]ledger.AccountDelta{{{Account: w, Delta: -amount}, {Account: "platform:sink", Delta: amount}}}
	}
	granted, err := s.ReserveAndAppend(ctx, nil, spend(math.MaxInt64), row("a", "all", math.MaxInt64))
	if err != nil || !granted[0] {
		t.Fatalf("a debit of the whole balance: %v, %v", granted, err)
	}
	granted, err = s.ReserveAndAppend(ctx, map[string]int64{w: 999}, spend(1000), row("b", "one-more", 1000))
	if err == nil && granted[0] {
		t.Fatalf("a debit of 1,000 against headroom −1 (balance MaxInt64, pending debits −MaxInt64, own 999) was granted")
	}
}

// Append takes a row with an empty key (the port does not forbid one; a
// schema-8 journal kept it as any other), so the row must read back: the
// batch body refused an empty key on decode, so the append committed and
// the session's whole journal then read as STORE.CORRUPT — every accepted
// movement of it unsettleable. The same row in a schema-8 journal must
// survive the upgrade to the batch form.
func TestEmptyKeyReadsBackSQLite(t *testing.T) {
	testEmptyKeyReadsBack(t, func(t *testing.T) func(ctx context.Context, version int) (*sqlstore.Store, error) {
		path := filepath.Join(t.TempDir(), "netting.db")
		return func(ctx context.Context, version int) (*sqlstore.Store, error) {
			return sqlstore.OpenSQLiteAtVersion(ctx, path, version)
		}
	})
}

// testEmptyKeyReadsBack appends at schema 8 and at the latest, each on a
// fresh database (newDB: an opener of it at a version), and reads back on
// the latest.
func testEmptyKeyReadsBack(t *testing.T, newDB func(t *testing.T) func(ctx context.Context, version int) (*sqlstore.Store, error)) {
	ctx := testCtx(t)
	legs := []ledger.Leg{ledger.Debit("platform:mint", 1), ledger.Credit("w:spendable", 1)}
	rows := []netting.JournalRecord{{SessionID: "s", Seq: 0, Key: "", Legs: legs, PrevHash: netting.GenesisHash, Hash: netting.ChainHash(netting.GenesisHash, "", legs)}}
	rows = append(rows, netting.JournalRecord{SessionID: "s", Seq: 1, Key: "k", Legs: legs, PrevHash: rows[0].Hash, Hash: netting.ChainHash(rows[0].Hash, "k", legs)})
	check := func(t *testing.T, s *sqlstore.Store) {
		t.Helper()
		recs, err := s.ReadJournal(ctx, "s")
		if err != nil || len(recs) != 2 || recs[0].Key != "" || recs[1].Key != "k" {
			t.Fatalf("journal with an empty key: %+v, %v", recs, err)
		}
		if _, err := netting.VerifyChain("s", recs); err != nil {
			t.Fatal(err)
		}
		if r, ok, err := s.LookupKey(ctx, ""); err != nil || !ok || r.Seq != 0 {
			t.Fatalf("LookupKey(\"\") = %+v, %v, %v", r, ok, err)
		}
	}
	for _, version := range []int{8, sqlstore.LatestSchemaVersion} {
		t.Run(fmt.Sprint("from version ", version), func(t *testing.T) {
			openAt := newDB(t)
			old, err := openAt(ctx, version)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := old.CreateSession(ctx, netting.SessionMeta{ID: "s", Scope: "shop", NodeID: "n1", ChunkWidth: 16}); err != nil {
				t.Fatal(err)
			}
			if err := old.Append(ctx, rows); err != nil {
				t.Fatal(err)
			}
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			s, err := openAt(ctx, sqlstore.LatestSchemaVersion)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			check(t, s)
		})
	}
}

// A schema-8 journal row whose legs column does not decode (tampered
// with, or written by a bug) made that session's journal read as
// STORE.CORRUPT, and every other session read as ever. The upgrade to the
// batch form must keep that: today journalToBatches decodes every row and
// fails the whole migration on the first such one, so the store does not
// open at all — every session's accepted movements unsettleable until an
// operator repairs the row by hand.
func TestUpgradeBatchesKeepsACorruptRowSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netting.db")
	testUpgradeBatchesKeepsACorruptRow(t, func(ctx context.Context, version int) (*sqlstore.Store, error) {
		return sqlstore.OpenSQLiteAtVersion(ctx, path, version)
	})
}

func testUpgradeBatchesKeepsACorruptRow(t *testing.T, openAt func(ctx context.Context, version int) (*sqlstore.Store, error)) {
	ctx := testCtx(t)
	old, err := openAt(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	legs := []ledger.Leg{ledger.Debit("platform:mint", 1), ledger.Credit("w:spendable", 1)}
	for _, sid := range []string{"good", "bad"} {
		if _, err := old.CreateSession(ctx, netting.SessionMeta{ID: sid, Scope: "shop-" + sid, NodeID: "n1", ChunkWidth: 16}); err != nil {
			t.Fatal(err)
		}
		key := sid + "-k0"
		r := netting.JournalRecord{SessionID: sid, Seq: 0, Key: key, Legs: legs, PrevHash: netting.GenesisHash, Hash: netting.ChainHash(netting.GenesisHash, key, legs)}
		if err := old.Append(ctx, []netting.JournalRecord{r}); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.ExecForTest(ctx, `UPDATE netting_journal SET legs = ? WHERE session_id = ?`, `[["w:spendable",1]`, "bad"); err != nil {
		t.Fatal(err)
	}
	if _, err := old.ReadJournal(ctx, "bad"); err == nil {
		t.Fatal("the tampered row read back at schema 8")
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := openAt(ctx, sqlstore.LatestSchemaVersion)
	if err != nil {
		t.Fatalf("the upgrade of a store with one corrupt journal row: %v", err)
	}
	defer s.Close()
	if recs, err := s.ReadJournal(ctx, "good"); err != nil || len(recs) != 1 {
		t.Errorf("the good session after the upgrade: %d rows, %v", len(recs), err)
	}
	if _, err := s.ReadJournal(ctx, "bad"); err == nil {
		t.Error("the corrupt row reads back after the upgrade")
	}
	if _, ok, err := s.LookupKey(ctx, "good-k0"); err != nil || !ok {
		t.Errorf("LookupKey(good-k0) after the upgrade: %v, %v", ok, err)
	}
	if _, _, err := s.LookupKey(ctx, "bad-k0"); err == nil {
		t.Error("LookupKey(bad-k0) after the upgrade answered from a row that does not decode")
	}
	// The key stays taken.
	r := netting.JournalRecord{SessionID: "good", Seq: 1, Key: "bad-k0", Legs: legs, PrevHash: "x", Hash: "y"}
	var kc *netting.KeyConflictError
	if err := s.Append(ctx, []netting.JournalRecord{r}); !errors.As(err, &kc) {
		t.Errorf("append of the corrupt row's key after the upgrade: %v, want a key conflict", err)
	}
	// The kept row's key is indexed at its batch: the key index check
	// reads the kept form's key and passes.
	if err := s.VerifyKeyIndex(ctx); err != nil {
		t.Errorf("VerifyKeyIndex after the upgrade: %v", err)
	}
}

// A group commit carrying a key refused earlier (its marker row) is a key
// conflict naming it, and nothing of the batch stays: not the other row,
// not the counters. Then the key still answers its refusal. (PostgreSQL:
// the single statement fails on the marker and the batch is declined to
// the transaction that names the key.)
func testRefusedKeyInGroupCommit(t *testing.T, s *sqlstore.Store) {
	ctx := testCtx(t)
	const w = "w:spendable"
	if err := s.Post(ctx, ledger.Posting{ID: "fund", Legs: []ledger.Leg{ledger.Credit(w, 100), ledger.Debit(ledger.Revenue, 100)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSession(ctx, netting.SessionMeta{ID: "s", Scope: "shop", NodeID: "n1", ChunkWidth: 16}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendRecording(ctx, nil, []netting.RefusedKey{{Key: "gone", SessionID: "s", Reason: netting.ReasonInsufficientFunds}}); err != nil {
		t.Fatal(err)
	}
	spend := []ledger.AccountDelta{{Account: w, Delta: -10}, {Account: "platform:sink", Delta: 10}}
	_, err := s.ReserveAndAppend(ctx, nil, [][]ledger.AccountDelta{spend, spend}, func(granted []bool) []netting.JournalRecord {
		var out []netting.JournalRecord
		prev := netting.GenesisHash
		for i, key := range []string{"fresh", "gone"} {
			if !granted[i] {
				continue
			}
			legs := []ledger.Leg{ledger.Debit(w, 10), ledger.Credit("platform:sink", 10)}
			r := netting.JournalRecord{SessionID: "s", Seq: int64(len(out)), Key: key, Legs: legs, PrevHash: prev, Hash: netting.ChainHash(prev, key, legs)}
			out = append(out, r)
			prev = r.Hash
		}
		return out
	})
	var kc *netting.KeyConflictError
	if !errors.As(err, &kc) || len(kc.Keys) != 1 || kc.Keys[0] != "gone" {
		t.Fatalf("group commit with a refused key: %v, want a key conflict naming it", err)
	}
	if recs, err := s.ReadJournal(ctx, "s"); err != nil || len(recs) != 0 {
		t.Errorf("journal after the declined batch: %+v, %v", recs, err)
	}
	if res, err := s.ReservedAll(ctx); err != nil || len(res) != 0 {
		t.Errorf("counters after the declined batch: %v, %v", res, err)
	}
	if a, err := s.LookupAnswer(ctx, "gone"); err != nil || !a.Found || !a.Refused {
		t.Errorf("LookupAnswer(gone) = %+v, %v", a, err)
	}
	if a, err := s.LookupAnswer(ctx, "fresh"); err != nil || a.Found {
		t.Errorf("LookupAnswer(fresh) = %+v, %v", a, err)
	}
}

func TestRefusedKeyInGroupCommitSQLite(t *testing.T) { testRefusedKeyInGroupCommit(t, openSQLite(t)) }
