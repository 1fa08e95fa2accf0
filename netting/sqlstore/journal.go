package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	encoded, err := encodeAll(recs)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error { return s.appendTx(ctx, tx, recs, encoded) })
}

// ReserveAndAppend implements netting.BatchStore: the reservations and the
// rows in one durable transaction — one commit, one flush per group commit.
// Any refusal of the append rolls the reservations back with it.
//
// On PostgreSQL the common case (every request granted, nothing refused) is
// groupCommitPG's single statement; anything else is declined there and
// decided here request by request. On SQLite addAndDecideSQLite reads and
// writes the counters in one statement per chunk of accounts.
func (s *Store) ReserveAndAppend(ctx context.Context, reqs [][]ledger.AccountDelta, build func(granted []bool) []netting.JournalRecord) ([]bool, error) {
	if s.d.arrays {
		granted, applied, err := s.groupCommitPG(ctx, reqs, build)
		if applied || err != nil {
			return granted, err
		}
		// Declined: nothing was applied. Decide request by request below.
	}
	granted, err := s.reserveAndAppend(ctx, reqs, build, false)
	if errors.Is(err, errJournalUniqueViolation) {
		// The fast statement found a taken key or seq and aborted the
		// transaction, which can then say nothing more. Rerun it with the
		// statement that skips such rows and names them.
		granted, err = s.reserveAndAppend(ctx, reqs, build, true)
	}
	return granted, err
}

// groupCommitPG is the PostgreSQL group commit's common case in ONE
// statement, its own implicit transaction at REPEATABLE READ (on
// commitPool) — one round trip, commit included, where the transaction
// below takes four (BEGIN, lock, write, COMMIT). It builds the rows as if
// every request were granted, then the statement adds each account's
// deltas to its counter (taking the row locks in account order, as
// lockPending does), claims the seqs on the session row, inserts the rows,
// and last calls netting_group_commit_check, which raises unless, by the
// counters' values before the add (batchSums), every request was granted,
// and the session took every row.
//
// Why REPEATABLE READ: the statement reads the balances from its snapshot,
// taken before it waits for any counter's lock. A settle posting that
// commits during that wait changes a balance and its counter together
// (PostFencedReleasing); under READ COMMITTED the statement would go on
// with the posting's new counter and the old balance — headroom that is
// not there. Under REPEATABLE READ the update of a counter changed since
// the snapshot fails with a serialisation error instead, and the batch is
// declined to lockPending, which reads the balances after the locks. (A
// group commit of another session on the same accounts is declined the
// same way.)
//
// applied reports that the batch committed with every request granted. A
// statement or commit the server refused with an ERROR (the check, a taken
// key, a serialisation failure, a deadlock, anything) applied nothing:
// applied and err are then false and nil, and the caller decides the batch
// request by request. Any other error — the connection, the context — may
// hide a commit and is returned.
func (s *Store) groupCommitPG(ctx context.Context, reqs [][]ledger.AccountDelta, build func(granted []bool) []netting.JournalRecord) (granted []bool, applied bool, err error) {
	if len(reqs) == 0 {
		return nil, false, nil
	}
	all := make([]bool, len(reqs))
	for i := range all {
		all[i] = true
	}
	recs := build(slices.Clone(all))
	if len(recs) == 0 {
		return nil, false, nil
	}
	sid, first := recs[0].SessionID, recs[0].Seq
	seqs := make([]int64, len(recs))
	keys := make([]string, len(recs))
	prevs := make([]string, len(recs))
	hashes := make([]string, len(recs))
	for i, r := range recs {
		if r.SessionID != sid || r.Seq != first+int64(i) {
			return nil, false, nil // the slow path names the problem
		}
		seqs[i], keys[i], prevs[i], hashes[i] = r.Seq, r.Key, r.PrevHash, r.Hash
	}
	encoded, err := encodeAll(recs)
	if err != nil {
		return nil, false, err
	}
	b := sumBatch(reqs)
	var journaled int64
	// On the commit pool: an implicit transaction at REPEATABLE READ, one
	// round trip with the commit. A prepared statement (cached per
	// connection): its parameters are described, so pgx sends the arrays
	// in binary instead of as text the server must parse.
	err = s.commitPool.QueryRow(ctx, s.d.q(groupCommitPGText), pgx.QueryExecModeCacheStatement,
		b.accounts, b.sums, b.hasLow, b.low, len(b.accounts),
		len(recs), sid, first, seqs, keys, encoded, prevs, hashes).Scan(&journaled)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && severity(pgErr) == "ERROR" {
		s.declinedCommits.Add(1)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("sqlstore: group commit %s: %w", sid, err)
	}
	s.singleCommits.Add(1)
	return all, true, nil
}

