package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// Append implements netting.JournalStore: recs join one session's journal
// atomically, stamped with the store's clock. Its first statement claims the
// next seqs on the session row (an UPDATE that only matches an open,
// unsealed session whose journal length is the first seq), which also
// locks the row: an append and a settle claim on the same session are
// ordered, so an append either commits before the claim (and the settler
// reads it) or finds the seal and writes nothing. The common path is two
// statements; the error paths read more to say what went wrong.
func (s *Store) Append(ctx context.Context, recs []netting.JournalRecord) error {
	if len(recs) == 0 {
		return netting.ErrSeqConflict.Wrap("empty append")
	}
	return s.inTx(ctx, func(tx *sql.Tx) error { return s.appendTx(ctx, tx, recs) })
}

// ReserveAndAppend implements netting.SharedStore: ReserveAndRecord with
// no refusals.
func (s *Store) ReserveAndAppend(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) []netting.JournalRecord) ([]bool, error) {
	return s.ReserveAndRecord(ctx, own, reqs, netting.AppendOnly(build))
}

// ReserveAndRecord implements netting.SharedStore: the reservations, the
// rows and the refused keys in one durable transaction — one commit, one
// flush per group commit. Any refusal of the append rolls the reservations
// back with it. How the counters are decided and written is the engine's
// (sqlite.go, postgres.go).
func (s *Store) ReserveAndRecord(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) ([]netting.JournalRecord, []netting.RefusedKey)) ([]bool, error) {
	if own == nil {
		own = map[string]int64{} // the session's rule, with no own credits
	}
	return s.d.reserveAndAppend(ctx, s, own, reqs, build)
}

// AppendRecording implements netting.JournalStore: appendTx and
// rememberRefusals in one transaction.
func (s *Store) AppendRecording(ctx context.Context, recs []netting.JournalRecord, refused []netting.RefusedKey) error {
	if len(recs) == 0 && len(refused) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if len(recs) > 0 {
			if err := s.appendTx(ctx, tx, recs); err != nil {
				return err
			}
		}
		return s.rememberRefusals(ctx, tx, refused)
	})
}

// schemaRefusals is the schema version that remembers refused keys.
const schemaRefusals = 8

