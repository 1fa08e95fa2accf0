package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// postgresEngine is the engine (dialect.go) on PostgreSQL: batches go as
// one array parameter per column (unnest), so a statement's text and
// parameter count do not grow with the batch, and the group commit's
// common case is one statement.
type postgresEngine struct{}

// relaxedTx is a transaction with asynchronous commit for itself only.
func (postgresEngine) relaxedTx(ctx context.Context, s *Store, fn func(tx *sql.Tx) error) error {
	return commitTx(ctx, s.db, `SET LOCAL synchronous_commit TO OFF`, fn)
}

// lockPending locks the rows in the array's order, which is account order,
// and reads the balances afterwards, in a statement of their own (see
// Reserve).
func (postgresEngine) lockPending(ctx context.Context, s *Store, tx *sql.Tx, accounts []string) (res map[string]netting.Reserved, balances map[string]int64, err error) {
	res = make(map[string]netting.Reserved, len(accounts))
	balances = make(map[string]int64, len(accounts))
	// Common path: every row exists, so a plain row lock (in the array's
	// account order) is enough, and each counter gets one new row version
	// per group commit (its write) instead of two (a no-op upsert to lock
	// it, then the write).
	rs, err := tx.QueryContext(ctx, `SELECT r.account, r.pending, r.debits
		FROM unnest($1::text[]) WITH ORDINALITY AS u(a, n)
		JOIN netting_reservations r ON r.account = u.a
		ORDER BY u.n FOR UPDATE OF r`, accounts)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlstore: reserve: %w", err)
	}
	if err := scanReserved(rs, res); err != nil {
		return nil, nil, fmt.Errorf("sqlstore: reserve: %w", err)
	}
	if len(res) != len(accounts) {
		// Some row is missing (an account's first reservation, or a row
		// ReplacePending dropped): create and lock them all with a no-op
		// upsert (rows must exist before they can be locked, or two
		// transactions that both saw "no row" would both write). unnest
		// WITH ORDINALITY keeps the array's (account) order, so it locks in
		// account order too; rows this transaction already holds are simply
		// re-locked. A transaction that locked a higher account above and
		// now waits for a lower one can deadlock with another doing the
		// same; PostgreSQL breaks it and inTx reruns the loser.
		clear(res)
		rs, err = tx.QueryContext(ctx, `INSERT INTO netting_reservations (account, pending, debits)
			SELECT a, 0, 0 FROM unnest($1::text[]) WITH ORDINALITY AS u(a, n) ORDER BY n
			ON CONFLICT (account) DO UPDATE SET pending = netting_reservations.pending
			RETURNING account, pending, debits`, accounts)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlstore: reserve: %w", err)
		}
		if err := scanReserved(rs, res); err != nil {
			return nil, nil, fmt.Errorf("sqlstore: reserve: %w", err)
		}
	}
	// The balances, in a statement started after the locks were granted
	// (see Reserve).
	rs, err = tx.QueryContext(ctx, `SELECT account, balance FROM ledger_balances WHERE account = ANY($1::text[])`, accounts)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlstore: reserve: %w", err)
	}
	if err := scanAccountValues(rs, balances); err != nil {
		return nil, nil, fmt.Errorf("sqlstore: reserve: %w", err)
	}
	return res, balances, nil
}

