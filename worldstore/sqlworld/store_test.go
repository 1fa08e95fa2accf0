package sqlworld_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/netting/sqlstore"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/worldstore/sqlworld"
	"github.com/shardwise/shardwise/worldstore/storetest"
)

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// open opens the store at url, closed at cleanup.
func open(t testing.TB, url string) *sqlworld.Store {
	t.Helper()
	s, err := sqlworld.Open(testCtx(t), url)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sqliteURL(t testing.TB) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "world.db")
}

func TestContractSQLite(t *testing.T) {
	image := migratedSQLite(t)
	storetest.Run(t, func(t *testing.T) worldstore.Store { return open(t, image.url(t)) })
	// Two stores on one file: two writer connections, as two processes
	// would have, queueing on the file lock (busy timeout, retry).
	storetest.RunShared(t, func(t *testing.T) (a, b worldstore.Store) {
		url := image.url(t)
		return open(t, url), open(t, url)
	})
}

// sqliteImage is the file a store leaves on a database it migrated (its
// close checkpoints the WAL into it): the contract opens a store per case
// on a copy, sparing each case the migrations' durable commits (issue 28:
// the suite's time). Migrations and reopening are tested from empty files
// (sqliteURL).
type sqliteImage []byte

func migratedSQLite(t *testing.T) sqliteImage {
	t.Helper()
	path := filepath.Join(t.TempDir(), "template.db")
	open(t, "sqlite://"+path).Close()
	image, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return image
}

// url writes a copy of the image in t's temp dir and returns its URL.
func (im sqliteImage) url(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "world.db")
	if err := os.WriteFile(path, im, 0o600); err != nil {
		t.Fatal(err)
	}
	return "sqlite://" + path
}

func TestContractSQLiteInMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) worldstore.Store { return open(t, "sqlite://:memory:") })
}

