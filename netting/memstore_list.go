package netting

import (
	"context"
	"slices"
)

// ListSessions returns the sessions whose id sorts after after (bytewise),
// at most limit of them (limit ≥ 1), settled or not, with or without
// journal rows. It is not part of the Store port: it is the read an audit
// needs to see every session (econ.Audit), which ListUnsettled and the
// postings cannot give it. sqlstore.Store has the same method.
func (m *MemStore) ListSessions(ctx context.Context, after string, limit int) ([]SessionMeta, error) {
	if limit < 1 {
		return nil, nil
	}
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.sessions))
	for id := range m.sessions {
		if id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := make([]SessionMeta, 0, min(limit, len(ids)))
	for _, id := range ids[:min(limit, len(ids))] {
		out = append(out, m.sessions[id].meta)
	}
	return out, nil
}
