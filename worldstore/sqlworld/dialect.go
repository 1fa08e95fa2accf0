package sqlworld

import (
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// dialect is everything that differs between SQLite and PostgreSQL at run
// time. Queries are written once, with '?' placeholders and the {now}
// macro, in the subset of SQL both engines accept (INSERT … ON CONFLICT …
// DO UPDATE … WHERE). It is netting/sqlstore's dialect cut to what this
// package uses; the two are small enough that sharing them would cost
// more than it saves.
type dialect struct {
	name string
	// nowMicros is an expression for the database's current time in unix
	// microseconds.
	nowMicros string
	// numbered placeholders ($1, $2, …) instead of '?'.
	numbered bool
}

var (
	sqliteDialect = dialect{
		name: "sqlite",
		// unixepoch('subsec') has millisecond precision; SQLite's clock has
		// no finer grain.
		nowMicros: "CAST(unixepoch('subsec') * 1000000 AS INTEGER)",
	}
	postgresDialect = dialect{
		name: "postgres",
		// clock_timestamp, not now(): now() is the transaction's start.
		nowMicros: "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT",
		numbered:  true,
	}
)

// q rewrites a query of this package into the dialect. Queries are
// constants, so the rewrite never sees a '?' inside a string literal.
func (d dialect) q(query string) string {
	query = strings.ReplaceAll(query, "{now}", d.nowMicros)
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
// whole transaction can run again: a PostgreSQL serialisation failure or
// deadlock, or SQLite's busy/locked (after the busy timeout has waited).
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
		// SQLITE_BUSY = 5, SQLITE_LOCKED = 6; extended codes keep them in
		// the low byte.
		c := coded.Code() & 0xff
		return c == 5 || c == 6
	}
	return false
}
