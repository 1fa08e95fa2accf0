package sqlstore

import (
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// dialect is everything that differs between SQLite and PostgreSQL. The
// queries themselves are written once, with '?' placeholders, in the subset
// of SQL both engines accept (INSERT ... ON CONFLICT, RETURNING, CTE-free).
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
	// arrays: the engine takes array parameters (PostgreSQL), so a batch
	// statement passes one array per column to unnest instead of one
	// parameter per row and column.
	arrays bool
}

var (
	sqliteDialect = dialect{
		name: "sqlite",
		// unixepoch('subsec') is seconds with millisecond precision; SQLite's
		// clock has no finer grain.
		nowMicros: "CAST(unixepoch('subsec') * 1000000 AS INTEGER)",
		forUpdate: "",
	}
	postgresDialect = dialect{
		name: "postgres",
		// clock_timestamp, not now(): now() is frozen at transaction start,
		// and a long settle transaction would stamp stale times.
		nowMicros: "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT",
		forUpdate: " FOR UPDATE",
		numbered:  true,
		arrays:    true,
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
