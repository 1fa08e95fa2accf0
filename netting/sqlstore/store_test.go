package sqlstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
	"github.com/shardwise/shardwise/netting/sqlstore/sqlitetest"
	"github.com/shardwise/shardwise/netting/storetest"
)

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// openSQLite opens a fresh SQLite store in t's temp dir, closed at cleanup:
// on a copy of the test binary's migrated file (sqlitetest). The copy
// skips the migrations' durable commits (34 ms a store against 6 ms under
// -race, measured); the migrations are tested from empty files
// (migrations_test.go).
func openSQLite(t testing.TB) *sqlstore.Store {
	t.Helper()
	s, _ := sqlitetest.Open(t, "netting.db")
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

// postgresTemplate opens PostgreSQL stores on databases of one template a
// store migrated once (testenv.Template): creating a database was most of
// a store's opening (0.25 s of the 0.52 s an empty database and its
// migrations took, measured). An emptied database holds what a fresh one
// migrated to the latest schema holds: the schema, its migration rows and
// the ledger's head at genesis. Migrations, upgrades and the
// fresh-database checks open empty databases (openPostgres).
type postgresTemplate struct{ *testenv.Template }

func newPostgresTemplate(t testing.TB, pg *testenv.PostgresServer) *postgresTemplate {
	t.Helper()
	migrate := func(dbURL string) error {
		s, err := sqlstore.OpenPostgres(testCtx(t), dbURL)
		if err != nil {
			return err
		}
		return s.Close()
	}
	// ledger_chain is reset by emptyTables' own statements.
	return &postgresTemplate{pg.NewTemplate(t, migrate, emptyTables, "schema_migrations", "ledger_chain")}
}

// emptyTables is what makes a used database equal to a fresh copy of the
// template again: every table a migration creates, emptied, and the
// ledger's head row as schema 6 writes it on an empty ledger. A migration
// that adds a table adds it here (the template fails the test when one is
// missing).
const emptyTables = `TRUNCATE ledger_entries, ledger_postings, ledger_balances, netting_batches, netting_keys, netting_sessions, netting_reservations, netting_refusals RESTART IDENTITY;
	DELETE FROM ledger_chain;
	INSERT INTO ledger_chain (id, chain_len, head_hash) VALUES (1, 0, '` + netting.GenesisHash + `')`

// open opens a store on an emptied database or a new copy of the
// template, closed at cleanup (before the database is emptied for the
// next open).
func (tm *postgresTemplate) open(t testing.TB) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.OpenPostgres(testCtx(t), tm.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The two contract runs are independent (their own files, their own
// server) and mostly wait on the database, so they run side by side.
func TestContractSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) netting.Store { return tamperable{openSQLite(t)} })
}