// severity is the error's untranslated severity (Severity follows the
// server's lc_messages; servers before 9.6 send only that one).
func severity(e *pgconn.PgError) string {
	if e.SeverityUnlocalized != "" {
		return e.SeverityUnlocalized
	}
	return e.Severity
}

// groupCommitPGText is groupCommitPG's statement. $1–$4 are batchSums
// (accounts, sums, hasLow, low) and $5 its account count; $6–$13 the rows.
const groupCommitPGText = `WITH setp AS (
		INSERT INTO netting_reservations (account, pending)
		SELECT a, s FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS u(a, s, n) ORDER BY n
		ON CONFLICT (account) DO UPDATE SET pending = netting_reservations.pending + excluded.pending
		RETURNING account, pending),
	sess AS (
		UPDATE netting_sessions SET journal_len = journal_len + $6, last_recorded_at = {now}
		WHERE id = $7 AND journal_len = $8 AND claim_token = 0 AND settled_at IS NULL
		RETURNING last_recorded_at),
	ins AS (
		INSERT INTO netting_journal (session_id, seq, key, legs, prev_hash, hash, recorded_at)
		SELECT $7, u.seq, u.key, u.legs, u.prev_hash, u.hash, sess.last_recorded_at
		FROM sess, unnest($9::bigint[], $10::text[], $11::text[], $12::text[], $13::text[]) AS u(seq, key, legs, prev_hash, hash)
		RETURNING 1)
	SELECT netting_group_commit_check(
		(SELECT count(*) FROM setp
			JOIN unnest($1::text[], $2::bigint[], $3::bool[], $4::bigint[]) AS c(a, s, has_low, low) ON c.a = setp.account
			LEFT JOIN ledger_balances b ON b.account = c.a
			WHERE c.has_low AND COALESCE(b.balance, 0) + (setp.pending - c.s) + c.low < 0),
		(SELECT count(*) FROM setp), $5,
		(SELECT count(*) FROM sess),
		(SELECT count(*) FROM ins), $6)`

// errJournalUniqueViolation is the PostgreSQL group commit's fast journal
// insert hitting a unique index (a key or seq already taken): the cue to
// rerun the transaction with the statement that explains the collision.
var errJournalUniqueViolation = errors.New("sqlstore: journal unique violation")

// reserveAndAppend is ReserveAndAppend. With explain set, the PostgreSQL
// journal insert skips conflicting rows (ON CONFLICT DO NOTHING) and reports
// them as appendTx does; without it, it is a plain INSERT, which costs less
// per row and fails with errJournalUniqueViolation on a conflict.
func (s *Store) reserveAndAppend(ctx context.Context, reqs [][]ledger.AccountDelta, build func(granted []bool) []netting.JournalRecord, explain bool) ([]bool, error) {
	granted := make([]bool, len(reqs))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		clear(granted)
		if !s.d.arrays {
			if err := s.addAndDecideSQLite(ctx, tx, reqs, granted); err != nil {
				return err
			}
			recs := build(slices.Clone(granted))
			if len(recs) == 0 {
				return nil
			}
			encoded, err := encodeAll(recs)
			if err != nil {
				return err
			}
			return s.appendTx(ctx, tx, recs, encoded)
		}
		changed, err := s.decideReserve(ctx, tx, reqs, granted)
		if err != nil {
			return err
		}
		recs := build(slices.Clone(granted))
		if len(recs) == 0 {
			return s.setPending(ctx, tx, changed)
		}
		encoded, err := encodeAll(recs)
		if err != nil {
			return err
		}
		return s.setPendingAndAppendPG(ctx, tx, changed, recs, encoded, explain)
	})
	if err != nil {
		return nil, err
	}
	return granted, nil
}

