package sqlitetest_test

import (
	"database/sql"
	"testing"

	"github.com/shardwise/shardwise/netting/sqlstore"
	"github.com/shardwise/shardwise/netting/sqlstore/sqlitetest"
)

// The copied file holds every migration by itself (no WAL beside it), so
// a store opened on it migrates nothing; and the store is at the latest
// schema.
func TestFileIsMigrated(t *testing.T) {
	path := sqlitetest.File(t, "netting.db")
	// A "file:" URI: the driver drops the query of a plain name, mode
	// with it, and would open (and create) the file read-write.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, top int
	if err := db.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &top); err != nil {
		t.Fatalf("the copy has no migrations table: %v", err)
	}
	if top != sqlstore.LatestSchemaVersion || n < 1 {
		t.Fatalf("the copy holds %d migrations up to %d, want up to %d", n, top, sqlstore.LatestSchemaVersion)
	}
	s, _ := sqlitetest.Open(t, "other.db")
	if v, err := s.SchemaVersion(t.Context()); err != nil || v != sqlstore.LatestSchemaVersion {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, sqlstore.LatestSchemaVersion)
	}
}
