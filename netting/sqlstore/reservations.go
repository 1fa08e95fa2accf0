package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// inChunk bounds the number of '?' in one IN list or VALUES list.
const inChunk = 400

// Reserve implements netting.ReservationStore. Every account the requests
// touch is locked first, in account order (no two Reserves can deadlock),
// then the requests are decided in Go against the locked pending values and
// the balances read in the same transaction, exactly as the port states,
// and the changed counters are written back. The balances are read, not
// locked, and on PostgreSQL only once the counters are locked, in a
// statement of its own: a settle posting changes a balance and its
// counter in one transaction (PostFencedReleasing), so once we hold the
// counter that posting has committed, and a fresh read sees its balance
// too. A read from before the lock would pair the old balance with the new
// counter — headroom that is not there. (A plain Post changes balances
// alone; it is the ledger's, not a promise, and a settle refuses what it
// overdraws.)
func (s *Store) Reserve(ctx context.Context, reqs [][]ledger.AccountDelta) ([]bool, error) {
	granted := make([]bool, len(reqs))
	if len(reqs) == 0 {
		return granted, nil
	}
	err := s.inTxWith(ctx, relaxed, func(tx *sql.Tx) error { return s.reserveTx(ctx, tx, reqs, granted) })
	if err != nil {
		// Fail closed: nothing was applied, nothing is granted.
		return nil, err
	}
	return granted, nil
}

// reserveTx is Reserve's work inside tx, deciding into granted.
func (s *Store) reserveTx(ctx context.Context, tx *sql.Tx, reqs [][]ledger.AccountDelta, granted []bool) error {
	changed, err := s.decideReserve(ctx, tx, reqs, granted)
	if err != nil {
		return err
	}
	return s.setPending(ctx, tx, changed)
}

// decideReserve locks the requests' reservation rows, decides every request
// into granted by the port's rule, and returns the counters' new values
// (only those that changed) for the caller to write.
func (s *Store) decideReserve(ctx context.Context, tx *sql.Tx, reqs [][]ledger.AccountDelta, granted []bool) (map[string]int64, error) {
	accounts := distinctAccounts(reqs)
	if len(accounts) == 0 {
		for i := range granted {
			granted[i] = true
		}
		return nil, nil
	}
	pending, balances, err := s.d.lockPending(ctx, s, tx, accounts)
	if err != nil {
		return nil, err
	}
	before := make(map[string]int64, len(pending))
	for a, v := range pending {
		before[a] = v
	}
	decideRequests(reqs, pending, balances, granted)
	changed := map[string]int64{}
	for a, v := range pending {
		if before[a] != v {
			changed[a] = v
		}
	}
	return changed, nil
}

// decideRequests applies the port's rule (netting.ReservationStore.Reserve)
// to reqs in order against balances, updating pending in place to the
// counters' final values and recording each request's fate in granted.
// pending and balances hold every account reqs touch.
func decideRequests(reqs [][]ledger.AccountDelta, pending, balances map[string]int64, granted []bool) {
	for i, req := range reqs {
		granted[i] = true
		for j, d := range req {
			pending[d.Account] += d.Delta
			if d.Delta < 0 && balances[d.Account]+pending[d.Account] < 0 {
				for k := j; k >= 0; k-- {
					pending[req[k].Account] -= req[k].Delta
				}
				granted[i] = false
				break
			}
		}
	}
}

// batchSums is the speculative view of a batch of reservation requests, as
// if every one were granted: per account (sorted), the sum of its deltas
// and, when it has a negative delta, the lowest running sum at any of them.
// Every request is granted exactly when, for each account with a negative
// delta, balance + pending + lowest ≥ 0: with nothing undone, the running
// sum at a delta is pending's growth up to and including it, which is what
// the rule checks there.
type batchSums struct {
	accounts []string
	sums     []int64
	// hasLow[i] reports whether accounts[i] has a negative delta; low[i]
	// is then the lowest running sum at one (0 otherwise).
	hasLow []bool
	low    []int64
}

func sumBatch(reqs [][]ledger.AccountDelta) batchSums {
	type acc struct {
		sum, low int64
		hasLow   bool
	}
	by := map[string]*acc{}
	for _, req := range reqs {
		for _, d := range req {
			a := by[d.Account]
			if a == nil {
				a = &acc{}
				by[d.Account] = a
			}
			a.sum += d.Delta
			if d.Delta < 0 && (!a.hasLow || a.sum < a.low) {
				a.low, a.hasLow = a.sum, true
			}
		}
	}
	b := batchSums{accounts: make([]string, 0, len(by))}
	for name := range by {
		b.accounts = append(b.accounts, name)
	}
	sort.Strings(b.accounts)
	b.sums = make([]int64, len(b.accounts))
	b.low = make([]int64, len(b.accounts))
	b.hasLow = make([]bool, len(b.accounts))
	for i, name := range b.accounts {
		a := by[name]
		b.sums[i], b.low[i], b.hasLow[i] = a.sum, a.low, a.hasLow
	}
	return b
}

func distinctAccounts(reqs [][]ledger.AccountDelta) []string {
	seen := map[string]bool{}
	var out []string
	for _, req := range reqs {
		for _, d := range req {
			if !seen[d.Account] {
				seen[d.Account] = true
				out = append(out, d.Account)
			}
		}
	}
	sort.Strings(out)
	return out
}

func scanPendingBalances(rs *sql.Rows, pending, balances map[string]int64) error {
	defer rs.Close()
	for rs.Next() {
		var a string
		var p, b int64
		if err := rs.Scan(&a, &p, &b); err != nil {
			return err
		}
		pending[a], balances[a] = p, b
	}
	return rs.Err()
}

