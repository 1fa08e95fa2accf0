package econ

// Escrows: trades the economy decides when their decider does not (issue
// 30).
//
// A trade (the reference game's; any caller may follow the same
// convention) is at most five movements, each with its own key, under
// trade:<id>:
//
//	trade:<id>:offer:a, :offer:b  a side's wallets into the escrow,
//	                              legs in pairs: Debit(wallet, n),
//	                              Credit(EscrowAccount(id, asset), n)
//	trade:<id>:end                the decision, commit or cancel alike:
//	                              escrow → EscrowOwedAccount(id, side, wallet)
//	trade:<id>:claim:a, :claim:b  owed → the wallet the owed account names
//
// Its decider (a zone node) sends them. If the decider dies, nothing else
// would: its escrow would stay held for ever. So the economy decides
// every escrow within a bound, whether its decider comes back or not:
//
//  1. An escrow whose end key has no answer EscrowBound after its first
//     offer was journaled (the store's clock) is cancelled by the sweep of
//     the node owning the scope of one of its offers. First, every offer
//     key with no answer yet is refused for ever (a remembered refusal,
//     reason ESCROW.EXPIRED): from then on the set of offers is final, and
//     a late offer is refused, never journaled into an escrow already
//     returned. Then the end is recorded as a cancel of exactly the offers
//     journaled, in the node's own scope (the end touches platform
//     accounts only, so any scope may hold it; its one key keeps it once).
//  2. An escrow whose end is journaled and whose claims are not,
//     EscrowBound after the end (at once when the sweep recorded the end
//     itself), has its missing claims recorded by the same sweep, from the
//     end's own legs: each owed account names the wallet it pays.
//  3. Whoever records the end first decides, through the store's one
//     first answer per key. A later end with other legs — a decider
//     resumed from an older checkpoint committing what the economy
//     cancelled, or cancelling what it committed before it died — is
//     answered REJECTED with reason ESCROW.DECIDED (Node.Record and the
//     sweep compare the legs with the journaled end's), so the decider
//     learns the decision and claims what it says. The same legs answer
//     ACCEPTED, as any resend does.
//
// Which escrows a node looks at: those whose offer it recorded itself
// under its current view (Node.Record keeps them, in memory), and, once
// per view (the first sweep after the view formed, when scopes may have
// come from a dead or departed node), every escrow found by a scan: the
// offers in the unsettled journals of the scopes it owns, and the escrow
// accounts with a settled balance (read back to their offers' scope). An
// escrow leaves the set once it is decided and claimed, or lies in no
// scope of the node. The scan's cost grows with the unsettled journals
// and the accounts ever posted to, once per view change (docs/
// decisions.md, "The economy decides a dead decider's trades").

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// Reasons of an escrow's refusals (netting.Outcome.Reason).
const (
	// ReasonEscrowDecided: an escrow's end whose key was already decided
	// with other legs (the other outcome). Final; read the decision from
	// the journal, or claim what the other outcome owes.
	ReasonEscrowDecided = "ESCROW.DECIDED"
	// ReasonEscrowExpired: an escrow's offer refused because the economy
	// closed the escrow (its deadline passed with no end).
	ReasonEscrowExpired = "ESCROW.EXPIRED"
)

// Steps of an escrow, the last part of their keys.
const (
	EscrowOfferA = "offer:a"
	EscrowOfferB = "offer:b"
	EscrowEnd    = "end"
	EscrowClaimA = "claim:a"
	EscrowClaimB = "claim:b"
)

const (
	escrowKeyPrefix     = "trade:"
	escrowAccountPrefix = "platform:trade:"
)

// EscrowScope is the scope the decider records an escrow's end in.
func EscrowScope(id uint64) string { return escrowKeyPrefix + strconv.FormatUint(id, 10) }

// EscrowKey is the key of an escrow's step (EscrowOfferA …).
func EscrowKey(id uint64, step string) string { return EscrowScope(id) + ":" + step }

// EscrowAccount is where an escrow holds the offers' asset (a name of the
// caller's: "coins", "good:2").
func EscrowAccount(id uint64, asset string) string {
	return escrowAccountPrefix + strconv.FormatUint(id, 10) + ":escrow:" + asset
}

