package sqlworld

import (
	"context"
	"database/sql"
	"errors"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
)

// AppendEdit implements worldstore.ChunkEdits.
func (s *Store) AppendEdit(ctx context.Context, chunk torus.ChunkPos, expectRev uint64, e worldstore.Edit) (uint64, error) {
	if err := worldstore.ValidateChunk(chunk); err != nil {
		return 0, err
	}
	if err := worldstore.ValidateEdit(e); err != nil {
		return 0, err
	}
	if err := s.live(); err != nil {
		return 0, err
	}
	var refused error
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		refused = nil
		conflict := func() error {
			cur, err := chunkRev(ctx, s.d, tx, chunk)
			if err != nil {
				return err
			}
			if cur == expectRev {
				refused = worldstore.ErrChunkFull.Wrap("chunk (%d, %d, slab %d)", chunk.X, chunk.Y, chunk.Slab)
			} else {
				refused = &worldstore.ConflictError{Chunk: chunk, Expected: expectRev, Current: cur}
			}
			return nil
		}
		if expectRev >= worldstore.MaxEditsPerChunk {
			// Full, or a conflict; also keeps expectRev+1 within BIGINT.
			return conflict()
		}
		// The compare-and-set on the chunk's revision: the row is created
		// by the first edit and advanced only from the expected value.
		// Under PostgreSQL a racing writer blocks on the row (or on the
		// speculative insert) and then finds it changed: 0 rows.
		var res sql.Result
		var err error
		if expectRev == 0 {
			res, err = tx.ExecContext(ctx, s.d.q(`INSERT INTO world_chunks (x, y, slab, rev) VALUES (?, ?, ?, 1)
				ON CONFLICT (x, y, slab) DO NOTHING`), chunk.X, chunk.Y, chunk.Slab)
		} else {
			res, err = tx.ExecContext(ctx, s.d.q(`UPDATE world_chunks SET rev = ? WHERE x = ? AND y = ? AND slab = ? AND rev = ?`),
				int64(expectRev+1), chunk.X, chunk.Y, chunk.Slab, int64(expectRev))
		}
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return conflict()
		}
		_, err = tx.ExecContext(ctx, s.d.q(`INSERT INTO world_edits (x, y, slab, rev, kind, data, account, saved_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, {now})`),
			chunk.X, chunk.Y, chunk.Slab, int64(expectRev+1), int64(e.Kind), nonNil(e.Data), int64(e.Account))
		return err
	})
	if err != nil {
		return 0, s.fail("append edit", err)
	}
	if refused != nil {
		return 0, refused
	}
	return expectRev + 1, nil
}

// querier is what chunkRev needs of a *sql.DB or *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// chunkRev reads a chunk's revision; 0 for a chunk never edited.
func chunkRev(ctx context.Context, d dialect, q querier, c torus.ChunkPos) (uint64, error) {
	var rev int64
	err := q.QueryRowContext(ctx, d.q(`SELECT rev FROM world_chunks WHERE x = ? AND y = ? AND slab = ?`), c.X, c.Y, c.Slab).Scan(&rev)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return uint64(rev), err
}

// Edits implements worldstore.ChunkEdits.
func (s *Store) Edits(ctx context.Context, chunk torus.ChunkPos, sinceRev uint64) (uint64, []worldstore.RevEdit, error) {
	if err := worldstore.ValidateChunk(chunk); err != nil {
		return 0, nil, err
	}
	if err := s.live(); err != nil {
		return 0, nil, err
	}
	var rev uint64
	var out []worldstore.RevEdit
	err := s.retry(ctx, func() error {
		var err error
		out = nil
		// The revision first, then the rows up to it: every edit at or
		// below a revision committed with it, so the rows are all visible
		// to the later statement, and rows a racing append adds above it
		// are left out (a new snapshot per statement cannot show a
		// revision without its edits).
		if rev, err = chunkRev(ctx, s.d, s.rdb, chunk); err != nil || sinceRev >= rev {
			return err
		}
		rows, err := s.rdb.QueryContext(ctx, s.d.q(`SELECT rev, kind, data, account, saved_at FROM world_edits
			WHERE x = ? AND y = ? AND slab = ? AND rev > ? AND rev <= ? ORDER BY rev`),
			chunk.X, chunk.Y, chunk.Slab, int64(sinceRev), int64(rev))
		if err != nil {
			return err
		}
		defer rows.Close()
		out = make([]worldstore.RevEdit, 0, rev-sinceRev)
		for rows.Next() {
			var r, kind, acct, saved int64
			var data []byte
			if err := rows.Scan(&r, &kind, &data, &acct, &saved); err != nil {
				return err
			}
			out = append(out, worldstore.RevEdit{
				Rev:   uint64(r),
				Edit:  worldstore.Edit{Kind: uint16(kind), Data: orNil(data), Account: account.ID(uint64(acct))},
				Saved: fromMicros(saved),
			})
		}
		return rows.Err()
	})
	if err != nil {
		return 0, nil, s.fail("edits", err)
	}
	for i, re := range out {
		if re.Rev != sinceRev+uint64(i)+1 {
			return 0, nil, ErrCorrupt.Wrap("chunk (%d, %d, slab %d) at revision %d: edit %d missing", chunk.X, chunk.Y, chunk.Slab, rev, sinceRev+uint64(i)+1)
		}
	}
	if uint64(len(out)) != rev-min(sinceRev, rev) {
		return 0, nil, ErrCorrupt.Wrap("chunk (%d, %d, slab %d) at revision %d: %d edits after %d", chunk.X, chunk.Y, chunk.Slab, rev, len(out), sinceRev)
	}
	return rev, out, nil
}
