package econ

import "github.com/shardwise/shardwise/netting"

// AuditJSON is an AuditReport under the keys of "shardwise econ audit
// --json" (docs/protocol.md), with every list present ([] when empty). U
// is how an unsettled session is written: the CLI keeps its older
// capitalised field names, which tools read; the demo's report writes
// them in snake_case like the rest of it.
type AuditJSON[U any] struct {
	OK              bool                    `json:"ok"`
	Problems        []string                `json:"problems"`
	Missing         []MissingMovement       `json:"missing"`
	Unbacked        []UnbackedPosting       `json:"unbacked"`
	Accounts        int                     `json:"accounts"`
	SumBalances     int64                   `json:"sum_balances"`
	SumEntries      *int64                  `json:"sum_entries,omitempty"`
	Clearing        int64                   `json:"clearing"`
	Wallets         int64                   `json:"wallets"`
	NegativeWallets []string                `json:"negative_wallets"`
	Pending         map[string]int64        `json:"pending"`
	Unsettled       []U                     `json:"unsettled"`
	Sessions        int                     `json:"sessions"`
	SettledSessions int                     `json:"settled_sessions"`
	SessionsListed  bool                    `json:"sessions_listed"`
	Postings        int64                   `json:"postings"`
	SessionPostings int64                   `json:"session_postings"`
	Balances        []AccountBalance        `json:"balances"`
	KeyIndexChecked bool                    `json:"key_index_checked"`
	KeyIndex        []netting.KeyIndexFault `json:"key_index"`
	KeyIndexFaults  int                     `json:"key_index_faults"`
}

// NewAuditJSON is r as AuditJSON, with problems (r.Problems of the
// caller's choice of settled) deciding OK, and each unsettled session
// written by unsettled.
func NewAuditJSON[U any](r AuditReport, problems []string, unsettled func(netting.UnsettledSession) U) AuditJSON[U] {
	j := AuditJSON[U]{
		OK: len(problems) == 0, Problems: nonNil(problems),
		Missing: nonNil(r.Missing), Unbacked: nonNil(r.Unbacked),
		Accounts: r.Accounts, SumBalances: r.SumBalances, Clearing: r.Clearing, Wallets: r.Wallets,
		NegativeWallets: nonNil(r.NegativeWallets), Pending: r.Pending, Unsettled: make([]U, 0, len(r.Unsettled)),
		Sessions: r.Sessions, SettledSessions: r.SettledSessions, SessionsListed: r.SessionsListed,
		Postings: r.Postings, SessionPostings: r.SessionPostings, Balances: nonNil(r.Balances),
		KeyIndexChecked: r.KeyIndexChecked, KeyIndex: nonNil(r.KeyIndex), KeyIndexFaults: r.KeyIndexFaults,
	}
	if j.Pending == nil {
		j.Pending = map[string]int64{}
	}
	if r.HasSumEntries {
		j.SumEntries = &r.SumEntries
	}
	for _, u := range r.Unsettled {
		j.Unsettled = append(j.Unsettled, unsettled(u))
	}
	return j
}

// nonNil is s, or an empty slice when s is nil, so that JSON writes [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