// EscrowOwedAccount is what an escrow owes side ('a' or 'b') once ended,
// to be paid into wallet: the claim moves it there.
func EscrowOwedAccount(id uint64, side byte, wallet string) string {
	return escrowAccountPrefix + strconv.FormatUint(id, 10) + ":to:" + string(side) + ":" + wallet
}

// parseEscrowKey splits a key of the convention into its id and step.
func parseEscrowKey(key string) (id uint64, step string, ok bool) {
	rest, ok := strings.CutPrefix(key, escrowKeyPrefix)
	if !ok {
		return 0, "", false
	}
	num, step, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, "", false
	}
	id, err := strconv.ParseUint(num, 10, 64)
	return id, step, err == nil
}

// parseEscrowAccount returns the escrow id of an account of the convention.
func parseEscrowAccount(acct string) (uint64, bool) {
	rest, ok := strings.CutPrefix(acct, escrowAccountPrefix)
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, ":")
	id, err := strconv.ParseUint(num, 10, 64)
	return id, err == nil
}

// parseOwedAccount splits an owed account into its escrow, side and wallet.
func parseOwedAccount(acct string) (id uint64, side byte, wallet string, ok bool) {
	id, ok = parseEscrowAccount(acct)
	if !ok {
		return 0, 0, "", false
	}
	prefix := escrowAccountPrefix + strconv.FormatUint(id, 10) + ":to:"
	rest, ok := strings.CutPrefix(acct, prefix)
	if !ok || len(rest) < 3 || (rest[0] != 'a' && rest[0] != 'b') || rest[1] != ':' {
		return 0, 0, "", false
	}
	return id, rest[0], rest[2:], true
}

// isEscrowEnd reports whether key is an escrow's end.
func isEscrowEnd(key string) bool {
	_, step, ok := parseEscrowKey(key)
	return ok && step == EscrowEnd
}

// sameMovement reports whether two legs lists move the same amounts: the
// same net change on every account, whatever the order or the split.
func sameMovement(a, b []ledger.Leg) bool {
	net := map[string]int64{}
	for _, l := range a {
		net[l.Account] += l.Amount
	}
	for _, l := range b {
		net[l.Account] -= l.Amount
	}
	for _, v := range net {
		if v != 0 {
			return false
		}
	}
	return true
}

// escrowRecorder is what the sweep records through: a ClusterNode.
type escrowRecorder interface {
	Owns(scope string) bool
	Record(ctx context.Context, scope string, m netting.Movement) (netting.Outcome, error)
}

var _ escrowRecorder = (*netting.ClusterNode)(nil)

// recordEscrow is rec.Record(scope, m), answering an escrow's end whose key
// the journal holds with other legs REJECTED (ReasonEscrowDecided).
func recordEscrow(ctx context.Context, st netting.Store, rec escrowRecorder, scope string, m netting.Movement) (netting.Outcome, error) {
	out, err := rec.Record(ctx, scope, m)
	if err != nil || out.Status != netting.Accepted || !isEscrowEnd(m.Key) {
		return out, err
	}
	r, ok, err := st.LookupKey(ctx, m.Key)
	if err != nil {
		// Accepted, but by which legs is not known: the caller retries
		// with the same key, and the next answer says.
		return netting.Outcome{}, fmt.Errorf("econ: read back escrow end %s: %w", m.Key, err)
	}
	if ok && !sameMovement(r.Legs, m.Legs) {
		return netting.Outcome{Status: netting.Rejected, Seq: -1, Reason: ReasonEscrowDecided}, nil
	}
	return out, nil
}

// EscrowSweepOptions parameterise one SweepEscrows call.
type EscrowSweepOptions struct {
	// Now is the instant deadlines are measured at, a reading of the
	// store's clock. Zero (the normal case): the store's Now.
	Now time.Time
}

// EscrowSweepSummary reports one escrow sweep.
type EscrowSweepSummary struct {
	// Scanned: this sweep scanned the store for escrows (the first of a
	// view), besides those the node recorded an offer of.
	Scanned bool
	// Looked counts the escrows of this node's scopes examined; Waiting
	// those not past their deadline yet.
	Looked, Waiting int
	// Expired lists the escrows this sweep cancelled (their end recorded
	// by it); Overruled those whose end another writer recorded between
	// this sweep's look and its write.
	Expired, Overruled []uint64
	// Claimed counts the claims this sweep recorded.
	Claimed int
	// Failed lists the escrows whose handling failed (retried next sweep),
	// with the error's code.
	Failed []FailedEscrow
}