func scanAccountValues(rs *sql.Rows, into map[string]int64) error {
	defer rs.Close()
	for rs.Next() {
		var a string
		var v int64
		if err := rs.Scan(&a, &v); err != nil {
			return err
		}
		into[a] = v
	}
	return rs.Err()
}

// setPending writes absolute counter values, in account order.
func (s *Store) setPending(ctx context.Context, tx *sql.Tx, values map[string]int64) error {
	if len(values) == 0 {
		return nil
	}
	accounts := make([]string, 0, len(values))
	for a := range values {
		accounts = append(accounts, a)
	}
	sort.Strings(accounts)
	vals := make([]int64, len(accounts))
	for i, a := range accounts {
		vals[i] = values[a]
	}
	return s.d.setPending(ctx, s, tx, accounts, vals)
}

// subtractPending subtracts deltas from the counters (summed per account,
// applied in account order).
func (s *Store) subtractPending(ctx context.Context, tx *sql.Tx, deltas []ledger.AccountDelta) error {
	sum := map[string]int64{}
	for _, d := range deltas {
		sum[d.Account] -= d.Delta
	}
	accounts := make([]string, 0, len(sum))
	for a, v := range sum {
		if v != 0 {
			accounts = append(accounts, a)
		}
	}
	sort.Strings(accounts)
	for start := 0; start < len(accounts); start += inChunk / 2 {
		chunk := accounts[start:min(start+inChunk/2, len(accounts))]
		args := make([]any, 0, 2*len(chunk))
		for _, a := range chunk {
			args = append(args, a, sum[a])
		}
		if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO netting_reservations (account, pending) VALUES `+
			repeatJoin("(?, ?)", len(chunk))+` ON CONFLICT (account) DO UPDATE SET pending = netting_reservations.pending + excluded.pending`), args...); err != nil {
			return fmt.Errorf("sqlstore: release pending: %w", err)
		}
	}
	return nil
}

func repeatJoin(s string, n int) string {
	return strings.TrimSuffix(strings.Repeat(s+", ", n), ", ")
}

// Unreserve implements netting.ReservationStore.
func (s *Store) Unreserve(ctx context.Context, deltas []ledger.AccountDelta) error {
	return s.inTxWith(ctx, relaxed, func(tx *sql.Tx) error { return s.subtractPending(ctx, tx, deltas) })
}

// Pending implements netting.ReservationStore: account's shared reservation
// total, the sum of balance deltas promised by accepted movements not yet
// settled (a spend is negative).
func (s *Store) Pending(ctx context.Context, account string) (int64, error) {
	var p int64
	err := s.rdb.QueryRowContext(ctx, s.d.q(`SELECT pending FROM netting_reservations WHERE account = ?`), account).Scan(&p)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlstore: pending %s: %w", account, err)
	}
	return p, nil
}

// PendingAll implements netting.ReservationStore.
func (s *Store) PendingAll(ctx context.Context) (map[string]int64, error) {
	rs, err := s.rdb.QueryContext(ctx, `SELECT account, pending FROM netting_reservations WHERE pending <> 0`)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: pending all: %w", err)
	}
	out := map[string]int64{}
	if err := scanAccountValues(rs, out); err != nil {
		return nil, fmt.Errorf("sqlstore: pending all: %w", err)
	}
	return out, nil
}

// ReleaseSession implements netting.ReservationStore. The release mark and
// the counter change commit together, under the session's fence.
func (s *Store) ReleaseSession(ctx context.Context, f netting.Fence, deltas []ledger.AccountDelta) (bool, error) {
	var released bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		released = false
		r, err := s.fenceTx(ctx, tx, f)
		if err != nil {
			return err
		}
		if r.released {
			return nil
		}
		if err := s.subtractPending(ctx, tx, deltas); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.d.q(`UPDATE netting_sessions SET released_at = {now} WHERE id = ?`), f.SessionID); err != nil {
			return fmt.Errorf("sqlstore: release %s: %w", f.SessionID, err)
		}
		released = true
		return nil
	})
	if err != nil {
		return false, err
	}
	return released, nil
}

// ReplacePending implements netting.ReservationStore.
func (s *Store) ReplacePending(ctx context.Context, want map[string]int64) (int, error) {
	var adjusted int
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		adjusted = 0
		// Lock every row there is: the rebuild must not interleave with a
		// straggling Reserve (the cluster is meant to be quiesced; this
		// makes a mistake merely slow, not wrong).
		rs, err := tx.QueryContext(ctx, s.d.q(`SELECT account, pending FROM netting_reservations ORDER BY account{forUpdate}`))
		if err != nil {
			return fmt.Errorf("sqlstore: replace pending: %w", err)
		}
		current := map[string]int64{}
		if err := scanAccountValues(rs, current); err != nil {
			return fmt.Errorf("sqlstore: replace pending: %w", err)
		}
		changed := map[string]int64{}
		for a, v := range want {
			if current[a] != v {
				changed[a] = v
			}
		}
		for a, v := range current {
			if _, ok := want[a]; !ok && v != 0 {
				changed[a] = 0
			}
		}
		adjusted = len(changed)
		if err := s.setPending(ctx, tx, changed); err != nil {
			return err
		}
		// Zero rows carry nothing; dropping them keeps the table the size of
		// the live reservations.
		if _, err := tx.ExecContext(ctx, `DELETE FROM netting_reservations WHERE pending = 0`); err != nil {
			return fmt.Errorf("sqlstore: replace pending: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return adjusted, nil
}
