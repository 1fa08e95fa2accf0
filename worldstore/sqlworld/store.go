package sqlworld

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/dburl"
	"github.com/shardwise/shardwise/worldstore"
)

var _ worldstore.Store = (*Store)(nil)

// CodeCorrupt is the code of stored rows that break the schema's
// invariants (an edit missing below the chunk's revision).
const CodeCorrupt = "WORLDSTORE.CORRUPT"

// ErrCorrupt matches a read that found the stored rows inconsistent.
var ErrCorrupt = errcode.New(CodeCorrupt, "sqlworld: stored world data inconsistent")

// Store is the world store on one SQL database. It is safe for concurrent
// use by many goroutines and by many processes on one database.
type Store struct {
	// db runs every write. On SQLite it holds exactly one connection, so
	// writers queue in Go instead of spinning on SQLITE_BUSY, and each
	// write transaction begins IMMEDIATE so another process cannot upgrade
	// a read lock under it.
	db *sql.DB
	// rdb runs plain reads: on SQLite a separate read-only pool (WAL lets
	// readers run beside the writer), otherwise db.
	rdb  *sql.DB
	pool *pgxpool.Pool // PostgreSQL only; closed after db.
	d    dialect

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// sqliteBusyTimeout is how long a SQLite connection waits for another
// process's lock before failing with SQLITE_BUSY (then retried). Writers
// inside one process never wait on it: they queue for the writer.
const sqliteBusyTimeout = 10 * time.Second

// sqliteReaders is the size of the SQLite read pool.
const sqliteReaders = 4

// maxTxAttempts bounds the reruns of a transaction that failed on a
// transient conflict.
const maxTxAttempts = 8

// Open opens the store named by rawURL (see the package doc for the forms)
// and applies pending migrations.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	kind, target, err := dburl.Parse("url", rawURL)
	if err != nil {
		return nil, err
	}
	if kind == dburl.Postgres {
		return OpenPostgres(ctx, target)
	}
	return OpenSQLite(ctx, target)
}

// OpenSQLite opens (creating if needed) the SQLite database at path, or a
// private in-memory database for ":memory:", and applies pending
// migrations. The database runs in WAL mode with synchronous=FULL.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		// The driver reads '?' as the start of its options.
		return nil, errcode.Config("path", path, "must be non-empty and contain no '?' or '#'")
	}
	pragmas := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)",
		sqliteBusyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", path+"?"+pragmas+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlworld: open sqlite %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	s := &Store{db: db, rdb: db, d: sqliteDialect}
	// The writer creates the file and switches it to WAL before any reader
	// opens it.
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if path == ":memory:" {
		// Each connection to ":memory:" is its own database: the writer's
		// one connection serves the reads too.
		return s, nil
	}
	rdb, err := sql.Open("sqlite", path+"?"+pragmas+"&_pragma=query_only(1)")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlworld: open sqlite readers %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(sqliteReaders)
	rdb.SetMaxIdleConns(sqliteReaders)
	s.rdb = rdb
	return s, nil
}

// OpenPostgres connects to the PostgreSQL database at url (a libpq URL or
// key=value string that pgx accepts; the pool is sized by its
// pool_max_conns, default max(4, cores)) and applies pending migrations.
func OpenPostgres(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("sqlworld: postgres url: %w", err) // pgx redacts the password
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("sqlworld: postgres pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("sqlworld: postgres ping: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	s := &Store{db: db, rdb: db, pool: pool, d: postgresDialect}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Dialect names the engine under the store: "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.d.name }

// Close releases the database handles. It is idempotent; every call
// returns the first call's result. Calls that start after it return
// worldstore.ErrClosed; calls already running fail with it too, or finish.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		var errs []error
		if s.rdb != s.db {
			errs = append(errs, s.rdb.Close())
		}
		errs = append(errs, s.db.Close())
		if s.pool != nil {
			s.pool.Close()
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// live refuses a call on a closed store.
func (s *Store) live() error {
	if s.closed.Load() {
		return worldstore.ErrClosed
	}
	return nil
}

// fail wraps a database error of operation op. A call that lost a race
// with Close reports ErrClosed, not the driver's closed-handle error; a
// context error stays matchable with errors.Is.
func (s *Store) fail(op string, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("sqlworld: %s: %w", op, worldstore.ErrClosed)
	}
	return fmt.Errorf("sqlworld: %s: %w", op, err)
}

// inTx runs fn in a write transaction, committing when fn returns nil and
// rolling back otherwise. A transient conflict reruns fn from the start, so
// fn must have no effects outside tx.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.retry(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback() // the transaction's own error is the one to report
			return err
		}
		return tx.Commit()
	})
}

// retry runs fn until it succeeds, fails for good, or has failed
// transiently maxTxAttempts times.
func (s *Store) retry(ctx context.Context, fn func() error) error {
	var err error
	for range maxTxAttempts {
		err = fn()
		if err == nil || !s.d.isRetryable(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// nonNil is b, or an empty non-nil slice: the drivers bind a nil []byte as
// NULL, and the byte columns are NOT NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// orNil is b, or nil when it is empty (worldstore invariant 5).
func orNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
