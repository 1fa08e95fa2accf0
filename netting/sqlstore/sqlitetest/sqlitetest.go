// Package sqlitetest opens SQLite netting stores for tests on copies of one
// database file migrated once per test binary: a fresh file runs every
// migration, each a durable commit whose statements SQLite parses (under
// -race, tens of milliseconds a store), and most tests only need a store at
// the latest schema. A copy holds what a fresh file migrated to the latest
// schema holds. Tests of the migrations themselves open empty files with
// sqlstore.OpenSQLite.
package sqlitetest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/netting/sqlstore"
)

var migrated struct {
	once  sync.Once
	image []byte
	err   error
}

// image returns the bytes of a file a store migrated to the latest schema
// and closed (its close checkpointed the WAL into the file).
func image() ([]byte, error) {
	migrated.once.Do(func() {
		dir, err := os.MkdirTemp("", "sqlitetest-")
		if err != nil {
			migrated.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "template.db")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, err := sqlstore.OpenSQLite(ctx, path)
		if err != nil {
			migrated.err = err
			return
		}
		if err := s.Close(); err != nil {
			migrated.err = err
			return
		}
		migrated.image, migrated.err = os.ReadFile(path)
	})
	return migrated.image, migrated.err
}

// Image returns the bytes of a database file migrated to the latest schema
// (its WAL checkpointed into it), made once per test binary: for a test
// or benchmark that writes copies itself.
func Image(tb testing.TB) []byte {
	tb.Helper()
	im, err := image()
	if err != nil {
		tb.Fatalf("sqlitetest: migrated template: %v", err)
	}
	return im
}

// File writes a migrated database file named name in t's temp dir and
// returns its path, for a test that opens it itself (a process, a URL).
func File(t testing.TB, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, Image(t), 0o600); err != nil {
		t.Fatalf("sqlitetest: %v", err)
	}
	return path
}

// Open opens a store on a migrated file named name in t's temp dir, closed
// at cleanup, and returns it with the file's path.
func Open(t testing.TB, name string) (*sqlstore.Store, string) {
	t.Helper()
	path := File(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := sqlstore.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatalf("sqlitetest: OpenSQLite: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}
