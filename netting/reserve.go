package netting

import (
	"math/bits"

	"github.com/shardwise/shardwise/ledger"
)

// This file is the spending rule (port v3), as one pure function every
// store's reservation check is specified by and the memory stores run.
//
// The shared counter of an account has two sides: Debits, the sum of the
// negative balance deltas of accepted, unsettled movements (≤ 0), and
// Credits, the sum of the positive ones (≥ 0). Every session's pending
// debits count against everyone; nobody's pending credits are spendable,
// except by the session that accepted them (they settle with it). So a
// debit of a request is granted only if
//
//	balance + Debits (this debit included) + own ≥ 0
//
// where own is the credits the requesting session has accepted on the
// account and not yet settled. Why that makes a settle-time refusal
// impossible is argued in doc.go ("The spending rule").

// Reserved is one account's shared reservations: the pending debits (the
// sum of the negative balance deltas of accepted, unsettled movements, ≤ 0)
// and the pending credits (the sum of the positive ones, ≥ 0). Debits are
// checked against; Credits are kept for display and reconciliation, never
// spendable by another session. Net is what Pending reports.
type Reserved struct {
	Debits  int64
	Credits int64
}

// Net is Debits + Credits: the account's pending balance change.
func (r Reserved) Net() int64 { return r.Debits + r.Credits }

// add applies one balance delta to the side its sign names.
func (r Reserved) add(delta int64) Reserved {
	if delta < 0 {
		r.Debits += delta
	} else {
		r.Credits += delta
	}
	return r
}

// Minus returns r with c's sides taken off (a release) — or, for a c with
// negative sides, put back (a compensation).
func (r Reserved) Minus(c Reserved) Reserved {
	return Reserved{Debits: r.Debits - c.Debits, Credits: r.Credits - c.Credits}
}

// Plus returns r with c's sides added.
func (r Reserved) Plus(c Reserved) Reserved {
	return Reserved{Debits: r.Debits + c.Debits, Credits: r.Credits + c.Credits}
}

// Zero reports whether both sides are zero.
func (r Reserved) Zero() bool { return r.Debits == 0 && r.Credits == 0 }

// ReservedOf is the change one balance delta makes: a negative delta to
// Debits, a positive one to Credits.
func ReservedOf(delta int64) Reserved {
	return Reserved{}.add(delta)
}

// ReservedChange is a change of one account's reservations, both sides
// given: what a settle posting moves out of the counters as it lands
// (SharedStore.PostFencedReleasing subtracts it), or, for a compensation,
// puts back (its sides negative).
type ReservedChange struct {
	Account string
	Reserved
}

// DecideReservations applies the spending rule to reqs in order, updating
// res in place and returning each request's grant. For each request, each
// delta is added to its side of res; a negative delta is then checked:
// balances[a] + res[a].Debits + own[a] < 0 refuses the request, and its
// adds are undone newest first. res, balances (and own, when not nil) must
// hold every account reqs touch that the rule reads (missing means 0).
//
// own is the requesting session's spendable credits per account: nil for
// Reserve, where no request may spend any pending credit. With
// ReserveAndAppend every request is of one session, so the credits of a
// granted request are added to own for the requests after it (the caller's
// map is changed: pass a copy).
func DecideReservations(reqs [][]ledger.AccountDelta, res map[string]Reserved, balances, own map[string]int64) []bool {
	granted := make([]bool, len(reqs))
	for i, req := range reqs {
		granted[i] = true
		for j, d := range req {
			was := res[d.Account].Debits
			res[d.Account] = res[d.Account].add(d.Delta)
			// The check is on the true sums: pending debits that wrapped
			// past MinInt64 (they only ever grow more negative here) are
			// refused, and the headroom is summed without wrapping.
			if d.Delta < 0 && (res[d.Account].Debits > was || !nonNegativeSum(balances[d.Account], res[d.Account].Debits, own[d.Account])) {
				for k := j; k >= 0; k-- {
					res[req[k].Account] = res[req[k].Account].Minus(ReservedOf(req[k].Delta))
				}
				granted[i] = false
				break
			}
		}
		if granted[i] && own != nil {
			for _, d := range req {
				if d.Delta > 0 {
					own[d.Account] += d.Delta
				}
			}
		}
	}
	return granted
}

