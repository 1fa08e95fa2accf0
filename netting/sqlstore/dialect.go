package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// dialect is everything that differs between SQLite and PostgreSQL, in two
// parts, so that the store's logic never asks which engine it runs on.
//
// The SQL text: queries are written once, with '?' placeholders and the
// {now} and {forUpdate} macros, in the subset of SQL both engines accept
// (INSERT ... ON CONFLICT, RETURNING, CTE-free), and q rewrites them.
//
// The steps whose best form differs are the engine's (sqlite.go,
// postgres.go): how a transaction commits without a flush of its own, how
// reservation counters are locked and written, how a batch of journal rows
// goes in, and the group commit. PostgreSQL passes a batch as one array per
// column; SQLite, which has no array parameters, uses multi-row statements
// prepared once.
type dialect struct {
	name string
	// nowMicros is an expression for the database's current time in unix
	// microseconds: the one clock every node's ages are measured against.
	nowMicros string
	// forUpdate is appended to a SELECT that must lock the rows it reads for
	// the rest of the transaction. SQLite needs none: its writers are
	// serialised by the database lock taken at BEGIN IMMEDIATE.
	forUpdate string
	// numbered placeholders ($1, $2, ...) instead of '?'.
	numbered bool
	// migrationLock runs first in every migration's transaction, to
	// serialise concurrent openers; "" where BEGIN IMMEDIATE already does.
	migrationLock string
	// ownStmts picks a migration's statements for this engine alone.
	ownStmts func(m migration) []string
	engine
}

// engine is the steps of the store whose form differs between the engines.
// Each runs inside the caller's transaction (except relaxedTx and
// reserveAndAppend, which own theirs) and keeps the invariants of the
// package doc: rows of one kind locked in account order, nothing written
// on an error.
type engine interface {
	// relaxedTx runs one attempt of fn in a write transaction whose commit
	// is ordered in the log but not flushed on its own (relaxed).
	relaxedTx(ctx context.Context, s *Store, fn func(tx *sql.Tx) error) error
	// lockPending returns the counters (both sides) and the balances of
	// accounts (distinct, sorted), the counters held against every other
	// writer until tx ends; an account without a counter or a balance
	// reads 0. The balances are read after the counters are held (see
	// Reserve).
	lockPending(ctx context.Context, s *Store, tx *sql.Tx, accounts []string) (res map[string]netting.Reserved, balances map[string]int64, err error)
	// setPending writes absolute counter values: accounts sorted, their
	// net pending totals and debits beside them.
	setPending(ctx context.Context, s *Store, tx *sql.Tx, accounts []string, nets, debits []int64) error
	// insertJournal inserts recs — one session's contiguous rows, whose
	// seqs the session row has just granted — stamped now. complete
	// reports that every row went in; otherwise wrote lists the keys of
	// the rows that did (the others hit a taken key or seq) and the
	// caller builds the refusal.
	insertJournal(ctx context.Context, s *Store, tx *sql.Tx, recs []netting.JournalRecord, encoded []string, now int64) (wrote []string, complete bool, err error)
	// insertBatch is insertJournal in batch form (schema version 9, batch.go):
	// one netting_batches row of header h and body, stamped now, and
	// netting_keys rows for keys (offset i for keys[i]) skipping a key
	// already there; wrote lists the keys it wrote. A batch row that
	// exists already is ErrSeqConflict.
	insertBatch(ctx context.Context, s *Store, tx *sql.Tx, h batchHeader, body []byte, keys []string, now int64) (wrote []string, err error)
	// reserveAndAppend is netting.SharedStore.ReserveAndRecord.
	// own is the session's spendable credits (not changed).
	reserveAndAppend(ctx context.Context, s *Store, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) ([]netting.JournalRecord, []netting.RefusedKey)) ([]bool, error)
}

var (
	sqliteDialect = dialect{
		name: "sqlite",
		// unixepoch('subsec') is seconds with millisecond precision; SQLite's
		// clock has no finer grain.
		nowMicros: "CAST(unixepoch('subsec') * 1000000 AS INTEGER)",
		forUpdate: "",
		ownStmts:  func(m migration) []string { return m.sqliteStmts },
		engine:    sqliteEngine{},
	}
	postgresDialect = dialect{
		name: "postgres",
		// clock_timestamp, not now(): now() is frozen at transaction start,
		// and a long settle transaction would stamp stale times.
		nowMicros: "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT",
		forUpdate: " FOR UPDATE",
		numbered:  true,
		// An arbitrary constant key naming "shardwise sqlstore migrations".
		migrationLock: `SELECT pg_advisory_xact_lock(7305114)`,
		ownStmts:      func(m migration) []string { return m.postgresStmts },
		engine:        postgresEngine{},
	}
)

// q rewrites a query written with '?' placeholders and the {now} and
// {forUpdate} macros into this dialect. Queries are constants of this package,
// so the rewrite never sees a '?' inside a string literal.
func (d dialect) q(query string) string {
	query = strings.ReplaceAll(query, "{now}", d.nowMicros)
	query = strings.ReplaceAll(query, "{forUpdate}", d.forUpdate)
	if !d.numbered {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// isRetryable reports whether err is a transient conflict after which the
// whole transaction can be run again: a PostgreSQL deadlock or serialisation
// failure, or SQLite's busy/locked (the busy timeout already waited).
func (d dialect) isRetryable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40001" || pgErr.Code == "40P01"
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		// SQLITE_BUSY = 5, SQLITE_LOCKED = 6 (primary codes; extended codes
		// keep them in the low byte).
		c := coded.Code() & 0xff
		return c == 5 || c == 6
	}
	return false
}