// setPendingAndAppendPG is setPending then appendTx as ONE PostgreSQL
// statement (data-modifying CTEs), so a group commit that groupCommitPG
// declined costs four round trips (BEGIN, lock, this, COMMIT) instead of
// six. The counters change whatever the append does; a refused append
// returns an error and inTx rolls the whole transaction back. It takes the
// session row's lock after the reservation rows' — the opposite of
// ReleaseSession — so a release racing a live append of the same session
// can deadlock; PostgreSQL breaks it and inTx reruns the loser (which then
// finds the seal).
func (s *Store) setPendingAndAppendPG(ctx context.Context, tx *sql.Tx, changed map[string]int64, recs []netting.JournalRecord, encoded []string, explain bool) error {
	sid, first := recs[0].SessionID, recs[0].Seq
	accounts := make([]string, 0, len(changed))
	for a := range changed {
		accounts = append(accounts, a)
	}
	sort.Strings(accounts)
	vals := make([]int64, len(accounts))
	for i, a := range accounts {
		vals[i] = changed[a]
	}
	seqs := make([]int64, len(recs))
	keys := make([]string, len(recs))
	prevs := make([]string, len(recs))
	hashes := make([]string, len(recs))
	for i, r := range recs {
		if r.SessionID != sid || r.Seq != first+int64(i) {
			return s.appendRefusal(ctx, tx, recs)
		}
		seqs[i], keys[i], prevs[i], hashes[i] = r.Seq, r.Key, r.PrevHash, r.Hash
	}
	var sessions, inserted int
	// setp is a plain UPDATE, not an upsert: decideReserve created and
	// locked every row it changes earlier in this transaction, so each row
	// is there and no one else can delete it (ReplacePending waits for our
	// lock). The statement counts what it wrote, to check that.
	// Without explain a taken key or seq fails the statement (see
	// reserveAndAppend); a plain INSERT skips the speculative insertion
	// that ON CONFLICT does for every row.
	onConflict := ""
	if explain {
		onConflict = "ON CONFLICT DO NOTHING "
	}
	var updated int
	err := tx.QueryRowContext(ctx, s.d.q(`WITH setp AS (
			UPDATE netting_reservations r SET pending = u.p
			FROM unnest($1::text[], $2::bigint[]) AS u(a, p)
			WHERE r.account = u.a
			RETURNING 1),
		sess AS (
			UPDATE netting_sessions SET journal_len = journal_len + $3, last_recorded_at = {now}
			WHERE id = $4 AND journal_len = $5 AND claim_token = 0 AND settled_at IS NULL
			RETURNING last_recorded_at),
		ins AS (
			INSERT INTO netting_journal (session_id, seq, key, legs, prev_hash, hash, recorded_at)
			SELECT $4, u.seq, u.key, u.legs, u.prev_hash, u.hash, sess.last_recorded_at
			FROM sess, unnest($6::bigint[], $7::text[], $8::text[], $9::text[], $10::text[]) AS u(seq, key, legs, prev_hash, hash)
			`+onConflict+`RETURNING 1)
		SELECT (SELECT count(*) FROM setp), (SELECT count(*) FROM sess), (SELECT count(*) FROM ins)`),
		accounts, vals, len(recs), sid, first, seqs, keys, encoded, prevs, hashes).Scan(&updated, &sessions, &inserted)
	var pgErr *pgconn.PgError
	if !explain && errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%w: %s", errJournalUniqueViolation, pgErr.ConstraintName)
	}
	if err != nil {
		return fmt.Errorf("sqlstore: reserve and append %s: %w", sid, err)
	}
	if updated != len(accounts) {
		// Unreachable while decideReserve locks every row it changes.
		return fmt.Errorf("sqlstore: reserve and append %s: wrote %d of %d reservation rows", sid, updated, len(accounts))
	}
	if sessions == 0 {
		return s.appendRefusal(ctx, tx, recs)
	}
	if inserted != len(recs) {
		// Which rows went in: this session's rows in the batch's seq range
		// carrying the batch's keys.
		wrote, err := queryStrings(ctx, tx, `SELECT key FROM netting_journal WHERE session_id = $1 AND seq >= $2 AND seq < $3 AND key = ANY($4::text[])`,
			sid, first, first+int64(len(recs)), keys)
		if err != nil {
			return fmt.Errorf("sqlstore: reserve and append %s: %w", sid, err)
		}
		return s.collision(ctx, tx, recs, wrote)
	}
	return nil
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

