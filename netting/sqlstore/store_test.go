package sqlstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
	"github.com/shardwise/shardwise/netting/storetest"
)

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// openSQLite opens a fresh SQLite store in t's temp dir, closed at cleanup.
func openSQLite(t testing.TB) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.OpenSQLite(testCtx(t), filepath.Join(t.TempDir(), "netting.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openPostgres opens a store on a fresh database of pg, closed at cleanup.
func openPostgres(t testing.TB, pg *testenv.PostgresServer) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.OpenPostgres(testCtx(t), pg.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestContractSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) netting.Store { return openSQLite(t) })
}

// TestPostgres runs everything that needs PostgreSQL under one throwaway
// server per test binary: the contract suite and the PostgreSQL-only tests.
func TestPostgres(t *testing.T) {
	pg := testenv.StartPostgres(t)
	t.Run("Contract", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) netting.Store { return openPostgres(t, pg) })
	})
	t.Run("Migrations", func(t *testing.T) {
		url := pg.NewDatabase(t)
		testMigrations(t, func(t *testing.T) *sqlstore.Store {
			s, err := sqlstore.OpenPostgres(testCtx(t), url)
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
	t.Run("FencedSettlesTwoProcesses", func(t *testing.T) {
		testFencedSettlesTwoProcessesPostgres(t, pg)
	})
	t.Run("ConcurrentOpen", func(t *testing.T) {
		testConcurrentOpen(t, pg.NewDatabase(t))
	})
	t.Run("GroupCommitPaths", func(t *testing.T) {
		testGroupCommitPathsPostgres(t, openPostgres(t, pg))
	})
}

// A group commit whose requests are all granted takes the single statement
// (and its rows and counters are there); one with a refused request is
// declined and decided request by request, with the same outcome the port
// specifies.
func testGroupCommitPathsPostgres(t *testing.T, s *sqlstore.Store) {
	ctx := testCtx(t)
	if err := s.Post(ctx, ledger.Posting{ID: "fund", Legs: []ledger.Leg{ledger.Credit("alice:spendable", 10), ledger.Debit(ledger.Revenue, 10)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSession(ctx, netting.SessionMeta{ID: "s", Scope: "shop", NodeID: "n1", ChunkWidth: 16}); err != nil {
		t.Fatal(err)
	}
	buy := func(amount int64) []ledger.AccountDelta {
		return []ledger.AccountDelta{{Account: "alice:spendable", Delta: -amount}, {Account: "bob:earned", Delta: amount}}
	}
	var head netting.JournalRecord
	rows := func(first int64, keys ...string) func([]bool) []netting.JournalRecord {
		return func(granted []bool) []netting.JournalRecord {
			var out []netting.JournalRecord
			prev, seq := netting.GenesisHash, first
			if first > 0 {
				prev = head.Hash
			}
			for i, k := range keys {
				if !granted[i] {
					continue
				}
				legs := []ledger.Leg{ledger.Debit("alice:spendable", 1), ledger.Credit("bob:earned", 1)}
				r := netting.JournalRecord{SessionID: "s", Seq: seq, Key: k, Legs: legs, PrevHash: prev, Hash: netting.ChainHash(prev, k, legs)}
				out = append(out, r)
				prev, seq = r.Hash, seq+1
			}
			return out
		}
	}
	granted, err := s.ReserveAndAppend(ctx, [][]ledger.AccountDelta{buy(4), buy(5)}, rows(0, "k0", "k1"))
	if err != nil || len(granted) != 2 || !granted[0] || !granted[1] {
		t.Fatalf("all-granted batch: %v, %v", granted, err)
	}
	if single, declined := s.GroupCommitStats(); single != 1 || declined != 0 {
		t.Fatalf("after an all-granted batch: %d single, %d declined; want 1, 0", single, declined)
	}
	j, err := s.ReadJournal(ctx, "s")
	if err != nil || len(j) != 2 {
		t.Fatalf("journal after the single statement: %d rows, %v", len(j), err)
	}
	head = j[1]
	if p, _ := s.Pending(ctx, "alice:spendable"); p != -9 {
		t.Errorf("alice pending %d after the single statement, want -9", p)
	}
	// 10 - 9 leaves 1: the 2 is refused, the 1 after it granted.
	granted, err = s.ReserveAndAppend(ctx, [][]ledger.AccountDelta{buy(2), buy(1)}, rows(2, "k2", "k3"))
	if err != nil || len(granted) != 2 || granted[0] || !granted[1] {
		t.Fatalf("batch with a refusal: %v, %v; want [false true]", granted, err)
	}
	if single, declined := s.GroupCommitStats(); single != 1 || declined != 1 {
		t.Errorf("after a batch with a refusal: %d single, %d declined; want 1, 1", single, declined)
	}
	if p, _ := s.Pending(ctx, "alice:spendable"); p != -10 {
		t.Errorf("alice pending %d after the declined batch, want -10", p)
	}
	if j, _ := s.ReadJournal(ctx, "s"); len(j) != 3 || j[2].Key != "k3" {
		t.Errorf("journal after the declined batch: %+v, want k0, k1, k3", j)
	}
}

func TestMigrationsSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netting.db")
	testMigrations(t, func(t *testing.T) *sqlstore.Store {
		s, err := sqlstore.OpenSQLite(testCtx(t), path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestOpenSQLiteRefusesBadPath(t *testing.T) {
	for _, p := range []string{"", "a?b", "x#y"} {
		_, err := sqlstore.OpenSQLite(testCtx(t), p)
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != "path" {
			t.Errorf("OpenSQLite(%q) = %v, want a config error on path", p, err)
		}
	}
}