// FailedEscrow is an escrow the sweep could not handle.
type FailedEscrow struct {
	ID   uint64
	Code string
	Err  error
}

// CodeEscrowMalformed is the code of an escrow's offer whose legs are not
// the convention's (pairs of a wallet debit and an escrow credit): the
// sweep cannot return it, and leaves it to an operator.
const CodeEscrowMalformed = "ESCROW.MALFORMED"

// ErrEscrowMalformed: see CodeEscrowMalformed.
var ErrEscrowMalformed = errcode.New(CodeEscrowMalformed, "econ: escrow offer not of the convention")

// escrowSweep is one sweep's work on one node's share of the escrows.
type escrowSweep struct {
	st     netting.SharedStore
	rec    escrowRecorder
	self   string
	now    time.Time
	bound  time.Duration
	scopes map[string]string // session id → scope
	sum    EscrowSweepSummary
}

// escrowWatch is the set of escrows a node looks at (see the comment at
// the top), safe for concurrent use: Record adds, the sweeper takes and
// puts back.
type escrowWatch struct {
	mu      sync.Mutex
	ids     map[uint64]bool
	scanned any // the view (generation) whose scan is done
}

// add notes escrow id (Record accepted one of its offers).
func (w *escrowWatch) add(id uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ids == nil {
		w.ids = map[uint64]bool{}
	}
	w.ids[id] = true
}

// take returns the escrows watched, sorted, and whether view still needs
// its scan.
func (w *escrowWatch) take(view any) (ids []uint64, scan bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.ids {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, w.scanned != view
}

// finish records a sweep of view: the escrows it found open stay (with
// any added meanwhile), those it finished go.
func (w *escrowWatch) finish(view any, scanned bool, open, finished []uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ids == nil {
		w.ids = map[uint64]bool{}
	}
	if scanned {
		w.scanned = view
	}
	for _, id := range finished {
		delete(w.ids, id)
	}
	for _, id := range open {
		w.ids[id] = true
	}
}

// recorded notes an escrow whose offer Record accepted.
func (w *escrowWatch) recorded(m netting.Movement, out netting.Outcome, err error) {
	if err != nil || out.Status != netting.Accepted {
		return
	}
	if id, step, ok := parseEscrowKey(m.Key); ok && strings.HasPrefix(step, "offer:") {
		w.add(id)
	}
}

// sweepEscrows decides the escrows of rec's scopes whose decider let
// their deadline pass (see the comment at the top): those of ids, and,
// with scan, every one the store shows. It returns those still open and
// those finished (decided and claimed, or in no scope of rec's).
func sweepEscrows(ctx context.Context, st netting.SharedStore, rec escrowRecorder, self string, bound time.Duration, now time.Time, ids []uint64, scan bool) (sum EscrowSweepSummary, open, finished []uint64, err error) {
	if now.IsZero() {
		if now, err = st.Now(ctx); err != nil {
			return sum, nil, nil, fmt.Errorf("econ: escrow sweep clock: %w", err)
		}
	}
	s := &escrowSweep{st: st, rec: rec, self: self, now: now, bound: bound, scopes: map[string]string{}}
	if scan {
		found, err := s.scan(ctx)
		if err != nil {
			return s.sum, nil, nil, err
		}
		ids = append(slices.Clone(ids), found...)
		slices.Sort(ids)
		ids = slices.Compact(ids)
		s.sum.Scanned = true
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return s.sum, nil, nil, err
		}
		done, err := s.one(ctx, id)
		switch {
		case err != nil:
			s.sum.Failed = append(s.sum.Failed, FailedEscrow{ID: id, Code: errcode.Of(err), Err: err})
			open = append(open, id)
		case done:
			finished = append(finished, id)
		default:
			open = append(open, id)
		}
	}
	return s.sum, open, finished, nil
}

