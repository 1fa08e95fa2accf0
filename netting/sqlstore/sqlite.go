package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// sqliteEngine is the engine (dialect.go) on SQLite. It has no array
// parameters, so a batch is a multi-row statement; the hot ones are
// prepared once per store in power-of-two row counts (stmtcache.go). It
// has no row locks either: a write transaction begins IMMEDIATE and holds
// the database's write lock, so nothing else writes until it commits, and
// the engine reads and writes rows without locking them.
type sqliteEngine struct{}

// relaxedTx runs fn with synchronous=NORMAL on the writer connection (in
// WAL mode: no fsync at commit) and puts FULL back before the connection
// serves anyone else. If FULL cannot be restored the connection is
// discarded rather than left relaxed.
func (sqliteEngine) relaxedTx(ctx context.Context, s *Store, fn func(tx *sql.Tx) error) (err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = FULL`); rerr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			err = errors.Join(err, rerr)
		}
		conn.Close()
	}()
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		return err
	}
	return commitTx(ctx, conn, "", fn)
}

// lockPending only reads, in one statement per chunk of accounts: the
// transaction's write lock already excludes every other writer.
func (sqliteEngine) lockPending(ctx context.Context, s *Store, tx *sql.Tx, accounts []string) (res map[string]netting.Reserved, balances map[string]int64, err error) {
	res = make(map[string]netting.Reserved, len(accounts))
	balances = make(map[string]int64, len(accounts))
	for start := 0; start < len(accounts); start += inChunk {
		chunk := accounts[start:min(start+inChunk, len(accounts))]
		args := make([]any, len(chunk))
		for i, a := range chunk {
			args[i] = a
		}
		rs, err := tx.QueryContext(ctx, `WITH a(account) AS (VALUES `+repeatJoin("(?)", len(chunk))+`)
			SELECT a.account, COALESCE(r.pending, 0), COALESCE(r.debits, 0), COALESCE(b.balance, 0) FROM a
			LEFT JOIN netting_reservations r ON r.account = a.account
			LEFT JOIN ledger_balances b ON b.account = a.account`, args...)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlstore: reserve: %w", err)
		}
		if err := scanPendingBalances(rs, res, balances); err != nil {
			return nil, nil, fmt.Errorf("sqlstore: reserve: %w", err)
		}
	}
	return res, balances, nil
}

func (sqliteEngine) setPending(ctx context.Context, s *Store, tx *sql.Tx, accounts []string, nets, debits []int64) error {
	for start := 0; start < len(accounts); start += inChunk / 3 {
		end := min(start+inChunk/3, len(accounts))
		args := make([]any, 0, 3*(end-start))
		for i := start; i < end; i++ {
			args = append(args, accounts[i], nets[i], debits[i])
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO netting_reservations (account, pending, debits) VALUES `+
			repeatJoin("(?, ?, ?)", end-start)+` ON CONFLICT (account) DO UPDATE SET pending = excluded.pending, debits = excluded.debits`, args...); err != nil {
			return fmt.Errorf("sqlstore: set pending: %w", err)
		}
	}
	return nil
}

// insertJournal inserts the rows with the cached multi-row statements. A
// taken key or seq fails its statement, which SQLite undoes on its own
// while the transaction stays usable. From that chunk on, the rows go in
// with the statement that skips such rows and names the ones it wrote, so
// the refusal lists every colliding key of the batch, not just the first
// chunk's (the transaction is rolled back either way).
func (sqliteEngine) insertJournal(ctx context.Context, s *Store, tx *sql.Tx, recs []netting.JournalRecord, encoded []string, now int64) ([]string, bool, error) {
	sid := recs[0].SessionID
	start := 0
	explain := false
	var wrote []string
	for _, n := range rowChunks(len(recs)) {
		chunk, enc := recs[start:start+n], encoded[start:start+n]
		start += n
		text := sqliteJournalInsertText(n)
		args := make([]any, 0, 7*n)
		for i, r := range chunk {
			args = append(args, sid, r.Seq, r.Key, enc[i], r.PrevHash, r.Hash, now)
		}
		if !explain {
			_, err := s.execTx(ctx, tx, text, args...)
			if err == nil {
				for _, r := range chunk {
					wrote = append(wrote, r.Key)
				}
				continue
			}
			if !isSQLiteConstraint(err) {
				return nil, false, err
			}
			explain = true
		}
		keys, err := queryStrings(ctx, tx, text+` ON CONFLICT DO NOTHING RETURNING key`, args...)
		if err != nil {
			return nil, false, err
		}
		wrote = append(wrote, keys...)
	}
	return wrote, len(wrote) == len(recs), nil
}

