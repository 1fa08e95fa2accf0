package sqlstore

import (
	"context"
	"fmt"
)

// PostingIDsWithPrefix lists the posting ids starting with prefix, for tests
// that check exactly which postings a settle wrote.
func (s *Store) PostingIDsWithPrefix(ctx context.Context, prefix string) ([]string, error) {
	rs, err := s.rdb.QueryContext(ctx, s.d.q(`SELECT id FROM ledger_postings WHERE substr(id, 1, ?) = ? ORDER BY id`), len(prefix), prefix)
	if err != nil {
		return nil, fmt.Errorf("posting ids: %w", err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var id string
		if err := rs.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rs.Err()
}

// OpenSQLiteAtVersion opens a SQLite store migrated only up to version, to
// check the upgrades from it.
func OpenSQLiteAtVersion(ctx context.Context, path string, version int) (*Store, error) {
	return openSQLite(ctx, path, version)
}