// scan lists the escrows the store shows that may need the sweep: offers
// in the unsettled journals of this node's scopes, and escrow accounts
// with a settled balance.
func (s *escrowSweep) scan(ctx context.Context) ([]uint64, error) {
	seen := map[uint64]bool{}
	list, err := s.st.ListUnsettled(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("econ: escrow sweep: list sessions: %w", err)
	}
	for _, u := range list {
		s.scopes[u.ID] = u.Scope
		if !s.rec.Owns(u.Scope) {
			continue
		}
		recs, err := s.st.ReadJournal(ctx, u.ID)
		if err != nil {
			return nil, fmt.Errorf("econ: escrow sweep: read %s: %w", u.ID, err)
		}
		for _, r := range recs {
			if id, step, ok := parseEscrowKey(r.Key); ok && strings.HasPrefix(step, "offer:") {
				seen[id] = true
			}
		}
	}
	bals, err := s.st.Balances(ctx)
	if err != nil {
		return nil, fmt.Errorf("econ: escrow sweep: balances: %w", err)
	}
	for acct, b := range bals {
		if id, ok := parseEscrowAccount(acct); ok && b != 0 {
			seen[id] = true
		}
	}
	ids := make([]uint64, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	return ids, nil
}

// scopeOf is the scope of a journaled row's session.
func (s *escrowSweep) scopeOf(ctx context.Context, sessionID string) (string, error) {
	if sc, ok := s.scopes[sessionID]; ok {
		return sc, nil
	}
	meta, err := s.st.Session(ctx, sessionID)
	if err != nil {
		return "", err
	}
	s.scopes[sessionID] = meta.Scope
	return meta.Scope, nil
}

// offers reads the answers of an escrow's two offer keys.
func (s *escrowSweep) offers(ctx context.Context, id uint64) ([2]netting.KeyAnswer, error) {
	var out [2]netting.KeyAnswer
	for i, step := range []string{EscrowOfferA, EscrowOfferB} {
		a, err := s.st.LookupAnswer(ctx, EscrowKey(id, step))
		if err != nil {
			return out, err
		}
		out[i] = a
	}
	return out, nil
}

func accepted(a netting.KeyAnswer) bool { return a.Found && !a.Refused }

// one handles escrow id if one of its offers lies in a scope of this node,
// and reports whether the node is done with it.
func (s *escrowSweep) one(ctx context.Context, id uint64) (done bool, err error) {
	offers, err := s.offers(ctx, id)
	if err != nil {
		return false, err
	}
	scope := ""
	var first time.Time
	for _, o := range offers {
		if !accepted(o) {
			continue
		}
		sc, err := s.scopeOf(ctx, o.Record.SessionID)
		if err != nil {
			return false, err
		}
		if scope == "" && s.rec.Owns(sc) {
			scope = sc
		}
		if first.IsZero() || o.Record.RecordedAt.Before(first) {
			first = o.Record.RecordedAt
		}
	}
	if scope == "" {
		return true, nil // no offer journaled, or none in this node's scopes
	}
	s.sum.Looked++
	end, err := s.st.LookupAnswer(ctx, EscrowKey(id, EscrowEnd))
	if err != nil {
		return false, err
	}
	ownEnd := false
	if !end.Found {
		if s.now.Before(first.Add(s.bound)) {
			s.sum.Waiting++
			return false, nil
		}
		if ownEnd, err = s.cancel(ctx, id, scope); err != nil {
			return false, err
		}
		if end, err = s.st.LookupAnswer(ctx, EscrowKey(id, EscrowEnd)); err != nil {
			return false, err
		}
	}
	if !accepted(end) {
		return false, nil // not decided yet after all: the next sweep looks again
	}
	claims, err := s.missingClaims(ctx, id, end.Record.Legs)
	if err != nil || len(claims) == 0 {
		return err == nil, err
	}
	if !ownEnd && s.now.Before(end.Record.RecordedAt.Add(s.bound)) {
		s.sum.Waiting++ // its decider has the bound to claim itself
		return false, nil
	}
	var errs []error
	for _, m := range claims {
		out, err := s.rec.Record(ctx, scope, m)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("econ: claim %s: %w", m.Key, err))
		case out.Status != netting.Accepted:
			errs = append(errs, fmt.Errorf("econ: claim %s refused: %s", m.Key, out.Reason))
		default:
			s.sum.Claimed++
		}
	}
	return len(errs) == 0, errors.Join(errs...)
}

