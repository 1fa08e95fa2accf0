package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// inChunk bounds the number of '?' in one IN list or VALUES list.
const inChunk = 400

// Reserve implements netting.ReservationStore. Every account the requests
// touch is locked first, in account order (no two Reserves can deadlock),
// then the requests are decided in Go against the locked counters and the
// balances read in the same transaction, by the port's rule
// (netting.DecideReservations), and the changed counters are written
// back. The balances are read, not locked, and on PostgreSQL only once the
// counters are locked, in a statement of its own: a settle posting changes
// a balance and its counter in one transaction (PostFencedReleasing), so
// once we hold the counter that posting has committed, and a fresh read
// sees its balance too. A read from before the lock would pair the old
// balance with the new counter — headroom that is not there. (A plain Post
// changes balances alone; it is the ledger's, not a promise, and a settle
// refuses what it overdraws.)
//
// A counter row holds the net pending total (pending, what Pending
// reports) and its debits (debits, ≤ 0, what the rule checks); the
// credits are their difference (schema version 7).
func (s *Store) Reserve(ctx context.Context, reqs [][]ledger.AccountDelta) ([]bool, error) {
	granted := make([]bool, len(reqs))
	if len(reqs) == 0 {
		return granted, nil
	}
	err := s.inTxWith(ctx, relaxed, func(tx *sql.Tx) error { return s.reserveTx(ctx, tx, reqs, nil, granted) })
	if err != nil {
		// Fail closed: nothing was applied, nothing is granted.
		return nil, err
	}
	return granted, nil
}

// reserveTx is Reserve's work inside tx, deciding into granted; own as
// netting.DecideReservations takes it.
func (s *Store) reserveTx(ctx context.Context, tx *sql.Tx, reqs [][]ledger.AccountDelta, own map[string]int64, granted []bool) error {
	changed, err := s.decideReserve(ctx, tx, reqs, own, granted)
	if err != nil {
		return err
	}
	return s.setPending(ctx, tx, changed)
}

// decideReserve locks the requests' reservation rows, decides every request
// into granted by the port's rule (own: the session's spendable credits,
// nil for Reserve; not changed), and returns the counters' new values
// (only those that changed) for the caller to write.
func (s *Store) decideReserve(ctx context.Context, tx *sql.Tx, reqs [][]ledger.AccountDelta, own map[string]int64, granted []bool) (map[string]netting.Reserved, error) {
	accounts := distinctAccounts(reqs)
	if len(accounts) == 0 {
		for i := range granted {
			granted[i] = true
		}
		return nil, nil
	}
	res, balances, err := s.d.lockPending(ctx, s, tx, accounts)
	if err != nil {
		return nil, err
	}
	before := maps.Clone(res)
	copy(granted, netting.DecideReservations(reqs, res, balances, ownCopy(own)))
	changed := map[string]netting.Reserved{}
	for a, v := range res {
		if before[a] != v {
			changed[a] = v
		}
	}
	return changed, nil
}

// ownCopy is own for netting.DecideReservations to accumulate into, or nil
// (Reserve's rule) for nil.
func ownCopy(own map[string]int64) map[string]int64 {
	if own == nil {
		return nil
	}
	c := make(map[string]int64, len(own))
	maps.Copy(c, own)
	return c
}

// batchSums is the speculative view of one session's batch of
// reservation requests (ReserveAndAppend), as if every one were granted:
// per account (sorted), the sum of its deltas, the sum of its negative
// deltas, and, when it has a negative delta, the lowest value at any of
// them of the running debits plus the credits of the requests before it
// (a granted request's credits become the session's own, spendable by the
// requests after it). Every request is granted exactly when, for each
// account with a negative delta, balance + debits + own + lowest ≥ 0:
// with nothing undone, that is what netting.DecideReservations checks at
// each negative delta.
type batchSums struct {
	accounts []string
	sums     []int64
	dsums    []int64
	// hasLow[i] reports whether accounts[i] has a negative delta; low[i]
	// is then the lowest running value at one (0 otherwise).
	hasLow []bool
	low    []int64
	// wrapped reports that a sum left int64 (amounts near the limit): the
	// sums are then not the batch's, and the one-statement check cannot be
	// trusted with them (groupCommitPG declines the batch).
	wrapped bool
}

// addWraps returns a + b and whether it left int64.
func addWraps(a, b int64) (int64, bool) {
	s := a + b
	return s, (b > 0 && s < a) || (b < 0 && s > a)
}

