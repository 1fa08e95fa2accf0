package econ

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// AuditStore is what Audit reads, all of it in netting's Store port:
// netting.SharedStore has it.
type AuditStore interface {
	Balances(ctx context.Context) (map[string]int64, error)
	PendingAll(ctx context.Context) (map[string]int64, error)
	ListUnsettled(ctx context.Context, limit int) ([]netting.UnsettledSession, error)
	// The ledger's chain, the journals and the sessions, to match every
	// accepted movement with the postings that settle it.
	ReadPostings(ctx context.Context, from int64, limit int) ([]netting.ChainedPosting, error)
	ReadJournal(ctx context.Context, sessionID string) ([]netting.JournalRecord, error)
	Session(ctx context.Context, id string) (netting.SessionMeta, error)
}

// SessionLister is the optional read that lets Audit see every session:
// ListSessions returns the sessions whose id sorts after after, at most
// limit (≥ 1), settled or not. Without it Audit finds sessions through
// ListUnsettled and the session ids the postings carry, and a settled
// session that has no posting at all (every movement lost) is invisible to
// it (AuditReport.SessionsListed is false). netting.MemStore and
// sqlstore.Store have it; it is not part of netting's Store port.
type SessionLister interface {
	ListSessions(ctx context.Context, after string, limit int) ([]netting.SessionMeta, error)
}

// KeyIndexVerifier is the optional check of a store that keeps its
// journal's key index apart from the hash-chained rows (sqlstore.Store,
// schema 9): VerifyKeyIndex returns nil when every journaled key's index
// entry points at its row and every entry at a row holding its key, a
// *netting.KeyIndexBrokenError naming what disagrees otherwise. The chain
// does not cover the index, and a key whose entry is lost would be
// journaled again on a resend; Audit reports each fault as a problem. It
// is not part of netting's Store port (netting.MemStore's index is its
// rows).
type KeyIndexVerifier interface {
	VerifyKeyIndex(ctx context.Context) error
}

// entrySummer is the optional cross-check a SQL store offers: the sum of
// every posting entry, computed independently of the balances table.
type entrySummer interface {
	SumEntries(ctx context.Context) (int64, error)
}

// auditPage is how many postings or sessions Audit reads at a time.
const auditPage = 1000

// MissingMovement is a breach: a journaled, accepted movement whose session
// has settled and that is not in the ledger.
type MissingMovement struct {
	SessionID string `json:"session"`
	Scope     string `json:"scope"`
	Seq       int64  `json:"seq"`
	Key       string `json:"key"`
	// Mode is the session's settle mode (netted or replayed).
	Mode string `json:"mode"`
	// Reason says what the ledger lacks: the replay posting of the row, or
	// a chunk of the netted session.
	Reason string `json:"reason"`
}

// UnbackedPosting is a breach: a settle posting with no accepted journal
// row behind it (a replay posting whose row does not exist, a chunk of a
// session with no journal, a chunk left in the ledger of a session that
// was replayed, so counted twice).
type UnbackedPosting struct {
	PostingID string `json:"posting"`
	// ChainSeq is the posting's position in the ledger's chain.
	ChainSeq  int64  `json:"chain_seq"`
	SessionID string `json:"session"`
	Reason    string `json:"reason"`
}

// AccountBalance is one account's settled balance and pending reservation.
type AccountBalance struct {
	Account string `json:"account"`
	Balance int64  `json:"balance"`
	Pending int64  `json:"pending"`
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

	// Balances is every account with a balance row or a pending
	// reservation, in account order.
	Balances []AccountBalance
	// Postings is how many postings of the ledger's chain were read;
	// SessionPostings how many of them are settle postings (net_… and mv_…
	// ids), the others being the operator's own (funding, corrections).
	Postings, SessionPostings int64
	// Sessions is how many sessions were checked, SettledSessions how many
	// of them had settled; SessionsListed whether the store listed every
	// session (SessionLister) or the audit could only find those with a
	// journal row unsettled or a posting.
	Sessions, SettledSessions int
	SessionsListed            bool
	// Missing lists the accepted movements of settled sessions that are
	// not in the ledger, Unbacked the settle postings with no accepted row
	// behind them: each is a breach of "accepted means in the ledger exactly
	// once", whatever the sums say.
	Missing  []MissingMovement
	Unbacked []UnbackedPosting

	// KeyIndexChecked says the store checked its journal's key index
	// against the journal (KeyIndexVerifier); KeyIndex lists the first
	// faults it found, KeyIndexFaults how many in all. Each is a problem:
	// a journaled key the index has lost can be journaled twice.
	KeyIndexChecked bool
	KeyIndex        []netting.KeyIndexFault
	KeyIndexFaults  int
}

