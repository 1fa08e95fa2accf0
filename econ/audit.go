package econ

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// AuditStore is what Audit reads: netting.SharedStore has all of it.
type AuditStore interface {
	Balances(ctx context.Context) (map[string]int64, error)
	PendingAll(ctx context.Context) (map[string]int64, error)
	ListUnsettled(ctx context.Context, limit int) ([]netting.UnsettledSession, error)
}

// entrySummer is the optional cross-check a SQL store offers: the sum of
// every posting entry, computed independently of the balances table.
type entrySummer interface {
	SumEntries(ctx context.Context) (int64, error)
}

// AuditReport is the state of the money in a store.
type AuditReport struct {
	// Accounts is the number of accounts with a balance row.
	Accounts int
	// SumBalances is the sum of every balance: 0 in a sound ledger.
	SumBalances int64
	// SumEntries is the sum of every posting's entries (when the store can
	// compute it independently; HasSumEntries says so): 0 in a sound ledger.
	SumEntries    int64
	HasSumEntries bool
	// Clearing is the netting clearing account's balance: 0 after every
	// complete settle.
	Clearing int64
	// Wallets is the sum of the wallet balances (ledger.IsWallet).
	Wallets int64
	// NegativeWallets names wallets below zero (sorted): never in a sound
	// ledger.
	NegativeWallets []string
	// Pending is every nonzero reservation counter: what accepted but
	// unsettled movements promise. Empty once every session is settled.
	Pending map[string]int64
	// Unsettled lists the sessions not settled yet (open epochs, orphans
	// awaiting the sweep).
	Unsettled []netting.UnsettledSession
}

// Audit reads the money audit from a store. It writes nothing and can run
// at any time; Problems says what is wrong.
func Audit(ctx context.Context, s AuditStore) (AuditReport, error) {
	var r AuditReport
	balances, err := s.Balances(ctx)
	if err != nil {
		return r, fmt.Errorf("econ: audit balances: %w", err)
	}
	r.Accounts = len(balances)
	for a, b := range balances {
		r.SumBalances += b
		if a == ledger.NettingClearing {
			r.Clearing = b
		}
		if ledger.IsWallet(a) {
			r.Wallets += b
			if b < 0 {
				r.NegativeWallets = append(r.NegativeWallets, a)
			}
		}
	}
	sort.Strings(r.NegativeWallets)
	if es, ok := s.(entrySummer); ok {
		if r.SumEntries, err = es.SumEntries(ctx); err != nil {
			return r, fmt.Errorf("econ: audit entries: %w", err)
		}
		r.HasSumEntries = true
	}
	if r.Pending, err = s.PendingAll(ctx); err != nil {
		return r, fmt.Errorf("econ: audit pending: %w", err)
	}
	if r.Unsettled, err = s.ListUnsettled(ctx, 0); err != nil {
		return r, fmt.Errorf("econ: audit sessions: %w", err)
	}
	return r, nil
}

// Problems lists what is wrong with the money. Always: a nonzero sum of
// balances or of entries, a wallet below zero. When settled is true (the
// cluster is quiesced and every session should be settled): a nonzero
// clearing account, reservations left pending, sessions left unsettled.
func (r AuditReport) Problems(settled bool) []string {
	var p []string
	if r.SumBalances != 0 {
		p = append(p, fmt.Sprintf("sum of balances is %d, not 0", r.SumBalances))
	}
	if r.HasSumEntries && r.SumEntries != 0 {
		p = append(p, fmt.Sprintf("sum of entries is %d, not 0", r.SumEntries))
	}
	if len(r.NegativeWallets) > 0 {
		p = append(p, fmt.Sprintf("wallets below zero: %v", r.NegativeWallets))
	}
	if !settled {
		return p
	}
	if r.Clearing != 0 {
		p = append(p, fmt.Sprintf("%s is %d, not 0", ledger.NettingClearing, r.Clearing))
	}
	if len(r.Pending) > 0 {
		keys := slices.Sorted(maps.Keys(r.Pending))
		p = append(p, fmt.Sprintf("reservations left pending on %d accounts (first %s: %d)", len(keys), keys[0], r.Pending[keys[0]]))
	}
	if len(r.Unsettled) > 0 {
		p = append(p, fmt.Sprintf("%d sessions left unsettled (first %s of %s)", len(r.Unsettled), r.Unsettled[0].ID, r.Unsettled[0].NodeID))
	}
	return p
}