// rememberRefusals writes each refused key that has no first answer yet
// (neither journaled, this transaction's rows included, nor refused
// before), stamped with the database's clock, and, in batch form (schema
// 9), its marker in netting_keys (batch 0, which no batch has: a lookup
// finds no row there, and every later append of the key collides with
// it). Refusals are rare (a wallet out of funds), so it is one or two
// small statements per refusal.
func (s *Store) rememberRefusals(ctx context.Context, tx *sql.Tx, refused []netting.RefusedKey) error {
	if s.schema < schemaRefusals {
		return nil // an upgrade test's old store writes as its version did
	}
	for _, r := range refused {
		if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO netting_refusals (key, session_id, reason, refused_at)
			SELECT ?, ?, ?, {now} WHERE NOT EXISTS (SELECT 1 FROM `+s.keysTable()+` WHERE key = ?)
			ON CONFLICT (key) DO NOTHING`), r.Key, r.SessionID, r.Reason, r.Key); err != nil {
			return fmt.Errorf("sqlstore: remember refusal of %q: %w", r.Key, err)
		}
		if s.schema >= schemaBatches {
			if _, err := tx.ExecContext(ctx, s.d.q(refusalMarkerText), r.Key); err != nil {
				return fmt.Errorf("sqlstore: remember refusal of %q: %w", r.Key, err)
			}
		}
	}
	return nil
}

// refusalMarkerText writes a refused key's marker in netting_keys, unless
// the key is there already (journaled: the journal row is its answer).
const refusalMarkerText = `INSERT INTO netting_keys (key, batch, idx) VALUES (?, 0, -1) ON CONFLICT (key) DO NOTHING`

// refusedKeys returns the keys of recs remembered as refused, checked by
// every append: a key's first answer, refused, is final.
func (s *Store) refusedKeys(ctx context.Context, tx *sql.Tx, recs []netting.JournalRecord) ([]string, error) {
	if s.schema < schemaRefusals {
		return nil, nil
	}
	var out []string
	start := 0
	for _, n := range rowChunks(len(recs)) {
		args := make([]any, n)
		for i, r := range recs[start : start+n] {
			args[i] = r.Key
		}
		start += n
		rs, err := s.queryTx(ctx, tx, s.d.q(refusedKeysText(n)), args...)
		if err != nil {
			return nil, err
		}
		for rs.Next() {
			var k string
			if err := rs.Scan(&k); err != nil {
				rs.Close()
				return nil, err
			}
			out = append(out, k)
		}
		if err := rs.Close(); err != nil {
			return nil, err
		}
		if err := rs.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// refusedConflict is the error of an append some of whose keys are
// refused: every key of recs refused, journaled or repeated in recs, as
// the port's *netting.KeyConflictError lists them (an error path: one
// lookup per other key).
func (s *Store) refusedConflict(ctx context.Context, tx *sql.Tx, recs []netting.JournalRecord, refused []string) error {
	taken := make(map[string]bool, len(refused))
	for _, k := range refused {
		taken[k] = true
	}
	var conflicts []string
	seen := make(map[string]bool, len(recs))
	for _, r := range recs {
		switch {
		case seen[r.Key] || taken[r.Key]:
			conflicts = append(conflicts, r.Key)
		default:
			var one int
			err := tx.QueryRowContext(ctx, s.d.q(`SELECT 1 FROM `+s.keysTable()+` WHERE key = ?`), r.Key).Scan(&one)
			switch {
			case err == nil:
				conflicts = append(conflicts, r.Key)
			case !errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("sqlstore: append %s: %w", r.SessionID, err)
			}
		}
		seen[r.Key] = true
	}
	return &netting.KeyConflictError{Keys: conflicts}
}

// refusedKeysText finds which of rows keys are refused (a hot statement on
// SQLite, prepared at open: every append runs it).
func refusedKeysText(rows int) string {
	return `SELECT key FROM netting_refusals WHERE key IN (` + repeatJoin("?", rows) + `)`
}

func encodeAll(recs []netting.JournalRecord) ([]string, error) {
	encoded := make([]string, len(recs))
	for i, r := range recs {
		legs, err := encodeLegs(r.Legs)
		if err != nil {
			return nil, err
		}
		encoded[i] = legs
	}
	return encoded, nil
}

// appendTx is Append's work inside tx.
func (s *Store) appendTx(ctx context.Context, tx *sql.Tx, recs []netting.JournalRecord) error {
	if len(recs) == 0 {
		return netting.ErrSeqConflict.Wrap("empty append")
	}
	sid, first := recs[0].SessionID, recs[0].Seq
	contiguous := true
	for i, r := range recs {
		if r.SessionID != sid || r.Seq != first+int64(i) {
			contiguous = false
		}
	}
	var now int64
	err := sql.ErrNoRows
	if contiguous {
		err = s.queryRowTx(ctx, tx, s.d.q(appendSessionText), len(recs), sid, first).Scan(&now)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return s.appendRefusal(ctx, tx, recs)
	}
	if err != nil {
		return fmt.Errorf("sqlstore: append %s: %w", sid, err)
	}
	if s.schema >= schemaBatches {
		// A refused key has its row in netting_keys too (a marker): the
		// key insert finds it, with no statement of its own.
		return s.appendBatchTx(ctx, tx, recs, now)
	}
	refused, err := s.refusedKeys(ctx, tx, recs)
	if err != nil {
		return fmt.Errorf("sqlstore: append %s: %w", sid, err)
	}
	if len(refused) > 0 {
		return s.refusedConflict(ctx, tx, recs, refused)
	}
	encoded, err := encodeAll(recs)
	if err != nil {
		return err
	}
	wrote, complete, err := s.d.insertJournal(ctx, s, tx, recs, encoded, now)
	if err != nil {
		return fmt.Errorf("sqlstore: append %s: %w", sid, err)
	}
	if !complete {
		return s.collision(ctx, tx, recs, wrote)
	}
	return nil
}

// appendRefusal says why the session row did not take an append: no such
// session, sealed or settled, or a seq that is not the journal length.
func (s *Store) appendRefusal(ctx context.Context, tx *sql.Tx, recs []netting.JournalRecord) error {
	sid := recs[0].SessionID
	var journalLen, token int64
	var settled sql.NullInt64
	err := tx.QueryRowContext(ctx, s.d.q(`SELECT journal_len, claim_token, settled_at FROM netting_sessions WHERE id = ?`), sid).
		Scan(&journalLen, &token, &settled)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return netting.ErrSessionNotFound.Wrap("%s", sid)
	case err != nil:
		return fmt.Errorf("sqlstore: append %s: %w", sid, err)
	case token > 0 || settled.Valid:
		return netting.ErrSessionSettled.Wrap("%s is sealed for settle", sid)
	}
	for i, r := range recs {
		if r.SessionID != sid || r.Seq != journalLen+int64(i) {
			return netting.ErrSeqConflict.Wrap("%s: row %d has session %s seq %d, want seq %d", sid, i, r.SessionID, r.Seq, journalLen+int64(i))
		}
	}
	// Unreachable while the row and the statement agree; refuse anyway.
	return netting.ErrSeqConflict.Wrap("%s: journal length changed under the append", sid)
}

// collision builds the error for an insert that skipped rows: every key of
// batch already journaled before this append, or repeated inside it, as a
// *netting.KeyConflictError; a skipped row whose key is free means its
// (session, seq) slot was taken, which is a seq conflict.
func (s *Store) collision(ctx context.Context, tx *sql.Tx, batch []netting.JournalRecord, inserted []string) error {
	wrote := make(map[string]bool, len(inserted))
	for _, k := range inserted {
		wrote[k] = true
	}
	var conflicts []string
	seen := make(map[string]bool, len(batch))
	for _, r := range batch {
		switch {
		case seen[r.Key]:
			conflicts = append(conflicts, r.Key)
		case !wrote[r.Key]:
			var one int
			q, args := `SELECT 1 FROM `+s.keysTable()+` WHERE key = ?`, []any{r.Key}
			if s.schema >= schemaRefusals {
				q, args = q+` UNION ALL SELECT 1 FROM netting_refusals WHERE key = ?`, append(args, r.Key)
			}
			err := tx.QueryRowContext(ctx, s.d.q(q), args...).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return netting.ErrSeqConflict.Wrap("%s: seq %d already journaled", r.SessionID, r.Seq)
			}
			if err != nil {
				return fmt.Errorf("sqlstore: append %s: %w", r.SessionID, err)
			}
			conflicts = append(conflicts, r.Key)
		}
		seen[r.Key] = true
	}
	return &netting.KeyConflictError{Keys: conflicts}
}

// queryStrings runs a query of one text column on a transaction or a pool
// and returns the column.
func queryStrings(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, query string, args ...any) ([]string, error) {
	rs, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var v string
		if err := rs.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rs.Err()
}

// ReadJournal implements netting.JournalStore. A long journal is read in
// up to journalReadParts seq ranges at once, each on its own connection of
// the read pool, into slices sized from the session row's journal length:
// a settle reads its whole journal back, and one statement decodes its
// rows on one core. The parts need not share a snapshot: every row below
// the length read first was committed with that length (the append's one
// transaction), so each range finds all of its rows, and the last range
// is open-ended, as one statement would be.
func (s *Store) ReadJournal(ctx context.Context, sessionID string) ([]netting.JournalRecord, error) {
	var n sql.NullInt64
	err := s.rdb.QueryRowContext(ctx, s.d.q(`SELECT journal_len FROM netting_sessions WHERE id = ?`), sessionID).Scan(&n)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlstore: read journal %s: %w", sessionID, err)
	}
	parts := int(min(n.Int64/s.journalReadPart, journalReadParts))
	if parts <= 1 {
		return s.readJournalRange(ctx, sessionID, 0, -1, int(n.Int64))
	}
	out := make([][]netting.JournalRecord, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for k := range parts {
		lo, hi := n.Int64*int64(k)/int64(parts), n.Int64*int64(k+1)/int64(parts)
		if k == parts-1 {
			hi = -1
		}
		wg.Go(func() {
			out[k], errs[k] = s.readJournalRange(ctx, sessionID, lo, hi, int(n.Int64/int64(parts))+1)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	all := make([]netting.JournalRecord, 0, n.Int64)
	for _, part := range out {
		all = append(all, part...)
	}
	return all, nil
}

// defaultJournalReadPart is the fewest rows worth a part of their own in
// ReadJournal (Store.journalReadPart; tests lower it), journalReadParts
// the most parts (the SQLite read pool's size).
const (
	defaultJournalReadPart = 50_000
	journalReadParts       = sqliteReaders
)

// readJournalRange reads the session's rows with lo ≤ seq < hi (no upper
// bound when hi < 0), ordered by seq, into a slice of capacity size.
func (s *Store) readJournalRange(ctx context.Context, sessionID string, lo, hi int64, size int) ([]netting.JournalRecord, error) {
	if hi < 0 {
		hi = math.MaxInt64
	}
	if s.schema >= schemaBatches {
		return s.readBatches(ctx, sessionID, lo, hi, size)
	}
	rs, err := s.rdb.QueryContext(ctx, s.d.q(`SELECT seq, key, legs, prev_hash, hash, recorded_at FROM netting_journal
		WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq`), sessionID, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: read journal %s: %w", sessionID, err)
	}
	defer rs.Close()
	out := make([]netting.JournalRecord, 0, size)
	for rs.Next() {
		r := netting.JournalRecord{SessionID: sessionID}
		if err := s.scanJournal(rs, &r); err != nil {
			return nil, fmt.Errorf("sqlstore: read journal %s: %w", sessionID, err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: read journal %s: %w", sessionID, err)
	}
	return out, nil
}

// LookupKey implements netting.JournalStore.
func (s *Store) LookupKey(ctx context.Context, key string) (netting.JournalRecord, bool, error) {
	if s.schema >= schemaBatches {
		return s.lookupBatchKey(ctx, key)
	}
	row := s.rdb.QueryRowContext(ctx, s.d.q(`SELECT session_id, seq, key, legs, prev_hash, hash, recorded_at FROM netting_journal WHERE key = ?`), key)
	var r netting.JournalRecord
	var legs string
	var at int64
	err := row.Scan(&r.SessionID, &r.Seq, &r.Key, &legs, &r.PrevHash, &r.Hash, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return netting.JournalRecord{}, false, nil
	}
	if err != nil {
		return netting.JournalRecord{}, false, fmt.Errorf("sqlstore: lookup key %q: %w", key, err)
	}
	if r.Legs, err = decodeLegs(legs); err != nil {
		return netting.JournalRecord{}, false, fmt.Errorf("sqlstore: lookup key %q: %w", key, err)
	}
	r.RecordedAt = fromMicros(at)
	return r, true, nil
}

// LookupAnswer implements netting.JournalStore: the journal row, else the
// remembered refusal.
func (s *Store) LookupAnswer(ctx context.Context, key string) (netting.KeyAnswer, error) {
	rec, ok, err := s.LookupKey(ctx, key)
	if err != nil || ok {
		return netting.KeyAnswer{Found: ok, Record: rec}, err
	}
	r := netting.RefusedKey{Key: key}
	var at int64
	err = s.rdb.QueryRowContext(ctx, s.d.q(`SELECT session_id, reason, refused_at FROM netting_refusals WHERE key = ?`), key).Scan(&r.SessionID, &r.Reason, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return netting.KeyAnswer{}, nil
	}
	if err != nil {
		return netting.KeyAnswer{}, fmt.Errorf("sqlstore: lookup refusal of %q: %w", key, err)
	}
	r.RefusedAt = fromMicros(at)
	return netting.KeyAnswer{Found: true, Refused: true, Refusal: r}, nil
}

func (s *Store) scanJournal(rs *sql.Rows, r *netting.JournalRecord) error {
	var legs string
	var at int64
	if err := rs.Scan(&r.Seq, &r.Key, &legs, &r.PrevHash, &r.Hash, &at); err != nil {
		return err
	}
	var err error
	if r.Legs, err = decodeLegs(legs); err != nil {
		return fmt.Errorf("seq %d: %w", r.Seq, err)
	}
	r.RecordedAt = fromMicros(at)
	return nil
}

// fromMicros turns a stored unix-microsecond time into a UTC time.Time.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// appendSessionText claims the next seqs on an open, unsealed session row
// whose journal length is the first seq (see Append).
const appendSessionText = `UPDATE netting_sessions
			SET journal_len = journal_len + ?, last_recorded_at = {now}
			WHERE id = ? AND journal_len = ? AND claim_token = 0 AND settled_at IS NULL
			RETURNING last_recorded_at`
