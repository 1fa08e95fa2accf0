package ledger

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/shardwise/shardwise/errcode"
)

// Stable error codes of this package.
const (
	CodeMalformed  = "OP.MALFORMED"
	CodeUnbalanced = "LEDGER.UNBALANCED"
	CodeOverdraft  = "LEDGER.OVERDRAFT"
)

var (
	// ErrMalformed matches a posting or movement whose shape is wrong: no
	// legs, a zero amount, an empty account or posting id.
	ErrMalformed = errcode.New(CodeMalformed, "ledger: malformed legs")
	// ErrUnbalanced matches legs that do not sum to zero.
	ErrUnbalanced = errcode.New(CodeUnbalanced, "ledger: legs do not balance")
	// ErrOverdraft matches a posting refused because a wallet account would
	// end below zero. Match *Overdraft with errors.As for the account.
	ErrOverdraft = errcode.New(CodeOverdraft, "ledger: wallet overdraft")
)

// PlatformPrefix starts every platform account name. Platform accounts may go
// below zero; every other account is a user's wallet and may not.
const PlatformPrefix = "platform:"

// Well-known platform accounts.
const (
	// Revenue is the platform account that funds users: funding is
	// Credit(user spendable) + Debit(Revenue).
	Revenue = "platform:revenue"
	// NettingClearing balances each netted chunk; it ends every complete
	// settle at zero.
	NettingClearing = "platform:netting_clearing"
)

// Leg is one side of a posting: Amount is debit-positive minor units.
type Leg struct {
	Account string
	Amount  int64
}

// Debit returns the leg that debits account by amount (+amount).
func Debit(account string, amount int64) Leg { return Leg{Account: account, Amount: amount} }

// Credit returns the leg that credits account by amount (−amount).
func Credit(account string, amount int64) Leg { return Leg{Account: account, Amount: -amount} }

// BalanceDelta is the change this leg makes to its account's balance (credits
// minus debits): the negation of the raw amount.
func (l Leg) BalanceDelta() int64 { return -l.Amount }

// Posting is one atomic ledger transaction. ID is its idempotency key.
type Posting struct {
	ID   string
	Legs []Leg
	Meta map[string]string
}

// IsWallet reports whether account belongs to a user and so may never go
// below zero.
func IsWallet(account string) bool { return !strings.HasPrefix(account, PlatformPrefix) }

// Spendable, Earned and Escrow name a user's wallet accounts.
func Spendable(user string) string { return user + ":spendable" }

// Earned is the wallet account a user's sales are credited to.
func Earned(user string) string { return user + ":earned" }

// Escrow is the per-session escrow wallet of a user.
func Escrow(user, session string) string { return user + ":" + session + ":escrow" }

// MalformedError says which leg (or -1 for the whole) is malformed and why.
type MalformedError struct {
	Index  int
	Reason string
}

func (e *MalformedError) Error() string {
	if e.Index < 0 {
		return "ledger: malformed: " + e.Reason
	}
	return fmt.Sprintf("ledger: malformed leg %d: %s", e.Index, e.Reason)
}

// ErrorCode returns OP.MALFORMED.
func (e *MalformedError) ErrorCode() string { return CodeMalformed }

// Is makes errors.Is(err, ErrMalformed) true.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

// UnbalancedError carries the nonzero sum of the legs. Overflow is true when
// the sum does not fit in int64 (which is refused as unbalanced as well).
type UnbalancedError struct {
	Sum      int64
	Overflow bool
}

func (e *UnbalancedError) Error() string {
	if e.Overflow {
		return "ledger: legs do not balance: sum overflows int64"
	}
	return fmt.Sprintf("ledger: legs do not balance: sum %d", e.Sum)
}

// ErrorCode returns LEDGER.UNBALANCED.
func (e *UnbalancedError) ErrorCode() string { return CodeUnbalanced }

// Is makes errors.Is(err, ErrUnbalanced) true.
func (e *UnbalancedError) Is(target error) bool { return target == ErrUnbalanced }

// Overdraft is the typed LEDGER.OVERDRAFT error: Account would have ended at
// Balance (< 0).
type Overdraft struct {
	Account string
	Balance int64
}

// OverdraftError returns the *Overdraft error for account ending at balance.
func OverdraftError(account string, balance int64) error {
	return &Overdraft{Account: account, Balance: balance}
}

func (e *Overdraft) Error() string {
	return fmt.Sprintf("ledger: wallet %s would end at %d", e.Account, e.Balance)
}

// ErrorCode returns LEDGER.OVERDRAFT.
func (e *Overdraft) ErrorCode() string { return CodeOverdraft }

