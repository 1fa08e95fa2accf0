package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// testMigrations opens the same database twice: the first open migrates an
// empty database, the second finds it current, applies nothing and keeps the
// data.
func testMigrations(t *testing.T, open func(t *testing.T) *sqlstore.Store) {
	ctx := testCtx(t)
	s := open(t)
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != sqlstore.LatestSchemaVersion {
		t.Fatalf("schema version %d after open, want %d", v, sqlstore.LatestSchemaVersion)
	}
	if err := s.Post(ctx, ledger.Posting{ID: "fund", Legs: []ledger.Leg{ledger.Credit("a:spendable", 7), ledger.Debit(ledger.Revenue, 7)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	defer s.Close()
	if v, err := s.SchemaVersion(ctx); err != nil || v != sqlstore.LatestSchemaVersion {
		t.Fatalf("reopen: version %d, %v", v, err)
	}
	if b, err := s.Balance(ctx, "a:spendable"); err != nil || b != 7 {
		t.Fatalf("reopen lost data: balance %d, %v", b, err)
	}
}

// testConcurrentOpen opens one fresh database from several goroutines at
// once: the migration lock must let exactly one migrate and the rest see the
// result.
func testConcurrentOpen(t *testing.T, url string) {
	ctx := testCtx(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	stores := make([]*sqlstore.Store, n)
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = sqlstore.OpenPostgres(ctx, url) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
			continue
		}
		if v, err := stores[i].SchemaVersion(ctx); err != nil || v != sqlstore.LatestSchemaVersion {
			t.Errorf("open %d: version %d, %v", i, v, err)
		}
		stores[i].Close()
	}
}

// A SQLite database written at schema version 2 keeps every balance,
// counter, journal row and key through version 3's table rebuilds, and the
// upgraded store goes on appending to the same journal.
func TestSQLiteUpgradeFrom2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netting.db")
	testUpgrade(t, 2,
		func(ctx context.Context, version int) (*sqlstore.Store, error) {
			return sqlstore.OpenSQLiteAtVersion(ctx, path, version)
		},
		func(ctx context.Context) (*sqlstore.Store, error) { return sqlstore.OpenSQLite(ctx, path) }, nil)
}

// testUpgrade writes a balance, two counters and a journal row on a store
// opened at schema version from, reopens it at the latest version, and
// checks that everything is still there and the upgraded store goes on
// appending to the same journal and refusing a taken key.
//
// inspectOld, if not nil, sees the old store, written, before it closes.
func testUpgrade(t *testing.T, from int, openAt func(ctx context.Context, version int) (*sqlstore.Store, error), open func(ctx context.Context) (*sqlstore.Store, error), inspectOld func(ctx context.Context, old *sqlstore.Store)) *sqlstore.Store {
	t.Helper()
	ctx := testCtx(t)
	old, err := openAt(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := old.SchemaVersion(ctx); err != nil || v != from {
		t.Fatalf("old store at version %d, %v; want %d", v, err, from)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(old.Post(ctx, ledger.Posting{ID: "fund", Legs: []ledger.Leg{ledger.Credit("alice:spendable", 100), ledger.Debit(ledger.Revenue, 100)}}))
	if _, err := old.CreateSession(ctx, netting.SessionMeta{ID: "s", Scope: "shop", NodeID: "n1", ChunkWidth: 16}); err != nil {
		t.Fatal(err)
	}
	buy := []ledger.Leg{ledger.Debit("alice:spendable", 30), ledger.Credit("bob:earned", 30)}
	// The old schema's counters hold the net alone (written as the old
	// code did: today's Reserve needs version 7's debits), and a stray
	// counter that no journal backs, which the upgrade's rebuild drops.
	must(old.ExecForTest(ctx, `INSERT INTO netting_reservations (account, pending) VALUES (?, ?), (?, ?), (?, ?)`,
		"alice:spendable", -30, "bob:earned", 30, "ghost:spendable", -9))
	first := netting.JournalRecord{SessionID: "s", Seq: 0, Key: "k0", Legs: buy, PrevHash: netting.GenesisHash, Hash: netting.ChainHash(netting.GenesisHash, "k0", buy)}
	must(old.Append(ctx, []netting.JournalRecord{first}))
	if inspectOld != nil {
		inspectOld(ctx, old)
	}
	must(old.Close())

	s, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if v, err := s.SchemaVersion(ctx); err != nil || v != sqlstore.LatestSchemaVersion {
		t.Fatalf("upgraded store at version %d, %v; want %d", v, err, sqlstore.LatestSchemaVersion)
	}
	if b, err := s.Balance(ctx, "alice:spendable"); err != nil || b != 100 {
		t.Errorf("alice balance %d, %v after the upgrade; want 100", b, err)
	}
	if p, err := s.Pending(ctx, "alice:spendable"); err != nil || p != -30 {
		t.Errorf("alice pending %d, %v after the upgrade; want -30", p, err)
	}
	if p, err := s.Pending(ctx, "bob:earned"); err != nil || p != 30 {
		t.Errorf("bob pending %d, %v after the upgrade; want 30", p, err)
	}
	// Version 7 rebuilt both sides from the unsettled journal.
	if r, err := s.ReservedAll(ctx); err != nil || len(r) != 2 || r["alice:spendable"] != (netting.Reserved{Debits: -30}) || r["bob:earned"] != (netting.Reserved{Credits: 30}) {
		t.Errorf("reserved after the upgrade = %v, %v; want alice's debit and bob's credit on their sides, no ghost", r, err)
	}
	if r, ok, err := s.LookupKey(ctx, "k0"); err != nil || !ok || r.Hash != first.Hash || r.SessionID != "s" {
		t.Errorf("LookupKey(k0) = %+v, %v, %v after the upgrade", r, ok, err)
	}
	// The upgraded tables take the next group commit and keep refusing a
	// taken key.
	second := netting.JournalRecord{SessionID: "s", Seq: 1, Key: "k1", Legs: buy, PrevHash: first.Hash, Hash: netting.ChainHash(first.Hash, "k1", buy)}
	granted, err := s.ReserveAndAppend(ctx, nil, [][]ledger.AccountDelta{{{Account: "alice:spendable", Delta: -30}, {Account: "bob:earned", Delta: 30}}},
		func([]bool) []netting.JournalRecord { return []netting.JournalRecord{second} })
	if err != nil || !granted[0] {
		t.Fatalf("ReserveAndAppend after the upgrade: %v, %v", granted, err)
	}
	j, err := s.ReadJournal(ctx, "s")
	must(err)
	if len(j) != 2 || j[0].Key != "k0" || j[1].Key != "k1" {
		t.Fatalf("journal after the upgrade = %+v, want k0, k1", j)
	}
	if _, err := netting.VerifyChain("s", j); err != nil {
		t.Errorf("chain after the upgrade: %v", err)
	}
	dup := netting.JournalRecord{SessionID: "s", Seq: 2, Key: "k0", Legs: buy, PrevHash: second.Hash, Hash: netting.ChainHash(second.Hash, "k0", buy)}
	if err := s.Append(ctx, []netting.JournalRecord{dup}); !errors.Is(err, netting.ErrKeyConflict) {
		t.Errorf("append of a taken key after the upgrade: %v, want ErrKeyConflict", err)
	}
	return s
}

// A PostgreSQL database written at schema version 3 keeps its data through
// version 4's rewrite of the counter tables, which leaves them with room for
// in-place (HOT) updates, and version 5's byte-order identifiers.
func testPostgresUpgradeFrom3(t *testing.T, url string) {
	counters := []string{"netting_reservations", "ledger_balances"}
	fileNodes := map[string]int64{}
	s := testUpgrade(t, 3,
		func(ctx context.Context, version int) (*sqlstore.Store, error) {
			return sqlstore.OpenPostgresAtVersion(ctx, url, version)
		},
		func(ctx context.Context) (*sqlstore.Store, error) { return sqlstore.OpenPostgres(ctx, url) },
		func(ctx context.Context, old *sqlstore.Store) {
			// Statistics, as a database in use has: the type change of
			// version 5 drops them, and it must put them back.
			if err := old.AnalyzeAll(ctx); err != nil {
				t.Fatal(err)
			}
			for _, table := range counters {
				n, err := old.TableFileNode(ctx, table)
				if err != nil {
					t.Fatal(err)
				}
				fileNodes[table] = n
			}
		})
	ctx := testCtx(t)
	// The one group commit after the upgrade took the single statement: it
	// runs on the upgraded tables, not only the request-by-request path.
	if single, declined := s.GroupCommitStats(); single != 1 || declined != 0 {
		t.Errorf("group commits after the upgrade: %d single, %d declined; want 1, 0", single, declined)
	}
	for _, table := range counters {
		if ff, err := s.TableFillFactor(ctx, table); err != nil || ff != 30 {
			t.Errorf("%s fillfactor = %d, %v after the upgrade; want 30", table, ff, err)
		}
		// Rewritten (CLUSTER), so the existing rows are at the new fill
		// factor too, and not left marked for a later bare CLUSTER.
		if n, err := s.TableFileNode(ctx, table); err != nil || n == fileNodes[table] {
			t.Errorf("%s file node %d, %v after the upgrade, %d before: not rewritten", table, n, err, fileNodes[table])
		}
		if c, err := s.TableClustered(ctx, table); err != nil || c {
			t.Errorf("%s still marked for CLUSTER (%v, %v) after the upgrade", table, c, err)
		}
	}
	for _, col := range [][2]string{
		{"ledger_postings", "id"}, {"ledger_entries", "posting_id"}, {"ledger_entries", "account"},
		{"ledger_balances", "account"}, {"netting_sessions", "id"}, {"netting_batches", "session_id"},
		{"netting_keys", "key"}, {"netting_reservations", "account"},
	} {
		if c, err := s.ColumnCollation(ctx, col[0], col[1]); err != nil || c != "C" {
			t.Errorf("%s.%s collation = %q, %v after the upgrade; want C", col[0], col[1], c, err)
		}
		if ok, err := s.ColumnHasStats(ctx, col[0], col[1]); err != nil || !ok {
			t.Errorf("%s.%s has no planner statistics after the upgrade (%v)", col[0], col[1], err)
		}
	}
}

// testUpgradeRefusals upgrades a database written at schema 7 (the schema
// before refused keys were remembered) and checks that its journal still
// answers and that the upgraded store remembers a refusal as its first
// answer, durably across a reopen: a refused key's append is a key
// conflict, a journaled key written before the upgrade is never recorded
// as refused.
func testUpgradeRefusals(t *testing.T, openAt func(ctx context.Context, version int) (*sqlstore.Store, error)) {
	t.Helper()
	ctx := testCtx(t)
	old, err := openAt(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.CreateSession(ctx, netting.SessionMeta{ID: "s", Scope: "shop", NodeID: "n1", ChunkWidth: 16}); err != nil {
		t.Fatal(err)
	}
	legs := []ledger.Leg{ledger.Debit("platform:mint", 5), ledger.Credit("alice:spendable", 5)}
	first := netting.JournalRecord{SessionID: "s", Seq: 0, Key: "k0", Legs: legs, PrevHash: netting.GenesisHash, Hash: netting.ChainHash(netting.GenesisHash, "k0", legs)}
	must(old.Append(ctx, []netting.JournalRecord{first}))
	must(old.Close())

	s, err := openAt(ctx, sqlstore.LatestSchemaVersion)
	must(err)
	if v, err := s.SchemaVersion(ctx); err != nil || v != sqlstore.LatestSchemaVersion {
		t.Fatalf("upgraded store at version %d, %v", v, err)
	}
	second := netting.JournalRecord{SessionID: "s", Seq: 1, Key: "k1", Legs: legs, PrevHash: first.Hash, Hash: netting.ChainHash(first.Hash, "k1", legs)}
	refused := []netting.RefusedKey{{Key: "no", SessionID: "s", Reason: netting.ReasonInsufficientFunds}, {Key: "k0", SessionID: "s", Reason: netting.ReasonInsufficientFunds}}
	// (build may be called more than once; the last call's output commits.)
	g, err := s.ReserveAndRecord(ctx, nil, [][]ledger.AccountDelta{{{Account: "alice:spendable", Delta: 5}}, {{Account: "alice:spendable", Delta: -1000}}},
		func(g []bool) ([]netting.JournalRecord, []netting.RefusedKey) {
			if g[1] {
				return []netting.JournalRecord{second}, nil // not this grant's
			}
			return []netting.JournalRecord{second}, refused
		})
	must(err)
	if !g[0] || g[1] {
		t.Errorf("granted %v, want the credit only", g)
	}
	must(s.Close())

	s, err = openAt(ctx, sqlstore.LatestSchemaVersion) // a restart: what is durable
	must(err)
	t.Cleanup(func() { s.Close() })
	if a, err := s.LookupAnswer(ctx, "k0"); err != nil || !a.Found || a.Refused || a.Record.Hash != first.Hash {
		t.Errorf("LookupAnswer(k0) = %+v, %v; want its journal row from before the upgrade", a, err)
	}
	if a, err := s.LookupAnswer(ctx, "no"); err != nil || !a.Found || !a.Refused || a.Refusal.Reason != netting.ReasonInsufficientFunds {
		t.Errorf("LookupAnswer(no) = %+v, %v; want its refusal", a, err)
	}
	third := netting.JournalRecord{SessionID: "s", Seq: 2, Key: "no", Legs: legs, PrevHash: second.Hash, Hash: netting.ChainHash(second.Hash, "no", legs)}
	var kc *netting.KeyConflictError
	if err := s.Append(ctx, []netting.JournalRecord{third}); !errors.As(err, &kc) {
		t.Errorf("append of the refused key: %v, want a key conflict", err)
	}
	j, err := s.ReadJournal(ctx, "s")
	must(err)
	if len(j) != 2 {
		t.Errorf("journal has %d rows, want k0 and k1", len(j))
	}
}

// A SQLite database at schema 7 upgrades to remembered refusals.
func TestSQLiteUpgradeRefusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netting.db")
	testUpgradeRefusals(t, func(ctx context.Context, version int) (*sqlstore.Store, error) {
		return sqlstore.OpenSQLiteAtVersion(ctx, path, version)
	})
}

// testUpgradeBatches upgrades a database written at schema 8 by the
// current code (one journal row per movement) to the batch form of schema
// 9 and checks that every journal reads back exactly as it did — rows,
// hashes, times, and the chain's verdict, a broken link and a gap
// included — that every key answers as before, and that the upgraded
// store appends to the same journals and refuses taken and refused keys.
func testUpgradeBatches(t *testing.T, openAt func(ctx context.Context, version int) (*sqlstore.Store, error)) {
	t.Helper()
	ctx := testCtx(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	old, err := openAt(ctx, 8)
	must(err)
	if v, err := old.SchemaVersion(ctx); err != nil || v != 8 {
		t.Fatalf("old store at version %d, %v; want 8", v, err)
	}
	legs := func(i int) []ledger.Leg {
		return []ledger.Leg{ledger.Debit("platform:mint", int64(1+i%97)), ledger.Credit(fmt.Sprintf("w%d:spendable", i%13), int64(1+i%97))}
	}
	// s1: appends of several sizes; s2: a row whose prev hash is tampered
	// with and a row deleted (a gap); s3: more rows than one batch of the
	// upgrade holds, in one append. And a refused key.
	heads := map[string]string{}
	next := map[string]int64{}
	appendN := func(st *sqlstore.Store, sid string, n int) []netting.JournalRecord {
		t.Helper()
		head, ok := heads[sid]
		if !ok {
			head = netting.GenesisHash
		}
		var recs []netting.JournalRecord
		for range n {
			seq := next[sid]
			key := fmt.Sprintf("%s-k%d", sid, seq)
			l := legs(int(seq))
			h := netting.ChainHash(head, key, l)
			recs = append(recs, netting.JournalRecord{SessionID: sid, Seq: seq, Key: key, Legs: l, PrevHash: head, Hash: h})
			head, next[sid] = h, seq+1
		}
		must(st.Append(ctx, recs))
		heads[sid] = head
		return recs
	}
	sessions := []string{"s1", "s2", "s3"}
	for _, sid := range sessions {
		if _, err := old.CreateSession(ctx, netting.SessionMeta{ID: sid, Scope: "shop", NodeID: "n1", ChunkWidth: 16}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{3, 1, 5} {
		appendN(old, "s1", n)
	}
	appendN(old, "s2", 6)
	appendN(old, "s2", 4)
	must(old.ExecForTest(ctx, `UPDATE netting_journal SET prev_hash = ? WHERE session_id = ? AND seq = ?`, "tampered", "s2", 2))
	must(old.ExecForTest(ctx, `DELETE FROM netting_journal WHERE session_id = ? AND seq = ?`, "s2", 7))
	appendN(old, "s3", 5000)
	must(old.AppendRecording(ctx, nil, []netting.RefusedKey{{Key: "refused", SessionID: "s1", Reason: netting.ReasonInsufficientFunds}}))
	before := map[string][]netting.JournalRecord{}
	verdict := map[string]string{}
	for _, sid := range sessions {
		recs, err := old.ReadJournal(ctx, sid)
		must(err)
		before[sid] = recs
		head, err := netting.VerifyChain(sid, recs)
		verdict[sid] = fmt.Sprint(head, err)
	}
	if !strings.Contains(verdict["s2"], "seq 2") {
		t.Fatalf("s2's chain before the upgrade: %s; want a break at seq 2", verdict["s2"])
	}
	must(old.Close())

	s, err := openAt(ctx, sqlstore.LatestSchemaVersion)
	must(err)
	t.Cleanup(func() { s.Close() })
	if v, err := s.SchemaVersion(ctx); err != nil || v != sqlstore.LatestSchemaVersion {
		t.Fatalf("upgraded store at version %d, %v", v, err)
	}
	for _, sid := range sessions {
		recs, err := s.ReadJournal(ctx, sid)
		must(err)
		if !reflect.DeepEqual(recs, before[sid]) {
			t.Errorf("%s: journal after the upgrade differs: %d rows, %d before", sid, len(recs), len(before[sid]))
		}
		head, err := netting.VerifyChain(sid, recs)
		if got := fmt.Sprint(head, err); got != verdict[sid] {
			t.Errorf("%s: chain after the upgrade %s, before %s", sid, got, verdict[sid])
		}
		for i, r := range before[sid] {
			if len(before[sid]) > 100 && i%97 != 0 && i != len(before[sid])-1 {
				continue // each lookup decodes its batch: a sample of a long journal
			}
			got, ok, err := s.LookupKey(ctx, r.Key)
			if err != nil || !ok || !reflect.DeepEqual(got, r) {
				t.Fatalf("LookupKey(%s) after the upgrade = %+v, %v, %v; want %+v", r.Key, got, ok, err, r)
			}
		}
	}
	if a, err := s.LookupAnswer(ctx, "refused"); err != nil || !a.Found || !a.Refused {
		t.Errorf("LookupAnswer(refused) after the upgrade = %+v, %v", a, err)
	}
	// The journals go on, and taken or refused keys stay taken.
	appendN(s, "s1", 2)
	recs, err := s.ReadJournal(ctx, "s1")
	must(err)
	if _, err := netting.VerifyChain("s1", recs); err != nil || len(recs) != 11 {
		t.Errorf("s1 after an append on the upgraded store: %d rows, %v", len(recs), err)
	}
	for _, key := range []string{"s3-k4999", "refused"} {
		l := legs(0)
		dup := netting.JournalRecord{SessionID: "s1", Seq: next["s1"], Key: key, Legs: l, PrevHash: heads["s1"], Hash: netting.ChainHash(heads["s1"], key, l)}
		var kc *netting.KeyConflictError
		if err := s.Append(ctx, []netting.JournalRecord{dup}); !errors.As(err, &kc) || len(kc.Keys) != 1 || kc.Keys[0] != key {
			t.Errorf("append of %s after the upgrade: %v, want a key conflict naming it", key, err)
		}
	}
}

// A SQLite database at schema 8 upgrades to the batch form.
func TestSQLiteUpgradeBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netting.db")
	testUpgradeBatches(t, func(ctx context.Context, version int) (*sqlstore.Store, error) {
		return sqlstore.OpenSQLiteAtVersion(ctx, path, version)
	})
}