// appendTx is Append's work inside tx; encoded are recs' legs, encoded.
func (s *Store) appendTx(ctx context.Context, tx *sql.Tx, recs []netting.JournalRecord, encoded []string) error {
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
	if s.d.arrays {
		// One array per column (see lockPending): the statement's text and
		// parameter count no longer grow with the batch.
		seqs := make([]int64, len(recs))
		keys := make([]string, len(recs))
		prevs := make([]string, len(recs))
		hashes := make([]string, len(recs))
		for i, r := range recs {
			seqs[i], keys[i], prevs[i], hashes[i] = r.Seq, r.Key, r.PrevHash, r.Hash
		}
		inserted, err := queryStrings(ctx, tx, `INSERT INTO netting_journal (session_id, seq, key, legs, prev_hash, hash, recorded_at)
			SELECT $1, seq, key, legs, prev_hash, hash, $2 FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[]) AS u(seq, key, legs, prev_hash, hash)
			ON CONFLICT DO NOTHING RETURNING key`, sid, now, seqs, keys, encoded, prevs, hashes)
		if err != nil {
			return fmt.Errorf("sqlstore: append %s: %w", sid, err)
		}
		if len(inserted) != len(recs) {
			return s.collision(ctx, tx, recs, inserted)
		}
		return nil
	}
	// SQLite: cached multi-row INSERTs (stmtcache.go). A taken key or seq
	// fails its statement, which SQLite undoes on its own while the
	// transaction stays usable. From that chunk on, the rows go in with the
	// statement that skips such rows and names the ones it wrote, so the
	// refusal lists every colliding key of the batch, not just the first
	// chunk's (the transaction is rolled back either way).
	start := 0
	explain := false
	inserted := make([]string, 0, len(recs))
	for _, n := range rowChunks(len(recs)) {
		chunk, enc := recs[start:start+n], encoded[start:start+n]
		start += n
		args := make([]any, 0, 7*n)
		for i, r := range chunk {
			args = append(args, sid, r.Seq, r.Key, enc[i], r.PrevHash, r.Hash, now)
		}
		if !explain {
			_, err := s.execTx(ctx, tx, sqliteJournalInsertText(n), args...)
			if err == nil {
				for _, r := range chunk {
					inserted = append(inserted, r.Key)
				}
				continue
			}
			if !isSQLiteConstraint(err) {
				return fmt.Errorf("sqlstore: append %s: %w", sid, err)
			}
			explain = true
		}
		wrote, err := queryStrings(ctx, tx, sqliteJournalInsertText(n)+` ON CONFLICT DO NOTHING RETURNING key`, args...)
		if err != nil {
			return fmt.Errorf("sqlstore: append %s: %w", sid, err)
		}
		inserted = append(inserted, wrote...)
	}
	if !explain {
		return nil
	}
	if len(inserted) == len(recs) {
		// Unreachable: the rows that failed a constraint went in on rerun.
		return fmt.Errorf("sqlstore: append %s: a constraint failed, then every row went in", sid)
	}
	return s.collision(ctx, tx, recs, inserted)
}

// isSQLiteConstraint reports a SQLite constraint violation (SQLITE_CONSTRAINT,
// primary code 19).
func isSQLiteConstraint(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 19
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
			err := tx.QueryRowContext(ctx, s.d.q(`SELECT 1 FROM netting_journal WHERE key = ?`), r.Key).Scan(&one)
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

// ReadJournal implements netting.JournalStore.
func (s *Store) ReadJournal(ctx context.Context, sessionID string) ([]netting.JournalRecord, error) {
	rs, err := s.rdb.QueryContext(ctx, s.d.q(`SELECT seq, key, legs, prev_hash, hash, recorded_at FROM netting_journal WHERE session_id = ? ORDER BY seq`), sessionID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: read journal %s: %w", sessionID, err)
	}
	defer rs.Close()
	out := []netting.JournalRecord{}
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