// Is makes errors.Is(err, ErrOverdraft) true.
func (e *Overdraft) Is(target error) bool { return target == ErrOverdraft }

// ValidateLegs checks the shape and balance of legs: non-empty, every account
// named, every amount nonzero, each account's legs summing within int64
// (OP.MALFORMED), all summing to zero without overflow (LEDGER.UNBALANCED).
func ValidateLegs(legs []Leg) error {
	if len(legs) == 0 {
		return &MalformedError{Index: -1, Reason: "no legs"}
	}
	for i, l := range legs {
		if l.Account == "" {
			return &MalformedError{Index: i, Reason: "empty account"}
		}
		if l.Amount == 0 {
			return &MalformedError{Index: i, Reason: "zero amount"}
		}
		if l.Amount == math.MinInt64 {
			// Its negation (the balance delta) does not exist in int64.
			return &MalformedError{Index: i, Reason: "amount out of range"}
		}
	}
	var sum int64
	for _, l := range legs {
		next := sum + l.Amount
		if (l.Amount > 0 && next < sum) || (l.Amount < 0 && next > sum) {
			return &UnbalancedError{Overflow: true}
		}
		sum = next
	}
	if sum != 0 {
		return &UnbalancedError{Sum: sum}
	}
	// Each account's legs must sum within int64 too: a balance change is
	// the account's net, and a net that wraps moves the balance the other
	// way (two credits of MaxInt64 to one wallet would take 2 from it).
	if i := accountNetOverflow(legs); i >= 0 {
		return &MalformedError{Index: i, Reason: "the legs on " + legs[i].Account + " sum past int64"}
	}
	return nil
}

// accountNetOverflow returns the index of the first leg at which its
// account's running sum leaves int64, or -1. A few legs (a movement) are
// compared pairwise, without allocating; many (a settle's chunk, whose
// accounts are distinct) through a map.
func accountNetOverflow(legs []Leg) int {
	wraps := func(prev, amount int64) bool {
		next := prev + amount
		return (amount > 0 && next < prev) || (amount < 0 && next > prev)
	}
	if len(legs) <= 16 {
		for i, l := range legs {
			var prev int64
			for _, m := range legs[:i] {
				if m.Account == l.Account {
					prev += m.Amount // the earlier legs' sums fit: checked at their own index
				}
			}
			if wraps(prev, l.Amount) {
				return i
			}
		}
		return -1
	}
	net := make(map[string]int64, len(legs))
	for i, l := range legs {
		if wraps(net[l.Account], l.Amount) {
			return i
		}
		net[l.Account] += l.Amount
	}
	return -1
}

// Validate checks a posting: a non-empty id and valid legs.
func Validate(p Posting) error {
	if p.ID == "" {
		return &MalformedError{Index: -1, Reason: "empty posting id"}
	}
	return ValidateLegs(p.Legs)
}

// IsRefusal reports whether err is the ledger refusing a posting on its
// rules (malformed, unbalanced, overdraft) rather than a failure to reach
// the store. Refusals are answers; other errors are worth retrying.
func IsRefusal(err error) bool {
	return errors.Is(err, ErrOverdraft) || errors.Is(err, ErrUnbalanced) || errors.Is(err, ErrMalformed)
}

// AccountDelta is the net balance change of one account in a posting.
type AccountDelta struct {
	Account string
	Delta   int64 // credits minus debits
}

// NetDeltas sums legs per account into balance changes, in first-touch order,
// keeping accounts whose net change is zero (a store may still need to lock
// them; callers that do not can skip zeros).
func NetDeltas(legs []Leg) []AccountDelta {
	idx := make(map[string]int, len(legs))
	out := make([]AccountDelta, 0, len(legs))
	for _, l := range legs {
		i, ok := idx[l.Account]
		if !ok {
			i = len(out)
			idx[l.Account] = i
			out = append(out, AccountDelta{Account: l.Account})
		}
		out[i].Delta += l.BalanceDelta()
	}
	return out
}

// CheckOverdraft applies the wallet rule to legs against current balances:
// it returns an *Overdraft for the first wallet account whose balance would
// end below zero after a decrease. An account already below zero that the
// posting does not decrease is not this posting's doing and is not refused.
func CheckOverdraft(legs []Leg, balance func(account string) int64) error {
	for _, d := range NetDeltas(legs) {
		if d.Delta >= 0 || !IsWallet(d.Account) {
			continue
		}
		if end := balance(d.Account) + d.Delta; end < 0 {
			return OverdraftError(d.Account, end)
		}
	}
	return nil
}
