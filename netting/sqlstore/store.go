package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/dburl"
	"github.com/shardwise/shardwise/netting"
)

var _ netting.SharedStore = (*Store)(nil)

// Store is the netting store on one SQL database. It is safe for concurrent
// use by many goroutines and, on PostgreSQL, by many processes.
type Store struct {
	// db runs every write. On SQLite it holds exactly one connection, so
	// writers queue in Go instead of spinning on SQLITE_BUSY; each write
	// transaction also begins IMMEDIATE so another process cannot upgrade
	// a read lock under us.
	db *sql.DB
	// rdb runs plain reads. On SQLite it is a separate read-only pool (WAL
	// lets readers run beside the writer); on PostgreSQL it is db.
	rdb  *sql.DB
	pool *pgxpool.Pool // PostgreSQL only; closed after db.
	// commitPool (PostgreSQL only) runs the single-statement group commit
	// (groupCommitPG): its connections default to REPEATABLE READ, so
	// each statement is its own transaction at that level, in one round
	// trip.
	commitPool *pgxpool.Pool
	d          dialect
	// schema is the version the store was migrated to on open:
	// LatestSchemaVersion, except for the old stores of the upgrade
	// tests, which write as that version did (unchained before 6).
	schema int
	// stmts caches the SQLite writer's hot statements (stmtcache.go).
	stmts stmtCache
	// journalReadPart is ReadJournal's fewest rows to a part
	// (defaultJournalReadPart).
	journalReadPart int64
	// singleCommits and declinedCommits count PostgreSQL group commits
	// by path (GroupCommitStats).
	singleCommits, declinedCommits atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// sqliteBusyTimeout is how long a SQLite connection waits for another
// process's lock before failing with SQLITE_BUSY. Writers inside this process
// never wait on it: they queue for the single writer connection.
const sqliteBusyTimeout = 10 * time.Second

// sqliteReaders is the size of the SQLite read pool.
const sqliteReaders = 4

// OpenSQLite opens (creating if needed) the SQLite database at path and
// applies pending migrations. The database runs in WAL mode with
// synchronous=FULL, so a committed transaction survives power loss: the
// journal's "accepted means durable" holds on the embedded store too.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	return openSQLite(ctx, path, LatestSchemaVersion)
}

// openSQLite is OpenSQLite migrating up to schema version upTo.
func openSQLite(ctx context.Context, path string, upTo int) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		// The driver reads '?' as the start of its options.
		return nil, errcode.Config("path", path, "must be non-empty and contain no '?' or '#'")
	}
	pragmas := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)",
		sqliteBusyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", path+"?"+pragmas+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlstore: open sqlite %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	s := &Store{db: db, d: sqliteDialect, journalReadPart: defaultJournalReadPart}
	// The writer connection creates the file and switches it to WAL before
	// any reader opens it.
	if err := s.migrateTo(ctx, upTo); err != nil {
		db.Close()
		return nil, err
	}
	// A store opened at an older schema is a test's, to write data an
	// upgrade must keep: the hot statements name columns it may not have
	// yet, so they are not prepared, and the ones it runs run unprepared.
	// The others are prepared on first use (stmtCache).
	if upTo >= LatestSchemaVersion {
		s.stmts.enable()
	}
	rdb, err := sql.Open("sqlite", path+"?"+pragmas+"&_pragma=query_only(1)")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlstore: open sqlite readers %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(sqliteReaders)
	rdb.SetMaxIdleConns(sqliteReaders)
	s.rdb = rdb
	return s, nil
}

// Open opens the store a URL names: "sqlite:///abs/path.db",
// "sqlite://rel/path.db", or "postgres://…" / "postgresql://…" (see
// OpenSQLite and OpenPostgres). Another scheme is CONFIG.INVALID (field
// "url", the password redacted).
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

// OpenPostgres connects to the PostgreSQL database at url (a libpq URL or
// key=value string that pgx accepts) and applies pending migrations. It
// opens two connection pools, both sized by url (pgxpool's pool_max_conns,
// default max(4, cores)) and both opening connections only as needed: one
// for everything, and one for the group commit's single statement, whose
// connections default to REPEATABLE READ (groupCommitPG). Budget the
// server's max_connections for both.
func OpenPostgres(ctx context.Context, url string) (*Store, error) {
	return openPostgres(ctx, url, LatestSchemaVersion)
}

