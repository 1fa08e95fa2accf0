package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// Post applies p atomically: the posting row, its entries, every touched
// account's balance and the posting's link in the chain, in one
// transaction that fails with LEDGER.OVERDRAFT (and writes nothing) when a
// wallet account would end below zero. Posting an id that is already
// posted does nothing and returns nil: ids are idempotency keys.
func (s *Store) Post(ctx context.Context, p ledger.Posting) error {
	if err := ledger.Validate(p); err != nil {
		return err
	}
	meta, err := encodeMeta(p.Meta)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := s.postTx(ctx, tx, p, meta, nil)
		return err
	})
}

// postTx writes a validated posting inside tx: its row, entries and
// balances; then runs also, if not nil (the rest of the caller's
// transaction: a settle posting's release); then chains the posting
// (chainTx), last. posted is false when the id was already posted, in
// which case nothing is written and also does not run.
func (s *Store) postTx(ctx context.Context, tx *sql.Tx, p ledger.Posting, meta string, also func() error) (posted bool, err error) {
	res, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO ledger_postings (id, meta, posted_at) VALUES (?, ?, {now}) ON CONFLICT (id) DO NOTHING`), p.ID, meta)
	if err != nil {
		return false, fmt.Errorf("sqlstore: post %s: %w", p.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("sqlstore: post %s: %w", p.ID, err)
	} else if n == 0 {
		return false, nil
	}
	var q strings.Builder
	q.WriteString(`INSERT INTO ledger_entries (posting_id, idx, account, amount) VALUES `)
	args := make([]any, 0, 4*len(p.Legs))
	for i, leg := range p.Legs {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?)")
		args = append(args, p.ID, i, leg.Account, leg.Amount)
	}
	if _, err := tx.ExecContext(ctx, s.d.q(q.String()), args...); err != nil {
		return false, fmt.Errorf("sqlstore: post %s entries: %w", p.ID, err)
	}
	if err := s.postBalancesTx(ctx, tx, p); err != nil {
		return false, err
	}
	if also != nil {
		if err := also(); err != nil {
			return false, err
		}
	}
	if s.schema >= chainSchema {
		if err := s.chainTx(ctx, tx, p, meta); err != nil {
			return false, err
		}
	}
	return true, nil
}

// postBalancesTx adds a posting's deltas to the balances and applies the
// overdraft rule to the result.
func (s *Store) postBalancesTx(ctx context.Context, tx *sql.Tx, p ledger.Posting) error {
	// One upsert for every touched account, in account order (the lock
	// order of every posting), returning the balances the rows now hold.
	deltas := sortedDeltas(p.Legs)
	if len(deltas) == 0 {
		return nil
	}
	bargs := make([]any, 0, 2*len(deltas))
	for _, d := range deltas {
		bargs = append(bargs, d.Account, d.Delta)
	}
	rs, err := tx.QueryContext(ctx, s.d.q(`INSERT INTO ledger_balances (account, balance) VALUES `+repeatJoin("(?, ?)", len(deltas))+`
		ON CONFLICT (account) DO UPDATE SET balance = ledger_balances.balance + excluded.balance
		RETURNING account, balance`), bargs...)
	if err != nil {
		return fmt.Errorf("sqlstore: post %s balances: %w", p.ID, err)
	}
	after := make(map[string]int64, len(deltas))
	if err := scanAccountValues(rs, after); err != nil {
		return fmt.Errorf("sqlstore: post %s balances: %w", p.ID, err)
	}
	// The ledger's rule (ledger.CheckOverdraft), applied to the balances the
	// rows now hold: only a decrease of a wallet is refused, and the whole
	// transaction rolls back with it.
	for _, d := range deltas {
		if b := after[d.Account]; d.Delta < 0 && b < 0 && ledger.IsWallet(d.Account) {
			return ledger.OverdraftError(d.Account, b)
		}
	}
	return nil
}

// chainTx chains the posting p, just written in tx, after the chain's
// head: it locks the head row (ledger_chain) — so postings chain one at a
// time, in the order they commit, even from many processes — stamps the
// posting's time from the database's clock, hashes it after the head
// (netting.PostingHash) and moves the head to it. It runs last in the
// posting's transaction, so the head is held for two statements and the
// commit. The posting is hashed with its meta as stored (decoded back from
// meta), so the hash always matches what ReadPostings returns.
func (s *Store) chainTx(ctx context.Context, tx *sql.Tx, p ledger.Posting, meta string) error {
	var (
		seq       int64
		prev      string
		postedAt  int64
		stored, _ = decodeMeta(meta) // encodeMeta's own output: it decodes
	)
	if err := tx.QueryRowContext(ctx, s.d.q(`SELECT chain_len, head_hash, {now} FROM ledger_chain WHERE id = 1{forUpdate}`)).
		Scan(&seq, &prev, &postedAt); err != nil {
		return fmt.Errorf("sqlstore: post %s: chain head: %w", p.ID, err)
	}
	hash := netting.PostingHash(prev, ledger.Posting{ID: p.ID, Legs: p.Legs, Meta: stored}, fromMicros(postedAt))
	if _, err := tx.ExecContext(ctx, s.d.q(`UPDATE ledger_postings SET chain_seq = ?, prev_hash = ?, hash = ?, posted_at = ? WHERE id = ?`),
		seq, prev, hash, postedAt, p.ID); err != nil {
		return fmt.Errorf("sqlstore: post %s: chain: %w", p.ID, err)
	}
	if _, err := tx.ExecContext(ctx, s.d.q(`UPDATE ledger_chain SET chain_len = ?, head_hash = ? WHERE id = 1`), seq+1, hash); err != nil {
		return fmt.Errorf("sqlstore: post %s: chain head: %w", p.ID, err)
	}
	return nil
}

// sortedDeltas is ledger.NetDeltas without zero changes, sorted by account:
// every transaction locks balance (and reservation) rows in the same order,
// so two transactions on PostgreSQL cannot deadlock on each other.
func sortedDeltas(legs []ledger.Leg) []ledger.AccountDelta {
	all := ledger.NetDeltas(legs)
	out := all[:0]
	for _, d := range all {
		if d.Delta != 0 {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	return out
}

func encodeMeta(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("sqlstore: encode meta: %w", err)
	}
	return string(b), nil
}

// decodeMeta is the inverse of encodeMeta; an empty meta is nil.
func decodeMeta(s string) (map[string]string, error) {
	if s == "{}" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// Balance returns account's credits minus debits; an account never posted to
// has balance 0.
func (s *Store) Balance(ctx context.Context, account string) (int64, error) {
	var b int64
	err := s.rdb.QueryRowContext(ctx, s.d.q(`SELECT balance FROM ledger_balances WHERE account = ?`), account).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlstore: balance %s: %w", account, err)
	}
	return b, nil
}

// SumBalances returns the sum of every account's balance, computed by the
// database. Double entry keeps it at zero; anything else is a bug.
func (s *Store) SumBalances(ctx context.Context) (int64, error) {
	var sum sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, `SELECT SUM(balance) FROM ledger_balances`).Scan(&sum); err != nil {
		return 0, fmt.Errorf("sqlstore: sum balances: %w", err)
	}
	return sum.Int64, nil
}

// SumEntries returns the sum of every entry ever posted, recomputed from the
// entries rather than the balances table. It must equal zero too, and
// together with SumBalances it checks that balances match the entries.
func (s *Store) SumEntries(ctx context.Context) (int64, error) {
	var sum sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, `SELECT SUM(amount) FROM ledger_entries`).Scan(&sum); err != nil {
		return 0, fmt.Errorf("sqlstore: sum entries: %w", err)
	}
	return sum.Int64, nil
}

// HasPosting implements netting.LedgerStore.
func (s *Store) HasPosting(ctx context.Context, id string) (bool, error) {
	var one int
	err := s.rdb.QueryRowContext(ctx, s.d.q(`SELECT 1 FROM ledger_postings WHERE id = ?`), id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sqlstore: has posting %s: %w", id, err)
	}
	return true, nil
}

// Balances implements netting.LedgerStore.
func (s *Store) Balances(ctx context.Context) (map[string]int64, error) {
	rs, err := s.rdb.QueryContext(ctx, `SELECT account, balance FROM ledger_balances`)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: balances: %w", err)
	}
	out := map[string]int64{}
	if err := scanAccountValues(rs, out); err != nil {
		return nil, fmt.Errorf("sqlstore: balances: %w", err)
	}
	return out, nil
}

// PostingCount returns how many postings the ledger holds.
func (s *Store) PostingCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger_postings`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlstore: count postings: %w", err)
	}
	return n, nil
}