// nonNegativeSum reports whether the sum of terms is ≥ 0, computed exactly
// (in 128 bits, enough for fewer than 2^64 terms): the spending rule's
// terms are each an int64, but their sum need not be, and a wrapped sum
// would grant a debit nothing covers.
func nonNegativeSum(terms ...int64) bool {
	var hi, lo uint64
	for _, t := range terms {
		var carry uint64
		lo, carry = bits.Add64(lo, uint64(t), 0)
		ext := uint64(0)
		if t < 0 {
			ext = ^uint64(0)
		}
		hi, _ = bits.Add64(hi, ext, carry)
	}
	return int64(hi) >= 0
}

// splitDeltas is what the movements recs hold reserved, per account (in
// first-touch order, zeros dropped), both sides apart: netting a credit
// against a debit of another movement would hide the debit, which the two
// sides of the counter keep apart.
func splitDeltas(recs []JournalRecord) []ReservedChange {
	idx := map[string]int{}
	var out []ReservedChange
	for _, r := range recs {
		for _, d := range reservationDeltas(r.Legs) {
			i, ok := idx[d.Account]
			if !ok {
				i = len(out)
				idx[d.Account] = i
				out = append(out, ReservedChange{Account: d.Account})
			}
			out[i].Reserved = out[i].Reserved.add(d.Delta)
		}
	}
	kept := out[:0]
	for _, c := range out {
		if !c.Zero() {
			kept = append(kept, c)
		}
	}
	return kept
}

// changesOf is the change each delta of ds makes (by its sign), one entry
// per delta.
func changesOf(ds []ledger.AccountDelta) []ReservedChange {
	out := make([]ReservedChange, 0, len(ds))
	for _, d := range ds {
		out = append(out, ReservedChange{Account: d.Account, Reserved: ReservedOf(d.Delta)})
	}
	return out
}

// negated returns cs with both sides of every change flipped: what puts
// back what cs moved out.
func negated(cs []ReservedChange) []ReservedChange {
	out := make([]ReservedChange, len(cs))
	for i, c := range cs {
		out[i] = ReservedChange{Account: c.Account, Reserved: Reserved{Debits: -c.Debits, Credits: -c.Credits}}
	}
	return out
}

// ownCredits is a copy of own for DecideReservations to accumulate into
// (never nil: nil means Reserve's rule).
func ownCredits(own map[string]int64) map[string]int64 {
	c := make(map[string]int64, len(own))
	for a, v := range own {
		c[a] = v
	}
	return c
}

// chunkRelease is what chunk's posting moves out of the counters: the
// sides of every account it carries, over the session's whole journal (a
// chunk holds each of its accounts' whole net position). sides is
// sidesOf(the journal), computed once per settle: a chunk's accounts are
// looked up, not the journal walked again.
func chunkRelease(sides map[string]Reserved, chunk ledger.Posting) []ReservedChange {
	var out []ReservedChange
	for _, l := range chunk.Legs {
		if r := sides[l.Account]; !r.Zero() {
			out = append(out, ReservedChange{Account: l.Account, Reserved: r})
		}
	}
	return out
}

// sidesOf is what the movements recs hold reserved per account, both
// sides apart (splitDeltas as a map). It walks the journal once without
// allocating per movement: a movement that names each account once (the
// common case) is its own net.
func sidesOf(recs []JournalRecord) map[string]Reserved {
	out := map[string]Reserved{}
	for _, r := range recs {
		if repeatsAccount(r.Legs) {
			for _, d := range reservationDeltas(r.Legs) {
				out[d.Account] = out[d.Account].add(d.Delta)
			}
			continue
		}
		for _, l := range r.Legs {
			if d := l.BalanceDelta(); d != 0 && ledger.IsWallet(l.Account) {
				out[l.Account] = out[l.Account].add(d)
			}
		}
	}
	return out
}

// repeatsAccount reports whether two legs name one account.
func repeatsAccount(legs []ledger.Leg) bool {
	for i := range legs {
		for j := i + 1; j < len(legs); j++ {
			if legs[i].Account == legs[j].Account {
				return true
			}
		}
	}
	return false
}
