package sqlstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
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