// insertBatch inserts the batch row, then its keys with the cached
// multi-row statements; as insertJournal does, from a chunk that hits a
// taken key on, with the statement that skips such rows and names the
// ones it wrote.
func (sqliteEngine) insertBatch(ctx context.Context, s *Store, tx *sql.Tx, h batchHeader, body []byte, keys []string, now int64) ([]string, error) {
	var id int64
	err := s.queryRowTx(ctx, tx, sqliteBatchInsertText, h.sessionID, h.firstSeq, h.n, h.prevHash, now, body).Scan(&id)
	if isSQLiteConstraint(err) {
		return nil, netting.ErrSeqConflict.Wrap("%s: seq %d already journaled", h.sessionID, h.firstSeq)
	}
	if err != nil {
		return nil, err
	}
	start := 0
	explain := false
	wrote := make([]string, 0, len(keys))
	for _, n := range rowChunks(len(keys)) {
		text := sqliteKeysInsertText(n)
		args := make([]any, 0, 3*n)
		for i, k := range keys[start : start+n] {
			args = append(args, k, id, start+i)
		}
		if !explain {
			_, err := s.execTx(ctx, tx, text, args...)
			if err == nil {
				wrote = append(wrote, keys[start:start+n]...)
				start += n
				continue
			}
			if !isSQLiteConstraint(err) {
				return nil, err
			}
			explain = true
		}
		start += n
		ks, err := queryStrings(ctx, tx, text+` ON CONFLICT DO NOTHING RETURNING key`, args...)
		if err != nil {
			return nil, err
		}
		wrote = append(wrote, ks...)
	}
	return wrote, nil
}

// isSQLiteConstraint reports a SQLite constraint violation (SQLITE_CONSTRAINT,
// primary code 19).
func isSQLiteConstraint(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 19
}

// reserveAndAppend is one transaction: the counters in one statement per
// chunk of accounts (addAndDecide), then the rows (appendTx), then the
// refused keys (rememberRefusals).
func (sqliteEngine) reserveAndAppend(ctx context.Context, s *Store, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) ([]netting.JournalRecord, []netting.RefusedKey)) ([]bool, error) {
	granted := make([]bool, len(reqs))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		clear(granted)
		if err := s.addAndDecideSQLite(ctx, tx, own, reqs, granted); err != nil {
			return err
		}
		recs, refused := build(slices.Clone(granted))
		if len(recs) > 0 {
			if err := s.appendTx(ctx, tx, recs); err != nil {
				return err
			}
		}
		return s.rememberRefusals(ctx, tx, refused)
	})
	if err != nil {
		return nil, err
	}
	return granted, nil
}