// TestPostgres runs everything that needs PostgreSQL under one throwaway
// server per test binary.
func TestPostgres(t *testing.T) {
	pg := testenv.StartPostgres(t)
	tm := newPostgresTemplate(t, pg)
	t.Run("Contract", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) worldstore.Store { return open(t, tm.Database(t)) })
	})
	t.Run("ContractShared", func(t *testing.T) {
		storetest.RunShared(t, func(t *testing.T) (a, b worldstore.Store) {
			url := tm.Database(t)
			return open(t, url), open(t, url)
		})
	})
	t.Run("Reopen", func(t *testing.T) { testReopen(t, pg.NewDatabase(t)) })
	t.Run("MigrateFromVersion1", func(t *testing.T) {
		url := pg.NewDatabase(t)
		testMigrateFromVersion1(t, url, "pgx", url, "postgres")
	})
	t.Run("ConcurrentOpeners", func(t *testing.T) {
		url := pg.NewDatabase(t)
		testConcurrentOpeners(t, url, func(t *testing.T) int {
			conn, err := pgx.Connect(testCtx(t), url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(testCtx(t))
			var n int
			if err := conn.QueryRow(testCtx(t), `SELECT COUNT(*) FROM worldstore_migrations`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		})
	})
	t.Run("BesideNettingStore", func(t *testing.T) {
		url := pg.NewDatabase(t)
		testBesideNetting(t, url, func(ctx context.Context) (*sqlstore.Store, error) { return sqlstore.OpenPostgres(ctx, url) })
	})
}

// newPostgresTemplate hands the contract cases databases of one template
// a store migrated once (testenv.Template): the contract opens a database
// per case, and the cases change only rows, never the schema. Reopen, the
// migrations and the openers' race open empty databases (pg.NewDatabase).
func newPostgresTemplate(t testing.TB, pg *testenv.PostgresServer) *testenv.Template {
	t.Helper()
	migrate := func(dbURL string) error {
		s, err := sqlworld.Open(testCtx(t), dbURL)
		if err != nil {
			return err
		}
		return s.Close()
	}
	return pg.NewTemplate(t, migrate, emptyWorldTables, "worldstore_migrations")
}

// emptyWorldTables makes a used database equal to a fresh copy of the
// template again. A migration that adds a table adds it here (the
// template fails the test when one is missing).
const emptyWorldTables = `TRUNCATE world_players, world_chunks, world_edits`

func TestReopenSQLite(t *testing.T) { testReopen(t, sqliteURL(t)) }

// testReopen: what a store wrote is there after it is closed and the
// database opened again (durable, and the migrations run again as no-ops).
func testReopen(t *testing.T, url string) {
	ctx := testCtx(t)
	s := open(t, url)
	p := worldstore.Player{Account: 42, Epoch: 9, Pos: torus.Pos{X: 1.5, Y: 2.5, Z: -3.5}, State: []byte("pet=fox")}
	if err := s.SavePlayer(ctx, p); err != nil {
		t.Fatal(err)
	}
	chunk := torus.ChunkPos{X: 7, Y: 8, Slab: 1}
	if _, err := s.AppendEdit(ctx, chunk, 0, worldstore.Edit{Kind: 3, Data: []byte("marker"), Account: 42}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, url)
	if v, err := s.SchemaVersion(ctx); err != nil || v != sqlworld.LatestSchemaVersion {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, sqlworld.LatestSchemaVersion)
	}
	got, err := s.LoadPlayer(ctx, 42)
	if err != nil || got.Epoch != p.Epoch || got.Pos != p.Pos || string(got.State) != "pet=fox" {
		t.Fatalf("after reopen LoadPlayer = %+v, %v; want %+v", got, err, p)
	}
	rev, es, err := s.Edits(ctx, chunk, 0)
	if err != nil || rev != 1 || len(es) != 1 || string(es[0].Edit.Data) != "marker" || es[0].Edit.Account != 42 {
		t.Fatalf("after reopen Edits = %d, %+v, %v; want the marker", rev, es, err)
	}
	// The store's clock stamped both, and recently: a wrong unit (seconds
	// for microseconds) would land decades away.
	for _, at := range []time.Time{got.Saved, es[0].Saved} {
		if d := time.Since(at); d < -time.Hour || d > time.Hour {
			t.Fatalf("Saved = %v, not within an hour of now", at)
		}
	}
}

func TestMigrateFromVersion1SQLite(t *testing.T) {
	url := sqliteURL(t)
	testMigrateFromVersion1(t, url, "sqlite", strings.TrimPrefix(url, "sqlite://"), "sqlite")
}

// testMigrateFromVersion1: a database an older release left at schema
// version 1, with a player saved, is migrated on open; the record reads
// back as not final (it was written before there were final records), so
// its session's next save applies, and a final save then fences the
// session as on a fresh database.
func testMigrateFromVersion1(t *testing.T, url, driver, dsn, dialect string) {
	ctx := testCtx(t)
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlworld.MigrateOnly(ctx, db, dialect, 1); err != nil {
		t.Fatalf("migrate to version 1: %v", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO world_players (account, epoch, x, y, z, state, saved_at) VALUES (42, 9, 1.5, 0, 0, '', 0)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, url)
	if v, err := s.SchemaVersion(ctx); err != nil || v != sqlworld.LatestSchemaVersion {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, sqlworld.LatestSchemaVersion)
	}
	got, err := s.LoadPlayer(ctx, 42)
	if err != nil || got.Epoch != 9 || got.Pos.X != 1.5 || got.Final {
		t.Fatalf("the version-1 record loads as %+v, %v; want epoch 9 at x 1.5, not final", got, err)
	}
	logout := worldstore.Player{Account: 42, Epoch: 9, Pos: torus.Pos{X: 2}, State: []byte("logout"), Final: true}
	if err := s.SavePlayer(ctx, logout); err != nil {
		t.Fatalf("the session's final save over its version-1 record: %v", err)
	}
	err = s.SavePlayer(ctx, worldstore.Player{Account: 42, Epoch: 9, Pos: torus.Pos{X: 3}})
	if !errors.Is(err, worldstore.ErrStaleEpoch) {
		t.Fatalf("a save after the final one: %v, want ErrStaleEpoch", err)
	}
	if got, err := s.LoadPlayer(ctx, 42); err != nil || got.Pos.X != 2 || !got.Final {
		t.Fatalf("after the refused save LoadPlayer = %+v, %v; want the final record", got, err)
	}
}