// Audit reads the money audit from a store. It writes nothing and can run
// at any time; Problems says what is wrong, OK whether anything is.
//
// Besides the sums it matches the journal with the ledger. A settled
// session's accepted movements are in the ledger when:
//   - it settled netted: every chunk net_<session>_c<i> is posted, none is
//     compensated, and together they move each account by exactly what
//     the session's journal nets to;
//   - it settled replayed: each row has its posting mv_<session>_<seq> with
//     the row's legs, and every chunk posted before the fall-back has its
//     compensation.
//
// A row that fails this is Missing. A settle posting with no accepted row
// behind it is Unbacked: an mv_ posting whose row does not exist or has
// other legs, a chunk of a session with no journal or of a session settled
// replayed and left uncompensated, a replay posting of a session settled
// netted. Sessions not settled yet are not judged (their settle may be
// under way).
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
	for a := range r.Pending {
		if _, ok := balances[a]; !ok {
			balances[a] = 0
		}
	}
	for _, a := range slices.Sorted(maps.Keys(balances)) {
		r.Balances = append(r.Balances, AccountBalance{Account: a, Balance: balances[a], Pending: r.Pending[a]})
	}
	if err := matchJournalAndLedger(ctx, s, &r); err != nil {
		return r, err
	}
	if kv, ok := s.(KeyIndexVerifier); ok {
		r.KeyIndexChecked = true
		var brk *netting.KeyIndexBrokenError
		switch err := kv.VerifyKeyIndex(ctx); {
		case errors.As(err, &brk):
			r.KeyIndex, r.KeyIndexFaults = brk.Faults, brk.Total
		case err != nil:
			return r, fmt.Errorf("econ: audit key index: %w", err)
		}
	}
	return r, nil
}

// OK reports whether the audit found nothing wrong (Problems is empty).
func (r AuditReport) OK(settled bool) bool { return len(r.Problems(settled)) == 0 }

// Breaches is how many movements are missing from the ledger or postings
// unbacked by the journal.
func (r AuditReport) Breaches() int { return len(r.Missing) + len(r.Unbacked) }

// Balance returns account's balance and pending (zero for an account the
// store has never seen).
func (r AuditReport) Balance(account string) AccountBalance {
	i, ok := slices.BinarySearchFunc(r.Balances, account, func(b AccountBalance, a string) int { return cmp.Compare(b.Account, a) })
	if !ok {
		return AccountBalance{Account: account}
	}
	return r.Balances[i]
}