// addAndDecideSQLite is decideReserve and setPending for SQLite in one
// statement per chunk of accounts instead of two: it adds every request's
// deltas to the counters as if all were granted (creating missing rows);
// for the accounts with a negative delta — the only ones a request is
// checked against — it reads back the counter's new values (net and
// debits) and the account's balance, so it knows the counters before the
// add. It decides the requests exactly as decideReserve does (the port's
// rule, with the session's own credits), and adds back to each counter the
// difference between the decided values and the speculative ones —
// nothing when every request is granted, the common case. An account with
// only credits is written blind (no read back): the rule never checks it,
// and its correction is relative. Nothing else can write between the add
// and the correction: the transaction holds SQLite's write lock.
func (s *Store) addAndDecideSQLite(ctx context.Context, tx *sql.Tx, own map[string]int64, reqs [][]ledger.AccountDelta, granted []bool) error {
	b := sumBatch(reqs)
	if b.wrapped {
		// The speculative add would not be the batch's (SQLite turns an
		// integer overflow into a REAL): read, decide and write absolute
		// values instead.
		return s.reserveTx(ctx, tx, reqs, own, granted)
	}
	if len(b.accounts) == 0 {
		for i := range granted {
			granted[i] = true
		}
		return nil
	}
	var checked, blind []int // indexes into b.accounts
	for i := range b.accounts {
		if b.hasLow[i] {
			checked = append(checked, i)
		} else {
			blind = append(blind, i)
		}
	}
	var after map[string]netting.Reserved
	var balances map[string]int64
	if needs, ok := checkNeeds(b, checked, own); ok {
		// The common case, every request granted: add every account blind
		// and ask only how many checked accounts fail the rule — no row
		// read back, nothing to correct when none does.
		all := make([]int, len(b.accounts))
		for i := range all {
			all[i] = i
		}
		if err := s.addPendingSQLite(ctx, tx, b, all, nil, nil); err != nil {
			return err
		}
		failing, err := s.failingSQLite(ctx, tx, b, checked, needs)
		if err != nil {
			return err
		}
		if failing == 0 {
			for i := range granted {
				granted[i] = true
			}
			return nil
		}
		// Some request is refused: read the checked counters back (after
		// the add) and decide request by request, as below.
		names := make([]string, len(checked))
		for k, i := range checked {
			names[k] = b.accounts[i]
		}
		if after, balances, err = s.d.lockPending(ctx, s, tx, names); err != nil {
			return err
		}
	} else {
		after = make(map[string]netting.Reserved, len(checked))
		balances = make(map[string]int64, len(checked))
		if err := s.addPendingSQLite(ctx, tx, b, checked, after, balances); err != nil {
			return err
		}
		if err := s.addPendingSQLite(ctx, tx, b, blind, nil, nil); err != nil {
			return err
		}
	}
	if len(after) != len(checked) {
		return fmt.Errorf("sqlstore: reserve: read back %d of %d counters", len(after), len(checked))
	}
	// before[a] is the counter before this batch for a checked account; a
	// blind account starts at zero, as only its change matters.
	speculative := make(map[string]netting.Reserved, len(b.accounts))
	for i, a := range b.accounts {
		speculative[a] = netting.Reserved{Debits: b.dsums[i], Credits: b.sums[i] - b.dsums[i]}
	}
	res := make(map[string]netting.Reserved, len(b.accounts))
	for _, i := range checked {
		a := b.accounts[i]
		res[a] = after[a].Minus(speculative[a])
	}
	before := maps.Clone(res)
	copy(granted, netting.DecideReservations(reqs, res, balances, ownCopy(own)))
	fix := batchSums{}
	var fixes []int
	for _, a := range b.accounts {
		d := res[a].Minus(before[a]).Minus(speculative[a])
		if !d.Zero() {
			fix.accounts = append(fix.accounts, a)
			fix.sums = append(fix.sums, d.Net())
			fix.dsums = append(fix.dsums, d.Debits)
			fixes = append(fixes, len(fixes))
		}
	}
	return s.addPendingSQLite(ctx, tx, fix, fixes, nil, nil)
}

// checkNeeds returns, for each checked account (b.accounts[i], i in
// checked), what the rule adds to its balance and its counter's debits
// after the batch's speculative add: −dsum + own + low (every request is
// granted exactly when balance + debits_after + need ≥ 0 for each). ok is
// false if one does not fit in int64: the caller then reads the counters
// back and decides in Go.
func checkNeeds(b batchSums, checked []int, own map[string]int64) (needs []int64, ok bool) {
	needs = make([]int64, len(checked))
	for k, i := range checked {
		if b.dsums[i] == math.MinInt64 {
			return nil, false
		}
		n, w1 := addWraps(-b.dsums[i], own[b.accounts[i]])
		n, w2 := addWraps(n, b.low[i])
		if w1 || w2 {
			return nil, false
		}
		needs[k] = n
	}
	return needs, true
}

// failingSQLite counts the checked accounts whose balance + debits (after
// the add) + need is below zero, or left int64 on the way
// (sqliteFailingText), with the cached statements.
func (s *Store) failingSQLite(ctx context.Context, tx *sql.Tx, b batchSums, checked []int, needs []int64) (int64, error) {
	var failing int64
	start := 0
	for _, n := range rowChunks(len(checked)) {
		args := make([]any, 0, 2*n)
		for k := start; k < start+n; k++ {
			args = append(args, b.accounts[checked[k]], needs[k])
		}
		start += n
		var f int64
		if err := s.queryRowTx(ctx, tx, sqliteFailingText(n), args...).Scan(&f); err != nil {
			return 0, fmt.Errorf("sqlstore: reserve: %w", err)
		}
		failing += f
	}
	return failing, nil
}

