package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// CreateSession implements netting.SessionStore.
func (s *Store) CreateSession(ctx context.Context, meta netting.SessionMeta) (netting.SessionMeta, error) {
	if meta.ID == "" || meta.ChunkWidth < 1 {
		return netting.SessionMeta{}, netting.ErrSessionInvalid.Wrap("invalid session meta id=%q chunkWidth=%d", meta.ID, meta.ChunkWidth)
	}
	stored := netting.SessionMeta{ID: meta.ID, Scope: meta.Scope, NodeID: meta.NodeID, ChunkWidth: meta.ChunkWidth}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var opened int64
		err := tx.QueryRowContext(ctx, s.d.q(`INSERT INTO netting_sessions (id, scope, node_id, chunk_width, opened_at)
			VALUES (?, ?, ?, ?, {now}) ON CONFLICT (id) DO NOTHING RETURNING opened_at`),
			meta.ID, meta.Scope, meta.NodeID, meta.ChunkWidth).Scan(&opened)
		if errors.Is(err, sql.ErrNoRows) {
			return netting.ErrSessionExists.Wrap("%s", meta.ID)
		}
		if err != nil {
			return fmt.Errorf("sqlstore: create session %s: %w", meta.ID, err)
		}
		stored.OpenedAt = fromMicros(opened)
		return nil
	})
	if err != nil {
		return netting.SessionMeta{}, err
	}
	return stored, nil
}

const sessionColumns = `id, scope, node_id, chunk_width, opened_at, replaying, settled_at, settle_mode, claim_token, journal_len, last_recorded_at, released_at`

type sessionRow struct {
	meta       netting.SessionMeta
	token      int64 // the current claim's fencing token, 0 before any claim
	journalLen int64
	lastAt     sql.NullInt64
	released   bool
}

func scanSession(sc interface{ Scan(...any) error }) (sessionRow, error) {
	var r sessionRow
	var opened int64
	var replaying int
	var settledAt, releasedAt sql.NullInt64
	err := sc.Scan(&r.meta.ID, &r.meta.Scope, &r.meta.NodeID, &r.meta.ChunkWidth, &opened, &replaying,
		&settledAt, &r.meta.SettleMode, &r.token, &r.journalLen, &r.lastAt, &releasedAt)
	if err != nil {
		return sessionRow{}, err
	}
	r.meta.OpenedAt = fromMicros(opened)
	r.meta.Replaying = replaying != 0
	if settledAt.Valid {
		r.meta.Settled = true
		r.meta.SettledAt = fromMicros(settledAt.Int64)
	}
	r.meta.Sealed = r.token > 0
	r.released = releasedAt.Valid
	return r, nil
}