// Problems lists what is wrong with the money. Always: a movement missing
// from the ledger or a posting unbacked by the journal (a breach), a fault
// of the journal's key index, a
// nonzero sum of balances or of entries, a wallet below zero. When settled is true (the
// cluster is quiesced and every session should be settled): a nonzero
// clearing account, reservations left pending, sessions left unsettled.
func (r AuditReport) Problems(settled bool) []string {
	var p []string
	for _, m := range r.Missing {
		p = append(p, fmt.Sprintf("accepted movement %s (session %s seq %d, settled %s) is not in the ledger: %s", m.Key, m.SessionID, m.Seq, m.Mode, m.Reason))
	}
	for _, u := range r.Unbacked {
		p = append(p, fmt.Sprintf("posting %s (chain seq %d) has no accepted movement behind it: %s", u.PostingID, u.ChainSeq, u.Reason))
	}
	for _, f := range r.KeyIndex {
		p = append(p, fmt.Sprintf("journal key index (%s): %s", netting.CodeKeyIndexBroken, f))
	}
	if more := r.KeyIndexFaults - len(r.KeyIndex); more > 0 {
		p = append(p, fmt.Sprintf("journal key index (%s): %d more faults not listed", netting.CodeKeyIndexBroken, more))
	}
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

// settlePostingID is a settle posting's id taken apart: the ids settles
// write (netting's chunkID, compensationID and replayID) are
// "net_<session>_c<i>", "net_<session>_c<i>_comp" and
// "mv_<session>_<seq>".
type settlePostingID struct {
	session string
	replay  bool  // mv_
	comp    bool  // a chunk's compensation
	n       int64 // the chunk index, or the row's seq
}

// parseSettlePostingID takes id apart; ok is false for an id no settle
// writes (an operator's posting).
func parseSettlePostingID(id string) (p settlePostingID, ok bool) {
	var rest, sep string
	switch {
	case strings.HasPrefix(id, "mv_"):
		rest, sep, p.replay = id[len("mv_"):], "_", true
	case strings.HasPrefix(id, "net_"):
		rest, sep = id[len("net_"):], "_c"
		rest, p.comp = strings.CutSuffix(rest, "_comp")
	default:
		return p, false
	}
	i := strings.LastIndex(rest, sep)
	if i <= 0 {
		return p, false
	}
	n, err := strconv.ParseInt(rest[i+len(sep):], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != rest[i+len(sep):] {
		return p, false
	}
	p.session, p.n = rest[:i], n
	return p, true
}

// auditSession is one session as the match sees it.
type auditSession struct {
	meta  netting.SessionMeta
	found bool // the store has the session
	recs  []netting.JournalRecord
	bySeq map[int64]netting.JournalRecord
	// chunks and comps are the posted chunks and compensations by index,
	// replays the replay postings by seq.
	chunks, comps map[int64]netting.ChainedPosting
	replays       map[int64]netting.ChainedPosting
}

func newAuditSession() *auditSession {
	return &auditSession{chunks: map[int64]netting.ChainedPosting{}, comps: map[int64]netting.ChainedPosting{}, replays: map[int64]netting.ChainedPosting{}}
}

// matchJournalAndLedger fills r's Missing, Unbacked and counts (see Audit).
func matchJournalAndLedger(ctx context.Context, s AuditStore, r *AuditReport) error {
	sessions := map[string]*auditSession{}
	get := func(id string) *auditSession {
		a := sessions[id]
		if a == nil {
			a = newAuditSession()
			sessions[id] = a
		}
		return a
	}
	for from := int64(0); ; {
		page, err := s.ReadPostings(ctx, from, auditPage)
		if err != nil {
			return fmt.Errorf("econ: audit postings: %w", err)
		}
		for _, cp := range page {
			r.Postings++
			id, ok := parseSettlePostingID(cp.Posting.ID)
			if !ok {
				continue
			}
			r.SessionPostings++
			a := get(id.session)
			switch {
			case id.replay:
				a.replays[id.n] = cp
			case id.comp:
				a.comps[id.n] = cp
			default:
				a.chunks[id.n] = cp
			}
		}
		if len(page) < auditPage {
			break
		}
		from = page[len(page)-1].Seq + 1
	}
	if sl, ok := s.(SessionLister); ok {
		r.SessionsListed = true
		for after := ""; ; {
			page, err := sl.ListSessions(ctx, after, auditPage)
			if err != nil {
				return fmt.Errorf("econ: audit sessions: %w", err)
			}
			for _, m := range page {
				a := get(m.ID)
				a.meta, a.found = m, true
			}
			if len(page) < auditPage {
				break
			}
			after = page[len(page)-1].ID
		}
	}
	for _, u := range r.Unsettled {
		get(u.ID)
	}
	for _, id := range slices.Sorted(maps.Keys(sessions)) {
		a := sessions[id]
		if !a.found {
			m, err := s.Session(ctx, id)
			switch {
			case errors.Is(err, netting.ErrSessionNotFound):
			case err != nil:
				return fmt.Errorf("econ: audit session %s: %w", id, err)
			default:
				a.meta, a.found = m, true
			}
		}
		recs, err := s.ReadJournal(ctx, id)
		if err != nil {
			return fmt.Errorf("econ: audit journal %s: %w", id, err)
		}
		a.recs, a.bySeq = recs, make(map[int64]netting.JournalRecord, len(recs))
		for _, rec := range recs {
			a.bySeq[rec.Seq] = rec
		}
		r.Sessions++
		if a.meta.Settled {
			r.SettledSessions++
		}
		r.Missing = append(r.Missing, a.missing(id)...)
		r.Unbacked = append(r.Unbacked, a.unbacked(id)...)
	}
	slices.SortFunc(r.Unbacked, func(x, y UnbackedPosting) int { return cmp.Compare(x.ChainSeq, y.ChainSeq) })
	return nil
}

// missing lists the session's rows that are not in the ledger, once it has
// settled.
func (a *auditSession) missing(id string) []MissingMovement {
	if !a.meta.Settled || len(a.recs) == 0 {
		return nil
	}
	row := func(rec netting.JournalRecord, reason string) MissingMovement {
		return MissingMovement{SessionID: id, Scope: a.meta.Scope, Seq: rec.Seq, Key: rec.Key, Mode: a.meta.SettleMode, Reason: reason}
	}
	var out []MissingMovement
	if a.meta.SettleMode == netting.ModeReplayed {
		for _, rec := range a.recs {
			p, ok := a.replays[rec.Seq]
			switch {
			case !ok:
				out = append(out, row(rec, "no posting "+replayPostingID(id, rec.Seq)))
			case !sameNet(p.Posting.Legs, rec.Legs):
				out = append(out, row(rec, "posting "+p.Posting.ID+" does not move what the row moves"))
			}
		}
		return out
	}
	// Netted: the chunks carry the rows together, so a fault in them
	// leaves every row of the session out of the ledger.
	if reason := a.nettedFault(id); reason != "" {
		for _, rec := range a.recs {
			out = append(out, row(rec, reason))
		}
	}
	return out
}

// nettedFault says why a session settled netted is not in the ledger, or
// "" when its chunks carry its journal exactly.
func (a *auditSession) nettedFault(id string) string {
	var want []ledger.Leg
	for _, rec := range a.recs {
		want = append(want, rec.Legs...)
	}
	// Every chunk says how many the session has ("chunk": "2/3").
	n := int64(len(a.chunks))
	for _, c := range a.chunks {
		if _, total, ok := strings.Cut(c.Posting.Meta["chunk"], "/"); ok {
			if t, err := strconv.ParseInt(total, 10, 64); err == nil && t > n {
				n = t
			}
		}
	}
	var got []ledger.Leg
	for i := int64(0); i < n; i++ {
		c, ok := a.chunks[i]
		if !ok {
			return fmt.Sprintf("chunk %d of %d (net_%s_c%d) is not posted", i+1, n, id, i)
		}
		if _, ok := a.comps[i]; ok {
			return fmt.Sprintf("chunk %s is compensated, and the session is not replayed", c.Posting.ID)
		}
		for _, l := range c.Posting.Legs {
			if l.Account != ledger.NettingClearing {
				got = append(got, l)
			}
		}
	}
	if !sameNet(got, want) {
		return fmt.Sprintf("its %d chunks do not move what its %d rows net to", len(a.chunks), len(a.recs))
	}
	return ""
}

// unbacked lists the session's settle postings with no accepted row behind
// them.
func (a *auditSession) unbacked(id string) []UnbackedPosting {
	var out []UnbackedPosting
	add := func(p netting.ChainedPosting, reason string) {
		out = append(out, UnbackedPosting{PostingID: p.Posting.ID, ChainSeq: p.Seq, SessionID: id, Reason: reason})
	}
	for seq, p := range a.replays {
		rec, ok := a.bySeq[seq]
		switch {
		case !ok:
			add(p, fmt.Sprintf("session %s has no journal row %d", id, seq))
		case !sameNet(p.Posting.Legs, rec.Legs):
			add(p, fmt.Sprintf("it does not move what row %d (key %s) moves", seq, rec.Key))
		case a.meta.Settled && a.meta.SettleMode == netting.ModeNetted:
			add(p, fmt.Sprintf("the session settled netted, so its chunks already carry row %d (key %s): counted twice", seq, rec.Key))
		}
	}
	for i, p := range a.chunks {
		_, comped := a.comps[i]
		switch {
		case len(a.recs) == 0:
			add(p, "a chunk of a session with no journal")
		case a.meta.Settled && a.meta.SettleMode == netting.ModeReplayed && !comped:
			add(p, "a chunk of a session settled replayed, never compensated: its rows are counted twice")
		}
	}
	for i, p := range a.comps {
		if _, ok := a.chunks[i]; !ok {
			add(p, fmt.Sprintf("it compensates chunk %d, which is not posted", i))
		}
	}
	return out
}

func replayPostingID(session string, seq int64) string {
	return "mv_" + session + "_" + strconv.FormatInt(seq, 10)
}

// sameNet reports whether two lists of legs move every account by the same
// amount.
func sameNet(x, y []ledger.Leg) bool {
	net := map[string]int64{}
	for _, l := range x {
		net[l.Account] += l.Amount
	}
	for _, l := range y {
		net[l.Account] -= l.Amount
	}
	for _, v := range net {
		if v != 0 {
			return false
		}
	}
	return true
}