func sumBatch(reqs [][]ledger.AccountDelta) batchSums {
	type acc struct {
		sum, dsum, credited, low int64
		hasLow                   bool
	}
	by := map[string]*acc{}
	wrapped := false
	add := func(a *int64, b int64) {
		var w bool
		*a, w = addWraps(*a, b)
		wrapped = wrapped || w
	}
	get := func(name string) *acc {
		a := by[name]
		if a == nil {
			a = &acc{}
			by[name] = a
		}
		return a
	}
	for _, req := range reqs {
		for _, d := range req {
			a := get(d.Account)
			add(&a.sum, d.Delta)
			if d.Delta < 0 {
				add(&a.dsum, d.Delta)
				run := a.dsum
				add(&run, a.credited)
				if !a.hasLow || run < a.low {
					a.low, a.hasLow = run, true
				}
			}
		}
		// The request's credits are spendable by the requests after it.
		for _, d := range req {
			if d.Delta > 0 {
				add(&by[d.Account].credited, d.Delta)
			}
		}
	}
	b := batchSums{accounts: make([]string, 0, len(by)), wrapped: wrapped}
	for name := range by {
		b.accounts = append(b.accounts, name)
	}
	sort.Strings(b.accounts)
	n := len(b.accounts)
	b.sums, b.dsums, b.low, b.hasLow = make([]int64, n), make([]int64, n), make([]int64, n), make([]bool, n)
	for i, name := range b.accounts {
		a := by[name]
		b.sums[i], b.dsums[i], b.low[i], b.hasLow[i] = a.sum, a.dsum, a.low, a.hasLow
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

// scanPendingBalances scans rows of (account, pending, debits, balance).
func scanPendingBalances(rs *sql.Rows, res map[string]netting.Reserved, balances map[string]int64) error {
	defer rs.Close()
	for rs.Next() {
		var a string
		var p, d, b int64
		if err := rs.Scan(&a, &p, &d, &b); err != nil {
			return err
		}
		res[a], balances[a] = reservedOf(p, d), b
	}
	return rs.Err()
}

// reservedOf is a counter row's two sides: its net pending total and its
// debits.
func reservedOf(pending, debits int64) netting.Reserved {
	return netting.Reserved{Debits: debits, Credits: pending - debits}
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

func scanReserved(rs *sql.Rows, into map[string]netting.Reserved) error {
	defer rs.Close()
	for rs.Next() {
		var a string
		var p, d int64
		if err := rs.Scan(&a, &p, &d); err != nil {
			return err
		}
		into[a] = reservedOf(p, d)
	}
	return rs.Err()
}

// setPending writes absolute counter values, in account order.
func (s *Store) setPending(ctx context.Context, tx *sql.Tx, values map[string]netting.Reserved) error {
	if len(values) == 0 {
		return nil
	}
	accounts := make([]string, 0, len(values))
	for a := range values {
		accounts = append(accounts, a)
	}
	sort.Strings(accounts)
	nets := make([]int64, len(accounts))
	debits := make([]int64, len(accounts))
	for i, a := range accounts {
		nets[i], debits[i] = values[a].Net(), values[a].Debits
	}
	return s.d.setPending(ctx, s, tx, accounts, nets, debits)
}

// bySide is the change each delta makes, on the side its sign names.
func bySide(deltas []ledger.AccountDelta) []netting.ReservedChange {
	out := make([]netting.ReservedChange, len(deltas))
	for i, d := range deltas {
		out[i] = netting.ReservedChange{Account: d.Account, Reserved: netting.ReservedOf(d.Delta)}
	}
	return out
}

// subtractReserved takes changes off the counters (summed per account,
// applied in account order): the net off pending, the debits off debits.
func (s *Store) subtractReserved(ctx context.Context, tx *sql.Tx, changes []netting.ReservedChange) error {
	sum := map[string]netting.Reserved{}
	for _, c := range changes {
		sum[c.Account] = sum[c.Account].Minus(c.Reserved)
	}
	accounts := make([]string, 0, len(sum))
	for a, v := range sum {
		if !v.Zero() {
			accounts = append(accounts, a)
		}
	}
	sort.Strings(accounts)
	for start := 0; start < len(accounts); start += inChunk / 3 {
		chunk := accounts[start:min(start+inChunk/3, len(accounts))]
		args := make([]any, 0, 3*len(chunk))
		for _, a := range chunk {
			args = append(args, a, sum[a].Net(), sum[a].Debits)
		}
		if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO netting_reservations (account, pending, debits) VALUES `+
			repeatJoin("(?, ?, ?)", len(chunk))+` ON CONFLICT (account) DO UPDATE SET pending = netting_reservations.pending + excluded.pending,
				debits = netting_reservations.debits + excluded.debits`), args...); err != nil {
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
	return s.inTxWith(ctx, relaxed, func(tx *sql.Tx) error { return s.subtractReserved(ctx, tx, bySide(deltas)) })
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

// ReservedAll implements netting.ReservationStore.
func (s *Store) ReservedAll(ctx context.Context) (map[string]netting.Reserved, error) {
	rs, err := s.rdb.QueryContext(ctx, `SELECT account, pending, debits FROM netting_reservations WHERE pending <> 0 OR debits <> 0`)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: reserved all: %w", err)
	}
	out := map[string]netting.Reserved{}
	if err := scanReserved(rs, out); err != nil {
		return nil, fmt.Errorf("sqlstore: reserved all: %w", err)
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
		if err := s.subtractReserved(ctx, tx, bySide(deltas)); err != nil {
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
func (s *Store) ReplacePending(ctx context.Context, want map[string]netting.Reserved) (int, error) {
	var adjusted int
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		adjusted = 0
		// Lock every row there is: the rebuild must not interleave with a
		// straggling Reserve (the cluster is meant to be quiesced; this
		// makes a mistake merely slow, not wrong).
		rs, err := tx.QueryContext(ctx, s.d.q(`SELECT account, pending, debits FROM netting_reservations ORDER BY account{forUpdate}`))
		if err != nil {
			return fmt.Errorf("sqlstore: replace pending: %w", err)
		}
		current := map[string]netting.Reserved{}
		if err := scanReserved(rs, current); err != nil {
			return fmt.Errorf("sqlstore: replace pending: %w", err)
		}
		changed := map[string]netting.Reserved{}
		for a, v := range want {
			if current[a] != v {
				changed[a] = v
			}
		}
		for a, v := range current {
			if _, ok := want[a]; !ok && !v.Zero() {
				changed[a] = netting.Reserved{}
			}
		}
		adjusted = len(changed)
		if err := s.setPending(ctx, tx, changed); err != nil {
			return err
		}
		// Zero rows carry nothing; dropping them keeps the table the size of
		// the live reservations.
		if _, err := tx.ExecContext(ctx, `DELETE FROM netting_reservations WHERE pending = 0 AND debits = 0`); err != nil {
			return fmt.Errorf("sqlstore: replace pending: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return adjusted, nil
}
