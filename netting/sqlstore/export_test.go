package sqlstore

import (
	"context"
	"fmt"
)

// PostingIDsWithPrefix lists the posting ids starting with prefix, for tests
// that check exactly which postings a settle wrote.
func (s *Store) PostingIDsWithPrefix(ctx context.Context, prefix string) ([]string, error) {
	ids, err := queryStrings(ctx, s.rdb, s.d.q(`SELECT id FROM ledger_postings WHERE substr(id, 1, ?) = ? ORDER BY id`), len(prefix), prefix)
	if err != nil {
		return nil, fmt.Errorf("posting ids: %w", err)
	}
	return ids, nil
}

// OpenSQLiteAtVersion opens a SQLite store migrated only up to version, to
// check the upgrades from it.
func OpenSQLiteAtVersion(ctx context.Context, path string, version int) (*Store, error) {
	return openSQLite(ctx, path, version)
}

// OpenPostgresAtVersion opens a PostgreSQL store migrated only up to
// version, to check the upgrades from it.
func OpenPostgresAtVersion(ctx context.Context, url string, version int) (*Store, error) {
	return openPostgres(ctx, url, version)
}

// TableFillFactor is the fillfactor storage parameter of a PostgreSQL
// table, 0 if it is not set.
func (s *Store) TableFillFactor(ctx context.Context, table string) (int, error) {
	var ff int
	err := s.rdb.QueryRowContext(ctx, `SELECT COALESCE((SELECT split_part(o, '=', 2)::int FROM pg_class c, unnest(c.reloptions) AS o
		WHERE c.relname = $1 AND o LIKE 'fillfactor=%'), 0)`, table).Scan(&ff)
	return ff, err
}

// ColumnCollation is the collation declared on a PostgreSQL column, "" for
// the database default.
func (s *Store) ColumnCollation(ctx context.Context, table, column string) (string, error) {
	var c string
	err := s.rdb.QueryRowContext(ctx, `SELECT COALESCE(collation_name, '') FROM information_schema.columns
		WHERE table_name = $1 AND column_name = $2`, table, column).Scan(&c)
	return c, err
}

// TableFileNode is the file node of a PostgreSQL table, which changes when
// the table is rewritten (CLUSTER, VACUUM FULL).
func (s *Store) TableFileNode(ctx context.Context, table string) (int64, error) {
	var n int64
	err := s.rdb.QueryRowContext(ctx, `SELECT relfilenode FROM pg_class WHERE relname = $1`, table).Scan(&n)
	return n, err
}

// TableClustered reports whether a PostgreSQL table has an index marked
// for CLUSTER.
func (s *Store) TableClustered(ctx context.Context, table string) (bool, error) {
	var c bool
	err := s.rdb.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
		WHERE c.relname = $1 AND i.indisclustered)`, table).Scan(&c)
	return c, err
}

// AnalyzeAll runs ANALYZE on the whole PostgreSQL database.
func (s *Store) AnalyzeAll(ctx context.Context) error {
	_, err := s.rdb.ExecContext(ctx, `ANALYZE`)
	return err
}

// ColumnHasStats reports whether the PostgreSQL planner has statistics for
// a column.
func (s *Store) ColumnHasStats(ctx context.Context, table, column string) (bool, error) {
	var ok bool
	err := s.rdb.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stats WHERE tablename = $1 AND attname = $2)`, table, column).Scan(&ok)
	return ok, err
}

// TableRelTuples is pg_class.reltuples of a PostgreSQL table: -1 until
// it is first analyzed or vacuumed.
func (s *Store) TableRelTuples(ctx context.Context, table string) (float64, error) {
	var n float64
	err := s.rdb.QueryRowContext(ctx, `SELECT reltuples FROM pg_class WHERE relname = $1`, table).Scan(&n)
	return n, err
}

// CounterAccountsInLockOrder lists the reservation counters' accounts in
// the order ReplacePending locks them (ORDER BY account).
func (s *Store) CounterAccountsInLockOrder(ctx context.Context) ([]string, error) {
	return queryStrings(ctx, s.rdb, `SELECT account FROM netting_reservations ORDER BY account`)
}

// ExecForTest runs a statement on the writer, written with '?'
// placeholders, as an operator's (or an attacker's) SQL would: for the
// tests that tamper with stored rows behind the store.
func (s *Store) ExecForTest(ctx context.Context, query string, args ...any) error {
	_, err := s.db.ExecContext(ctx, s.d.q(query), args...)
	return err
}

// SetJournalReadPart sets ReadJournal's fewest rows to a part, so that a
// short journal is read in parts.
func (s *Store) SetJournalReadPart(rows int64) { s.journalReadPart = rows }
