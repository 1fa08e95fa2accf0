package sqlstore

import (
	"context"
	"fmt"

	"github.com/shardwise/shardwise/netting"
)

// ListSessions returns the sessions whose id sorts after after (the
// database's order of ids), at most limit of them (limit ≥ 1), settled or
// not, with or without journal rows. It is not part of netting's Store
// port: it is the read an audit needs to see every session (econ.Audit's
// SessionLister), which ListUnsettled and the postings cannot give it — a
// settled session with no posting at all is found nowhere else.
func (s *Store) ListSessions(ctx context.Context, after string, limit int) ([]netting.SessionMeta, error) {
	if limit < 1 {
		return nil, nil
	}
	rs, err := s.rdb.QueryContext(ctx, s.d.q(`SELECT `+sessionColumns+` FROM netting_sessions WHERE id > ? ORDER BY id LIMIT ?`), after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list sessions: %w", err)
	}
	defer rs.Close()
	var out []netting.SessionMeta
	for rs.Next() {
		r, err := scanSession(rs)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: list sessions: %w", err)
		}
		out = append(out, r.meta)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: list sessions: %w", err)
	}
	return out, nil
}