func TestConcurrentOpenersSQLite(t *testing.T) {
	url := sqliteURL(t)
	testConcurrentOpeners(t, url, func(t *testing.T) int {
		db, err := sql.Open("sqlite", strings.TrimPrefix(url, "sqlite://"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM worldstore_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	})
}

// testConcurrentOpeners: stores opened at once on a fresh database all
// succeed, and each migration is applied once.
func testConcurrentOpeners(t *testing.T, url string, migrationRows func(t *testing.T) int) {
	const openers = 6
	var wg sync.WaitGroup
	stores := make([]*sqlworld.Store, openers)
	errs := make([]error, openers)
	gate := make(chan struct{})
	for i := range openers {
		wg.Go(func() {
			<-gate
			stores[i], errs[i] = sqlworld.Open(testCtx(t), url)
		})
	}
	close(gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("opener %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	if n := migrationRows(t); n != sqlworld.LatestSchemaVersion {
		t.Fatalf("%d migration rows, want %d (one per version)", n, sqlworld.LatestSchemaVersion)
	}
	if err := stores[0].SavePlayer(testCtx(t), worldstore.Player{Account: 1, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[openers-1].LoadPlayer(testCtx(t), 1); err != nil {
		t.Fatal(err)
	}
}

func TestBesideNettingStoreSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	testBesideNetting(t, "sqlite://"+path, func(ctx context.Context) (*sqlstore.Store, error) { return sqlstore.OpenSQLite(ctx, path) })
}

// testBesideNetting: the world store and the netting store open on one
// database in either order; their migration histories do not collide.
func testBesideNetting(t *testing.T, url string, openNetting func(context.Context) (*sqlstore.Store, error)) {
	ctx := testCtx(t)
	w := open(t, url)
	n, err := openNetting(ctx)
	if err != nil {
		t.Fatalf("netting store after the world store: %v", err)
	}
	defer n.Close()
	if v, err := n.SchemaVersion(ctx); err != nil || v != sqlstore.LatestSchemaVersion {
		t.Fatalf("netting SchemaVersion = %d, %v; want %d", v, err, sqlstore.LatestSchemaVersion)
	}
	w.Close()
	w = open(t, url)
	if v, err := w.SchemaVersion(ctx); err != nil || v != sqlworld.LatestSchemaVersion {
		t.Fatalf("world SchemaVersion = %d, %v; want %d", v, err, sqlworld.LatestSchemaVersion)
	}
}

func TestOpenRefusesBadURLs(t *testing.T) {
	tests := []struct {
		url, field string
	}{
		{"", "url"},
		{"world.db", "url"},
		{"mysql://user:hunter2@host/db", "url"},
		{"sqlite://", "path"},
		{"sqlite:///tmp/world.db?cache=shared", "path"},
	}
	for _, tc := range tests {
		_, err := sqlworld.Open(context.Background(), tc.url)
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, errcode.ErrConfigInvalid) {
			t.Errorf("Open(%q) = %v, want a ConfigError naming %s", tc.url, err, tc.field)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q) error shows the password: %v", tc.url, err)
		}
	}
}

func TestDialect(t *testing.T) {
	if d := open(t, "sqlite://:memory:").Dialect(); d != "sqlite" {
		t.Fatalf("Dialect = %q, want sqlite", d)
	}
}