// addPendingSQLite adds b.sums[i] to the net counter and b.dsums[i] to the
// debits of b.accounts[i] for each i of idx (ascending, so in account
// order), creating missing rows, with the cached statements. With after
// non-nil it reads back each counter's new values into after and its
// account's balance into balances.
func (s *Store) addPendingSQLite(ctx context.Context, tx *sql.Tx, b batchSums, idx []int, after map[string]netting.Reserved, balances map[string]int64) error {
	start := 0
	for _, n := range rowChunks(len(idx)) {
		args := make([]any, 0, 3*n)
		for _, i := range idx[start : start+n] {
			args = append(args, b.accounts[i], b.sums[i], b.dsums[i])
		}
		start += n
		if after == nil {
			if _, err := s.execTx(ctx, tx, sqliteReserveAddText(n, false), args...); err != nil {
				return fmt.Errorf("sqlstore: reserve: %w", err)
			}
			continue
		}
		rs, err := s.queryTx(ctx, tx, sqliteReserveAddText(n, true), args...)
		if err != nil {
			return fmt.Errorf("sqlstore: reserve: %w", err)
		}
		if err := scanPendingBalances(rs, after, balances); err != nil {
			return fmt.Errorf("sqlstore: reserve: %w", err)
		}
	}
	return nil
}

// The SQLite hot statements, by row count.

// sqliteReserveAddText adds to rows counters, creating missing ones; with
// readBack it returns each counter's new value and its account's balance.
func sqliteReserveAddText(rows int, readBack bool) string {
	text := `INSERT INTO netting_reservations (account, pending, debits) VALUES ` + repeatJoin("(?, ?, ?)", rows) + `
			ON CONFLICT (account) DO UPDATE SET pending = netting_reservations.pending + excluded.pending,
				debits = netting_reservations.debits + excluded.debits`
	if readBack {
		text += `
			RETURNING account, pending, debits, COALESCE((SELECT b.balance FROM ledger_balances b WHERE b.account = netting_reservations.account), 0)`
	}
	return text
}

// sqliteFailingText counts, of rows (account, need) pairs, the accounts
// whose balance + debits + need is below zero (failingSQLite), or is not
// an integer: SQLite makes an overflowing sum a REAL — the blind add's
// debits too, when the counter's and the batch's leave int64 — and a REAL
// near −2^63 rounds by up to 2,048, so its sign near zero proves nothing.
// Such an account is decided by the rule in Go, on the counters read back.
func sqliteFailingText(rows int) string {
	return `WITH c(account, need) AS (VALUES ` + repeatJoin("(?, ?)", rows) + `)
			SELECT COUNT(*) FROM (SELECT COALESCE(b.balance, 0) + r.debits + c.need AS h
				FROM c JOIN netting_reservations r ON r.account = c.account
				LEFT JOIN ledger_balances b ON b.account = c.account)
			WHERE h < 0 OR typeof(h) <> 'integer'`
}

// sqliteJournalInsertText inserts rows journal rows. (Binding what the
// rows share once, with numbered parameters, cost more than it saved: the
// driver looks each ?NNN parameter's name up, and SQLite finds a name by a
// linear search, so a statement of n parameters binds in n² steps.)
func sqliteJournalInsertText(rows int) string {
	return `INSERT INTO netting_journal (session_id, seq, key, legs, prev_hash, hash, recorded_at) VALUES ` +
		repeatJoin("(?, ?, ?, ?, ?, ?, ?)", rows)
}

// sqliteBatchInsertText inserts one batch row and returns its id.
const sqliteBatchInsertText = `INSERT INTO netting_batches (session_id, first_seq, n, prev_hash, recorded_at, body) VALUES (?, ?, ?, ?, ?, ?) RETURNING id`

// sqliteKeysInsertText inserts rows key index rows.
func sqliteKeysInsertText(rows int) string {
	return `INSERT INTO netting_keys (key, batch, idx) VALUES ` + repeatJoin("(?, ?, ?)", rows)
}