// openPostgres is OpenPostgres migrating up to schema version upTo.
func openPostgres(ctx context.Context, url string, upTo int) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: postgres url: %w", err)
	}
	// One round trip per statement and no per-connection statement cache
	// by default: most statements run rarely (settle, sweep, operator
	// calls) and would each cost a Prepare round trip. The group commit's
	// statement asks for the cache itself (groupCommitPG): it runs all the
	// time, and a prepared statement lets pgx send its arrays in binary.
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: postgres pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("sqlstore: postgres ping: %w", err)
	}
	ccfg := cfg.Copy()
	params := make(map[string]string, len(cfg.ConnConfig.RuntimeParams)+1)
	for k, v := range cfg.ConnConfig.RuntimeParams {
		params[k] = v
	}
	params["default_transaction_isolation"] = "repeatable read"
	ccfg.ConnConfig.RuntimeParams = params
	commitPool, err := pgxpool.NewWithConfig(ctx, ccfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("sqlstore: postgres commit pool: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	s := &Store{db: db, rdb: db, pool: pool, commitPool: commitPool, d: postgresDialect, journalReadPart: defaultJournalReadPart}
	if err := s.migrateTo(ctx, upTo); err != nil {
		db.Close()
		pool.Close()
		commitPool.Close()
		return nil, err
	}
	return s, nil
}

// GroupCommitStats reports how many group commits (ReserveAndAppend) on
// PostgreSQL took the single statement and how many it declined to the
// request-by-request transaction — a refused reservation, a taken key, a
// sealed session, a deadlock. A high declined share means the common case
// is not common on this workload. On SQLite both are 0.
func (s *Store) GroupCommitStats() (single, declined int64) {
	return s.singleCommits.Load(), s.declinedCommits.Load()
}

// Dialect names the engine under the store: "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.d.name }

// Close releases the database handles. It is idempotent; every call returns
// the first call's result. Calls already running may fail with a closed-pool
// error; none is left running.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		errs := []error{s.stmts.close()}
		if s.rdb != nil && s.rdb != s.db {
			errs = append(errs, s.rdb.Close())
		}
		errs = append(errs, s.db.Close())
		if s.pool != nil {
			s.pool.Close()
		}
		if s.commitPool != nil {
			s.commitPool.Close()
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// maxTxAttempts bounds the retries of a transaction that failed on a
// transient conflict (deadlock, serialisation failure, busy database).
const maxTxAttempts = 8

// durability says whether a transaction's commit must reach stable storage
// before it returns.
type durability int

const (
	// durable: the commit is flushed (fsync) before it returns. Everything
	// that acknowledges something to a caller — a journal append, a
	// posting, a settle step — is durable.
	durable durability = iota
	// relaxed: the commit is ordered in the write-ahead log but not flushed
	// on its own; the next durable commit flushes it (both engines write
	// one sequential log, so a durable commit can never survive without
	// every commit before it). Only reservation counter changes use it:
	// losing the newest of them in a crash loses nothing anyone was told —
	// a reservation precedes the durable append that accepts its movement,
	// and a lost undo only overstates pending (a conservative refusal that
	// ReconcileReservations repairs).
	relaxed
)

// inTx runs fn in a durable write transaction; see inTxWith.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.inTxWith(ctx, durable, fn)
}

// inTxWith runs fn in a write transaction, committing when fn returns nil
// and rolling back otherwise. A transient conflict reruns fn from the start,
// so fn must have no effects outside tx.
func (s *Store) inTxWith(ctx context.Context, dur durability, fn func(tx *sql.Tx) error) error {
	var err error
	for attempt := 0; attempt < maxTxAttempts; attempt++ {
		err = s.tryTx(ctx, dur, fn)
		if err == nil || !s.d.isRetryable(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

func (s *Store) tryTx(ctx context.Context, dur durability, fn func(tx *sql.Tx) error) error {
	s.stmts.prepareWanted(ctx, s.db)
	if dur == relaxed {
		return s.d.relaxedTx(ctx, s, fn)
	}
	return commitTx(ctx, s.db, "", fn)
}

// commitTx runs fn in a transaction begun on db (a pool or one connection),
// after prelude if it is not "", committing when fn returns nil and rolling
// back otherwise.
func commitTx(ctx context.Context, db interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}, prelude string, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if prelude != "" {
		if _, err := tx.ExecContext(ctx, prelude); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback() // the transaction's own error is the one to report
		return err
	}
	return tx.Commit()
}

// Now returns the database's clock. Every node reads ages against this one
// clock, so skew between nodes cannot make a live epoch look old.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var us int64
	if err := s.rdb.QueryRowContext(ctx, s.d.q(`SELECT {now}`)).Scan(&us); err != nil {
		return time.Time{}, fmt.Errorf("sqlstore: now: %w", err)
	}
	return fromMicros(us), nil
}