// Session implements netting.SessionStore.
func (s *Store) Session(ctx context.Context, id string) (netting.SessionMeta, error) {
	r, err := scanSession(s.rdb.QueryRowContext(ctx, s.d.q(`SELECT `+sessionColumns+` FROM netting_sessions WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return netting.SessionMeta{}, netting.ErrSessionNotFound.Wrap("%s", id)
	}
	if err != nil {
		return netting.SessionMeta{}, fmt.Errorf("sqlstore: session %s: %w", id, err)
	}
	return r.meta, nil
}

// ListUnsettled implements netting.SessionStore. It reads the sessions
// table's partial index of unsettled rows, never the journal.
func (s *Store) ListUnsettled(ctx context.Context, limit int) ([]netting.UnsettledSession, error) {
	query := `SELECT ` + sessionColumns + ` FROM netting_sessions
		WHERE settled_at IS NULL AND journal_len > 0
		ORDER BY last_recorded_at, id`
	var args []any
	if limit > 0 {
		query += ` LIMIT ?`
		args = append(args, limit)
	}
	rs, err := s.rdb.QueryContext(ctx, s.d.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list unsettled: %w", err)
	}
	defer rs.Close()
	var out []netting.UnsettledSession
	for rs.Next() {
		r, err := scanSession(rs)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: list unsettled: %w", err)
		}
		out = append(out, netting.UnsettledSession{
			SessionMeta:    r.meta,
			Records:        r.journalLen,
			LastRecordedAt: fromMicros(r.lastAt.Int64),
			Released:       r.released,
		})
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: list unsettled: %w", err)
	}
	return out, nil
}

// ClaimSettle implements netting.SessionStore. The claim is a row lock and an
// update on the session row, so concurrent claimers are serialised by the
// database and exactly one of them sees no live claim.
func (s *Store) ClaimSettle(ctx context.Context, sessionID, owner string, lease time.Duration) (netting.Fence, error) {
	var fence netting.Fence
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var curOwner string
		var token, expires, now int64
		var settled sql.NullInt64
		err := tx.QueryRowContext(ctx, s.d.q(`SELECT claim_owner, claim_token, claim_expires_at, settled_at, {now} FROM netting_sessions WHERE id = ?{forUpdate}`), sessionID).
			Scan(&curOwner, &token, &expires, &settled, &now)
		if errors.Is(err, sql.ErrNoRows) {
			return netting.ErrSessionNotFound.Wrap("%s", sessionID)
		}
		if err != nil {
			return fmt.Errorf("sqlstore: claim settle %s: %w", sessionID, err)
		}
		live := token > 0 && !settled.Valid && now < expires
		if live && curOwner != owner {
			return &netting.ClaimHeldError{SessionID: sessionID, Owner: curOwner, ExpiresAt: fromMicros(expires)}
		}
		token++
		if _, err := tx.ExecContext(ctx, s.d.q(`UPDATE netting_sessions SET claim_owner = ?, claim_token = ?, claim_expires_at = ? WHERE id = ?`),
			owner, token, now+lease.Microseconds(), sessionID); err != nil {
			return fmt.Errorf("sqlstore: claim settle %s: %w", sessionID, err)
		}
		fence = netting.Fence{SessionID: sessionID, Owner: owner, Token: token}
		return nil
	})
	return fence, err
}

// fenceTx locks the session row and checks that f is its current claim. Every
// settle write runs it first in its own transaction, so a takeover (which
// needs the same row lock) either happens before — and fences the write —
// or after the write committed.
func (s *Store) fenceTx(ctx context.Context, tx *sql.Tx, f netting.Fence) (sessionRow, error) {
	r, err := scanSession(tx.QueryRowContext(ctx, s.d.q(`SELECT `+sessionColumns+` FROM netting_sessions WHERE id = ?{forUpdate}`), f.SessionID))
	if errors.Is(err, sql.ErrNoRows) {
		return sessionRow{}, netting.ErrSessionNotFound.Wrap("%s", f.SessionID)
	}
	if err != nil {
		return sessionRow{}, fmt.Errorf("sqlstore: fence %s: %w", f.SessionID, err)
	}
	if f.Token == 0 || f.Token != r.token {
		return sessionRow{}, &netting.FencedError{SessionID: f.SessionID, Token: f.Token, Current: r.token}
	}
	return r, nil
}

// PostFenced implements netting.SessionStore.
func (s *Store) PostFenced(ctx context.Context, f netting.Fence, p ledger.Posting) error {
	return s.postFenced(ctx, f, p, nil)
}

// PostFencedReleasing implements netting.SettlePoster: PostFenced and, when
// the posting is new and the session not yet released, the subtraction of
// release from the counters, in one transaction.
func (s *Store) PostFencedReleasing(ctx context.Context, f netting.Fence, p ledger.Posting, release []netting.ReservedChange) error {
	return s.postFenced(ctx, f, p, release)
}

func (s *Store) postFenced(ctx context.Context, f netting.Fence, p ledger.Posting, release []netting.ReservedChange) error {
	if err := ledger.Validate(p); err != nil {
		return err
	}
	meta, err := encodeMeta(p.Meta)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := s.fenceTx(ctx, tx, f)
		if err != nil {
			return err
		}
		var also func() error
		if !r.released && len(release) > 0 {
			also = func() error { return s.subtractReserved(ctx, tx, release) }
		}
		_, err = s.postTx(ctx, tx, p, meta, also)
		return err
	})
}

// MarkReplaying implements netting.SessionStore.
func (s *Store) MarkReplaying(ctx context.Context, f netting.Fence) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.fenceTx(ctx, tx, f); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.d.q(`UPDATE netting_sessions SET replaying = 1 WHERE id = ?`), f.SessionID); err != nil {
			return fmt.Errorf("sqlstore: mark replaying %s: %w", f.SessionID, err)
		}
		return nil
	})
}

// FinishSettle implements netting.SessionStore.
func (s *Store) FinishSettle(ctx context.Context, f netting.Fence, mode string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := s.fenceTx(ctx, tx, f)
		if err != nil {
			return err
		}
		if r.meta.Settled {
			return nil
		}
		// The claim ends with the settle: its expiry becomes now.
		if _, err := tx.ExecContext(ctx, s.d.q(`UPDATE netting_sessions SET settled_at = {now}, settle_mode = ?, claim_expires_at = {now} WHERE id = ?`),
			mode, f.SessionID); err != nil {
			return fmt.Errorf("sqlstore: finish settle %s: %w", f.SessionID, err)
		}
		return nil
	})
}