func (postgresEngine) setPending(ctx context.Context, s *Store, tx *sql.Tx, accounts []string, nets, debits []int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO netting_reservations (account, pending, debits) SELECT a, p, d FROM unnest($1::text[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS u(a, p, d, n) ORDER BY n
		ON CONFLICT (account) DO UPDATE SET pending = excluded.pending, debits = excluded.debits`, accounts, nets, debits); err != nil {
		return fmt.Errorf("sqlstore: set pending: %w", err)
	}
	return nil
}

// insertJournal inserts the rows with one array per column, skipping
// those whose key or seq is taken.
func (postgresEngine) insertJournal(ctx context.Context, s *Store, tx *sql.Tx, recs []netting.JournalRecord, encoded []string, now int64) ([]string, bool, error) {
	seqs := make([]int64, len(recs))
	keys := make([]string, len(recs))
	prevs := make([]string, len(recs))
	hashes := make([]string, len(recs))
	for i, r := range recs {
		seqs[i], keys[i], prevs[i], hashes[i] = r.Seq, r.Key, r.PrevHash, r.Hash
	}
	inserted, err := queryStrings(ctx, tx, `INSERT INTO netting_journal (session_id, seq, key, legs, prev_hash, hash, recorded_at)
		SELECT $1, seq, key, legs, prev_hash, hash, $2 FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[]) AS u(seq, key, legs, prev_hash, hash)
		ON CONFLICT DO NOTHING RETURNING key`, recs[0].SessionID, now, seqs, keys, encoded, prevs, hashes)
	if err != nil {
		return nil, false, err
	}
	return inserted, len(inserted) == len(recs), nil
}

// insertBatch inserts the batch row and its keys in one statement, keys
// given as one array, skipping the taken ones.
func (postgresEngine) insertBatch(ctx context.Context, s *Store, tx *sql.Tx, h batchHeader, body []byte, keys []string, now int64) ([]string, error) {
	wrote, err := queryStrings(ctx, tx, `WITH b AS (
			INSERT INTO netting_batches (session_id, first_seq, n, prev_hash, recorded_at, body) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id)
		INSERT INTO netting_keys (key, batch, idx) SELECT u.key, b.id, u.n - 1 FROM b, unnest($7::text[]) WITH ORDINALITY AS u(key, n)
		ON CONFLICT DO NOTHING RETURNING key`, h.sessionID, h.firstSeq, h.n, h.prevHash, now, body, keys)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return nil, netting.ErrSeqConflict.Wrap("%s: seq %d already journaled", h.sessionID, h.firstSeq)
	}
	return wrote, err
}

// reserveAndAppend: the common case (every request granted, nothing
// refused) is groupCommitPG's single statement; anything else is declined
// there and decided request by request (reserveAndAppendTx).
func (postgresEngine) reserveAndAppend(ctx context.Context, s *Store, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) ([]netting.JournalRecord, []netting.RefusedKey)) ([]bool, error) {
	granted, applied, err := s.groupCommitPG(ctx, own, reqs, build)
	if applied || err != nil {
		return granted, err
	}
	// Declined: nothing was applied.
	granted, err = s.reserveAndAppendTx(ctx, own, reqs, build, false)
	if errors.Is(err, errJournalUniqueViolation) {
		// The fast statement found a taken key or seq and aborted the
		// transaction, which can then say nothing more. Rerun it with the
		// statement that skips such rows and names them.
		granted, err = s.reserveAndAppendTx(ctx, own, reqs, build, true)
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
// counters' debits before the add and the session's own credits
// (batchSums), every request was granted, and the session took every row.
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
func (s *Store) groupCommitPG(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) ([]netting.JournalRecord, []netting.RefusedKey)) (granted []bool, applied bool, err error) {
	if len(reqs) == 0 {
		return nil, false, nil
	}
	all := make([]bool, len(reqs))
	for i := range all {
		all[i] = true
	}
	recs, refused := build(slices.Clone(all))
	if len(recs) == 0 || len(refused) > 0 {
		return nil, false, nil // the transaction below remembers refusals
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
	var encoded []string
	if s.schema < schemaBatches {
		if encoded, err = encodeAll(recs); err != nil {
			return nil, false, err
		}
	}
	b := sumBatch(reqs)
	if b.wrapped {
		return nil, false, nil // decided request by request, on true sums
	}
	owns := make([]int64, len(b.accounts))
	for i, a := range b.accounts {
		owns[i] = own[a]
	}
	var journaled int64
	if s.schema >= schemaBatches {
		err = s.commitPool.QueryRow(ctx, s.d.q(groupCommitPGBatchText), pgx.QueryExecModeCacheStatement,
			b.accounts, b.sums, b.hasLow, b.low, len(b.accounts),
			len(recs), sid, first, keys, encodeBatch(recs), recs[0].PrevHash, b.dsums, owns).Scan(&journaled)
		return s.groupCommitPGResult(sid, all, err)
	}
	// On the commit pool: an implicit transaction at REPEATABLE READ, one
	// round trip with the commit. A prepared statement (cached per
	// connection): its parameters are described, so pgx sends the arrays
	// in binary instead of as text the server must parse.
	err = s.commitPool.QueryRow(ctx, s.d.q(groupCommitPGText), pgx.QueryExecModeCacheStatement,
		b.accounts, b.sums, b.hasLow, b.low, len(b.accounts),
		len(recs), sid, first, seqs, keys, encoded, prevs, hashes, b.dsums, owns).Scan(&journaled)
	return s.groupCommitPGResult(sid, all, err)
}

// groupCommitPGResult reads the single statement's outcome (see
// groupCommitPG).
func (s *Store) groupCommitPGResult(sid string, all []bool, err error) ([]bool, bool, error) {
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
// (accounts, sums, hasLow, low) and $5 its account count; $6–$13 the rows;
// $14 the batch's debits per account (dsums) and $15 the session's own
// credits per account.
const groupCommitPGText = `WITH setp AS (
		INSERT INTO netting_reservations (account, pending, debits)
		SELECT a, s, d FROM unnest($1::text[], $2::bigint[], $14::bigint[]) WITH ORDINALITY AS u(a, s, d, n) ORDER BY n
		ON CONFLICT (account) DO UPDATE SET pending = netting_reservations.pending + excluded.pending,
			debits = netting_reservations.debits + excluded.debits
		RETURNING account, debits),
	sess AS (
		UPDATE netting_sessions SET journal_len = journal_len + $6, last_recorded_at = {now}
		WHERE id = $7 AND journal_len = $8 AND claim_token = 0 AND settled_at IS NULL
		RETURNING last_recorded_at),
	ins AS (
		INSERT INTO netting_journal (session_id, seq, key, legs, prev_hash, hash, recorded_at)
		SELECT $7, u.seq, u.key, u.legs, u.prev_hash, u.hash, sess.last_recorded_at
		FROM sess, unnest($9::bigint[], $10::text[], $11::text[], $12::text[], $13::text[]) AS u(seq, key, legs, prev_hash, hash)
		WHERE NOT EXISTS (SELECT 1 FROM netting_refusals r WHERE r.key = u.key)
		RETURNING 1)
	SELECT netting_group_commit_check(
		(SELECT count(*) FROM setp
			JOIN unnest($1::text[], $14::bigint[], $3::bool[], $4::bigint[], $15::bigint[]) AS c(a, d, has_low, low, own) ON c.a = setp.account
			LEFT JOIN ledger_balances b ON b.account = c.a
			WHERE c.has_low AND COALESCE(b.balance, 0) + (setp.debits - c.d) + c.own + c.low < 0),
		(SELECT count(*) FROM setp), $5,
		(SELECT count(*) FROM sess),
		(SELECT count(*) FROM ins), $6)`

// groupCommitPGBatchText is groupCommitPGText on the journal in batch
// form (schema version 9): the rows go in as one batch row ($10 its body,
// $11 its first row's prev hash) and one key row each ($9). A refused
// key's marker row makes its key row fail the statement, as a journaled
// key's does, and the batch is declined. $1–$5 and
// $12–$13 are as $1–$5 and $14–$15 there; $6–$8 the row count, session
// and first seq.
const groupCommitPGBatchText = `WITH setp AS (
		INSERT INTO netting_reservations (account, pending, debits)
		SELECT a, s, d FROM unnest($1::text[], $2::bigint[], $12::bigint[]) WITH ORDINALITY AS u(a, s, d, n) ORDER BY n
		ON CONFLICT (account) DO UPDATE SET pending = netting_reservations.pending + excluded.pending,
			debits = netting_reservations.debits + excluded.debits
		RETURNING account, debits),
	sess AS (
		UPDATE netting_sessions SET journal_len = journal_len + $6, last_recorded_at = {now}
		WHERE id = $7 AND journal_len = $8 AND claim_token = 0 AND settled_at IS NULL
		RETURNING last_recorded_at),
	batch AS (
		INSERT INTO netting_batches (session_id, first_seq, n, prev_hash, recorded_at, body)
		SELECT $7, $8, $6, $11::text, sess.last_recorded_at, $10::bytea FROM sess
		RETURNING id),
	ins AS (
		INSERT INTO netting_keys (key, batch, idx)
		SELECT u.key, batch.id, u.n - 1
		FROM batch, unnest($9::text[]) WITH ORDINALITY AS u(key, n)
		RETURNING 1)
	SELECT netting_group_commit_check(
		(SELECT count(*) FROM setp
			JOIN unnest($1::text[], $12::bigint[], $3::bool[], $4::bigint[], $13::bigint[]) AS c(a, d, has_low, low, own) ON c.a = setp.account
			LEFT JOIN ledger_balances b ON b.account = c.a
			WHERE c.has_low AND COALESCE(b.balance, 0) + (setp.debits - c.d) + c.own + c.low < 0),
		(SELECT count(*) FROM setp), $5,
		(SELECT count(*) FROM sess),
		(SELECT count(*) FROM ins), $6)`

// errJournalUniqueViolation is the PostgreSQL group commit's fast journal
// insert hitting a unique index (a key or seq already taken): the cue to
// rerun the transaction with the statement that explains the collision.
var errJournalUniqueViolation = errors.New("sqlstore: journal unique violation")

// reserveAndAppendTx is the group commit that groupCommitPG declined,
// decided request by request in a READ COMMITTED transaction: lock the
// counters (lockPending), decide, then write the counters and the rows in
// one statement (setPendingAndAppendPG). With explain set, the journal
// insert skips conflicting rows (ON CONFLICT DO NOTHING) and reports them
// as appendTx does; without it, it is a plain INSERT, which costs less per
// row and fails with errJournalUniqueViolation on a conflict.
func (s *Store) reserveAndAppendTx(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) ([]netting.JournalRecord, []netting.RefusedKey), explain bool) ([]bool, error) {
	granted := make([]bool, len(reqs))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		clear(granted)
		changed, err := s.decideReserve(ctx, tx, reqs, own, granted)
		if err != nil {
			return err
		}
		recs, refused := build(slices.Clone(granted))
		if len(recs) == 0 || s.schema >= schemaBatches {
			// In batch form (schema 9) the append is appendTx's: one batch
			// row and one statement for the keys, taken keys skipped and
			// named, so there is no fast insert to fall back from.
			if err := s.setPending(ctx, tx, changed); err != nil {
				return err
			}
			if len(recs) > 0 {
				if err := s.appendTx(ctx, tx, recs); err != nil {
					return err
				}
			}
			return s.rememberRefusals(ctx, tx, refused)
		}
		encoded, err := encodeAll(recs)
		if err != nil {
			return err
		}
		if err := s.setPendingAndAppendPG(ctx, tx, changed, recs, encoded, explain); err != nil {
			return err
		}
		return s.rememberRefusals(ctx, tx, refused)
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
func (s *Store) setPendingAndAppendPG(ctx context.Context, tx *sql.Tx, changed map[string]netting.Reserved, recs []netting.JournalRecord, encoded []string, explain bool) error {
	sid, first := recs[0].SessionID, recs[0].Seq
	accounts := make([]string, 0, len(changed))
	for a := range changed {
		accounts = append(accounts, a)
	}
	sort.Strings(accounts)
	vals := make([]int64, len(accounts))
	debits := make([]int64, len(accounts))
	for i, a := range accounts {
		vals[i], debits[i] = changed[a].Net(), changed[a].Debits
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
	// reserveAndAppendTx); a plain INSERT skips the speculative insertion
	// that ON CONFLICT does for every row.
	onConflict := ""
	if explain {
		onConflict = "ON CONFLICT DO NOTHING "
	}
	var updated int
	err := tx.QueryRowContext(ctx, s.d.q(`WITH setp AS (
			UPDATE netting_reservations r SET pending = u.p, debits = u.d
			FROM unnest($1::text[], $2::bigint[], $11::bigint[]) AS u(a, p, d)
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
			WHERE NOT EXISTS (SELECT 1 FROM netting_refusals f WHERE f.key = u.key)
			`+onConflict+`RETURNING 1)
		SELECT (SELECT count(*) FROM setp), (SELECT count(*) FROM sess), (SELECT count(*) FROM ins)`),
		accounts, vals, len(recs), sid, first, seqs, keys, encoded, prevs, hashes, debits).Scan(&updated, &sessions, &inserted)
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
