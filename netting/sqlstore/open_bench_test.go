package sqlstore_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shardwise/shardwise/netting/sqlstore"
	"github.com/shardwise/shardwise/netting/sqlstore/sqlitetest"
)

// BenchmarkOpenSQLite opens and closes a store on a migrated file, as the
// tests of every package that opens a SQLite store do (issue 28: preparing
// every hot statement up front was most of this).
func BenchmarkOpenSQLite(b *testing.B) {
	image := sqlitetest.Image(b)
	path := filepath.Join(b.TempDir(), "netting.db")
	ctx := testCtx(b)
	for b.Loop() {
		b.StopTimer()
		if err := os.WriteFile(path, image, 0o600); err != nil {
			b.Fatal(err)
		}
		os.Remove(path + "-wal")
		os.Remove(path + "-shm")
		b.StartTimer()
		s, err := sqlstore.OpenSQLite(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