// TestPostgres runs everything that needs PostgreSQL under one throwaway
// server per test binary: the contract suite and the PostgreSQL-only tests.
func TestPostgres(t *testing.T) {
	t.Parallel()
	pg := testenv.StartPostgres(t)
	tm := newPostgresTemplate(t, pg)
	t.Run("Contract", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) netting.Store { return tamperable{tm.open(t)} })
	})
	t.Run("Chain", func(t *testing.T) {
		testChainSQL(t, func(t *testing.T) *sqlstore.Store { return tm.open(t) })
	})
	t.Run("UpgradeChains", func(t *testing.T) {
		url := pg.NewDatabase(t)
		testUpgradeChains(t,
			func(ctx context.Context, version int) (*sqlstore.Store, error) {
				return sqlstore.OpenPostgresAtVersion(ctx, url, version)
			},
			func(ctx context.Context) (*sqlstore.Store, error) { return sqlstore.OpenPostgres(ctx, url) })
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
	t.Run("UpgradeFrom3", func(t *testing.T) {
		testPostgresUpgradeFrom3(t, pg.NewDatabase(t))
	})
	t.Run("UpgradeRefusals", func(t *testing.T) {
		url := pg.NewDatabase(t)
		testUpgradeRefusals(t, func(ctx context.Context, version int) (*sqlstore.Store, error) {
			return sqlstore.OpenPostgresAtVersion(ctx, url, version)
		})
	})
	t.Run("UpgradeBatches", func(t *testing.T) {
		url := pg.NewDatabase(t)
		testUpgradeBatches(t, func(ctx context.Context, version int) (*sqlstore.Store, error) {
			return sqlstore.OpenPostgresAtVersion(ctx, url, version)
		})
	})
	t.Run("LockOrderUnderLocale", func(t *testing.T) {
		testLockOrderUnderLocale(t, pg)
	})
	t.Run("FreshNotAnalyzed", func(t *testing.T) {
		// A new database's tables must not be recorded as analyzed and
		// empty: plans cached on that (the foreign-key checks') scan
		// instead of probing until autovacuum comes by.
		s := openPostgres(t, pg)
		for _, table := range []string{"ledger_postings", "ledger_entries", "ledger_balances", "netting_sessions", "netting_batches", "netting_keys", "netting_reservations"} {
			if n, err := s.TableRelTuples(testCtx(t), table); err != nil || n != -1 {
				t.Errorf("%s reltuples = %v, %v on a new database; want -1 (never analyzed)", table, n, err)
			}
		}
	})
	t.Run("FencedSettlesTwoProcesses", func(t *testing.T) {
		testFencedSettlesTwoProcessesPostgres(t, pg)
	})
	t.Run("ConcurrentOpen", func(t *testing.T) {
		testConcurrentOpen(t, pg.NewDatabase(t))
	})
	t.Run("ReserveAndAppendMatchesReserve", func(t *testing.T) {
		testReserveAndAppendMatchesReserve(t, tm.open)
	})
	t.Run("ReadJournalInParts", func(t *testing.T) {
		testReadJournalInParts(t, tm.open(t))
	})
	t.Run("GroupCommitPaths", func(t *testing.T) {
		testGroupCommitPathsPostgres(t, tm.open(t))
	})
	t.Run("ReserveSeesSettlePosting", func(t *testing.T) {
		testReserveSeesSettlePostingPostgres(t, pg)
	})
	t.Run("Breaks", func(t *testing.T) {
		testBreaksPostgres(t, pg, tm)
	})
	t.Run("KeyIndex", func(t *testing.T) {
		testKeyIndexPostgres(t, tm)
	})
}

// A reservation that waits for a counter a settle posting holds
// (PostFencedReleasing: a balance and its counter in one transaction) must
// decide against that posting's balance, not the one from before it
// waited: alice, 100 with 40 reserved, has a 40 debit posted and released
// while a reservation of 100 waits; 60 - 100 is refused. With the balance
// read before the wait, 100 - 100 was granted.
func testReserveSeesSettlePostingPostgres(t *testing.T, pg *testenv.PostgresServer) {
	alice, bob := ledger.Spendable("alice"), ledger.Earned("bob")
	spend := []ledger.AccountDelta{{Account: alice, Delta: -100}, {Account: bob, Delta: 100}}
	calls := map[string]func(ctx context.Context, s *sqlstore.Store) (bool, error){
		"Reserve": func(ctx context.Context, s *sqlstore.Store) (bool, error) {
			g, err := s.Reserve(ctx, [][]ledger.AccountDelta{spend})
			return len(g) == 1 && g[0], err
		},
		"ReserveAndAppend": func(ctx context.Context, s *sqlstore.Store) (bool, error) {
			if _, err := s.CreateSession(ctx, netting.SessionMeta{ID: "s", Scope: "shop", NodeID: "n1", ChunkWidth: 16}); err != nil {
				return false, err
			}
			legs := []ledger.Leg{ledger.Debit(alice, 100), ledger.Credit(bob, 100)}
			g, err := s.ReserveAndAppend(ctx, nil, [][]ledger.AccountDelta{spend}, func(granted []bool) []netting.JournalRecord {
				if !granted[0] {
					return nil
				}
				return []netting.JournalRecord{{SessionID: "s", Seq: 0, Key: "k", Legs: legs, PrevHash: netting.GenesisHash, Hash: netting.ChainHash(netting.GenesisHash, "k", legs)}}
			})
			return len(g) == 1 && g[0], err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			url := pg.NewDatabase(t)
			s, err := sqlstore.OpenPostgres(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Post(ctx, ledger.Posting{ID: "fund", Legs: []ledger.Leg{ledger.Credit(alice, 100), ledger.Debit(ledger.Revenue, 100)}}); err != nil {
				t.Fatal(err)
			}
			// Both counters exist, so the reservation takes the common path
			// (lock, no create).
			if g, err := s.Reserve(ctx, [][]ledger.AccountDelta{{{Account: alice, Delta: -40}, {Account: bob, Delta: 40}}}); err != nil || !g[0] {
				t.Fatalf("setup reservation: %v, %v", g, err)
			}
			settler, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer settler.Close(ctx)
			watcher, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer watcher.Close(ctx)
			tx, err := settler.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// What PostFencedReleasing of a chunk debiting alice 40 writes,
			// held open.
			for _, q := range []string{
				`UPDATE ledger_balances SET balance = balance - 40 WHERE account = 'alice:spendable'`,
				`UPDATE netting_reservations SET pending = pending + 40 WHERE account = 'alice:spendable'`,
			} {
				if _, err := tx.Exec(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			type result struct {
				granted bool
				err     error
			}
			done := make(chan result, 1)
			go func() {
				g, err := call(ctx, s)
				done <- result{g, err}
			}()
			testenv.PollUntil(t, 30*time.Second, "the reservation to wait for the settle posting's lock", func() bool {
				var waiting int
				if err := watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
				return waiting > 0
			})
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.granted {
				t.Errorf("reservation of 100 granted against a balance of 60 with nothing pending")
			}
			bal, _ := s.Balance(ctx, alice)
			if p, _ := s.Pending(ctx, alice); bal+p < 0 {
				t.Errorf("alice promised beyond her balance: balance %d + pending %d", bal, p)
			}
		})
	}
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
	granted, err := s.ReserveAndAppend(ctx, nil, [][]ledger.AccountDelta{buy(4), buy(5)}, rows(0, "k0", "k1"))
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
	granted, err = s.ReserveAndAppend(ctx, nil, [][]ledger.AccountDelta{buy(2), buy(1)}, rows(2, "k2", "k3"))
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

// In a database whose text sorts by a language's rules (ICU "en": case and
// punctuation weigh less than letters), ReplacePending's ORDER BY account
// must still lock counters in Go's byte order — the order the group commit
// and lockPending lock them in — or the two can deadlock. Schema 5's
// COLLATE "C" makes it so; at schema 4 the orders differ, which the test
// checks first, so that it shows the locale is really in effect.
func testLockOrderUnderLocale(t *testing.T, pg *testenv.PostgresServer) {
	ctx := testCtx(t)
	accounts := []string{"Bob:spendable", "a-b:spendable", "ab:spendable", "alice:spendable", "Zed:spendable", "_x:spendable"}
	want := slices.Clone(accounts)
	sort.Strings(want)
	reserve := func(s *sqlstore.Store) {
		t.Helper()
		for _, a := range accounts {
			if _, err := s.Reserve(ctx, [][]ledger.AccountDelta{{{Account: a, Delta: 1}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const icuEn = "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en'"

	old, err := sqlstore.OpenPostgresAtVersion(ctx, pg.NewDatabaseWith(t, icuEn), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	// Counters as the old code wrote them (today's Reserve needs version
	// 7's debits).
	for _, a := range accounts {
		if err := old.ExecForTest(ctx, `INSERT INTO netting_reservations (account, pending) VALUES (?, 1)`, a); err != nil {
			t.Fatal(err)
		}
	}
	got, err := old.CounterAccountsInLockOrder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(got, want) {
		t.Fatalf("at schema 4 under ICU en the lock order is already byte order %v: the test database does not sort by the locale", got)
	}

	s, err := sqlstore.OpenPostgres(ctx, pg.NewDatabaseWith(t, icuEn))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reserve(s)
	if got, err := s.CounterAccountsInLockOrder(ctx); err != nil || !slices.Equal(got, want) {
		t.Errorf("lock order under ICU en = %v, %v; want Go's byte order %v", got, err, want)
	}
}