// cancel closes an escrow: every offer key without an answer is refused
// for ever, then the end is recorded as the cancel of the offers
// journaled. It reports whether this sweep's end is the one journaled.
func (s *escrowSweep) cancel(ctx context.Context, id uint64, scope string) (bool, error) {
	var refuse []netting.RefusedKey
	offers, err := s.offers(ctx, id)
	if err != nil {
		return false, err
	}
	for i, o := range offers {
		if !o.Found {
			step := []string{EscrowOfferA, EscrowOfferB}[i]
			refuse = append(refuse, netting.RefusedKey{Key: EscrowKey(id, step), SessionID: "escrow-sweep@" + s.self, Reason: ReasonEscrowExpired})
		}
	}
	if len(refuse) > 0 {
		if err := s.st.AppendRecording(ctx, nil, refuse); err != nil {
			return false, fmt.Errorf("econ: close escrow %d: %w", id, err)
		}
		// Read again: an offer journaled before the refusals landed is the
		// key's first answer, and is returned with the rest.
		if offers, err = s.offers(ctx, id); err != nil {
			return false, err
		}
	}
	var legs []ledger.Leg
	for i, o := range offers {
		if !accepted(o) {
			continue
		}
		l, err := cancelLegs(id, "ab"[i], o.Record.Legs)
		if err != nil {
			return false, err
		}
		legs = append(legs, l...)
	}
	if len(legs) == 0 {
		return false, nil // nothing was ever held
	}
	out, err := recordEscrow(ctx, s.st, s.rec, scope, netting.Movement{Key: EscrowKey(id, EscrowEnd), Legs: legs})
	switch {
	case err != nil:
		return false, fmt.Errorf("econ: cancel escrow %d: %w", id, err)
	case out.Status == netting.Accepted:
		s.sum.Expired = append(s.sum.Expired, id)
		return true, nil
	case out.Reason == ReasonEscrowDecided:
		s.sum.Overruled = append(s.sum.Overruled, id)
		return false, nil
	}
	return false, fmt.Errorf("econ: cancel escrow %d refused: %s", id, out.Reason)
}

// cancelLegs returns an offer's escrow to what side is owed: each pair of
// the offer's legs (Debit(wallet, n), Credit(escrow, n)) becomes
// Debit(escrow, n), Credit(owed(side, wallet), n).
func cancelLegs(id uint64, side byte, offer []ledger.Leg) ([]ledger.Leg, error) {
	if len(offer)%2 != 0 {
		return nil, ErrEscrowMalformed.Wrap("escrow %d offer %c has %d legs", id, side, len(offer))
	}
	out := make([]ledger.Leg, 0, len(offer))
	for i := 0; i < len(offer); i += 2 {
		w, e := offer[i], offer[i+1]
		eid, ok := parseEscrowAccount(e.Account)
		if w.Amount <= 0 || e.Amount != -w.Amount || !ok || eid != id || !ledger.IsWallet(w.Account) {
			return nil, ErrEscrowMalformed.Wrap("escrow %d offer %c legs %d–%d: %+v %+v", id, side, i, i+1, w, e)
		}
		out = append(out, ledger.Debit(e.Account, w.Amount), ledger.Credit(EscrowOwedAccount(id, side, w.Account), w.Amount))
	}
	return out, nil
}

// missingClaims are the claims an ended escrow still lacks, built from
// its end's legs: each owed account credited is paid into the wallet it
// names, one movement per side.
func (s *escrowSweep) missingClaims(ctx context.Context, id uint64, end []ledger.Leg) ([]netting.Movement, error) {
	var out []netting.Movement
	for _, side := range []byte{'a', 'b'} {
		var legs []ledger.Leg
		for _, l := range end {
			oid, sd, wallet, ok := parseOwedAccount(l.Account)
			if ok && oid == id && sd == side && l.Amount < 0 {
				legs = append(legs, ledger.Debit(l.Account, -l.Amount), ledger.Credit(wallet, -l.Amount))
			}
		}
		if len(legs) == 0 {
			continue
		}
		key := EscrowKey(id, "claim:"+string(side))
		a, err := s.st.LookupAnswer(ctx, key)
		if err != nil {
			return nil, err
		}
		if !a.Found {
			out = append(out, netting.Movement{Key: key, Legs: legs})
		}
	}
	return out, nil
}
