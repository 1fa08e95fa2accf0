package netting

import (
	"fmt"
	"strings"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
)

// Stable codes of this package (ledger's codes pass through unchanged).
const (
	CodeMisrouted       = "SESSION.MISROUTED"
	CodeSettled         = "SESSION.SETTLED"
	CodeSessionNotFound = "SESSION.NOT_FOUND"
	CodeSessionExists   = "SESSION.EXISTS"
	CodeSessionInvalid  = "SESSION.INVALID"
	CodeChainBroken     = "CHAIN.BROKEN"
	CodeKeyConflict     = "JOURNAL.KEY_CONFLICT"
	CodeSeqConflict     = "JOURNAL.SEQ_CONFLICT"
	CodeSettleClaimed   = "SETTLE.CLAIMED"
	CodeFenced          = "SETTLE.FENCED"
	CodeClosed          = "NODE.CLOSED"
)

// CodeLedgerChainBroken is VerifyLedger's finding: a tampered, missing or
// reordered posting, or a balance the postings do not give.
const CodeLedgerChainBroken = "LEDGER.CHAIN_BROKEN"

var (
	// ErrMisrouted matches *MisroutedError: a scope reached a node that does
	// not own it.
	ErrMisrouted error = errMisrouted
	errMisrouted       = errcode.New(CodeMisrouted, "netting: scope owned by another node")

	// ErrSessionSettled is returned by Record on a settled (or settling)
	// session, and by a store's Append on a session whose settle has begun.
	ErrSessionSettled = errcode.New(CodeSettled, "netting: session settled")
	// ErrSessionNotFound: the store has no session with that id.
	ErrSessionNotFound = errcode.New(CodeSessionNotFound, "netting: session not found")
	// ErrSessionExists: CreateSession with an id already present.
	ErrSessionExists = errcode.New(CodeSessionExists, "netting: session already exists")
	// ErrSessionInvalid: CreateSession with an empty id or a chunk width
	// below 1.
	ErrSessionInvalid = errcode.New(CodeSessionInvalid, "netting: invalid session metadata")
	// ErrChainBroken matches *ChainBrokenError.
	ErrChainBroken = errcode.New(CodeChainBroken, "netting: journal hash chain broken")
	// ErrLedgerChainBroken matches *LedgerChainBrokenError.
	ErrLedgerChainBroken = errcode.New(CodeLedgerChainBroken, "netting: ledger hash chain broken")
	// ErrKeyConflict matches *KeyConflictError: an appended key is already
	// journaled (in this or any other session).
	ErrKeyConflict = errcode.New(CodeKeyConflict, "netting: idempotency key already journaled")
	// ErrSeqConflict: an append whose first seq is not the session's journal
	// length, or whose seqs are not contiguous — a second writer.
	ErrSeqConflict = errcode.New(CodeSeqConflict, "netting: journal seq conflict")
	// ErrSettleClaimed matches *ClaimHeldError: another settler holds a live
	// claim on the session.
	ErrSettleClaimed = errcode.New(CodeSettleClaimed, "netting: settle claimed by another settler")
	// ErrFenced matches *FencedError: a settle write carried a fencing token
	// that a newer claim has superseded.
	ErrFenced = errcode.New(CodeFenced, "netting: settle fenced by a newer claim")
	// ErrClosed: the node was closed.
	ErrClosed = errcode.New(CodeClosed, "netting: cluster node closed")
)

// Code returns the stable code of err ("" if none): CONFIG.INVALID,
// SESSION.MISROUTED, SESSION.SETTLED, LEDGER.UNBALANCED, LEDGER.OVERDRAFT,
// OP.MALFORMED, CHAIN.BROKEN, and the other codes declared above.
func Code(err error) string { return errcode.Of(err) }

// MisroutedError names the scope, the node that owns it and the node that
// refused it, so the caller can redirect.
type MisroutedError struct {
	Scope  string
	Owner  string
	NodeID string
}

func (e *MisroutedError) Error() string {
	return fmt.Sprintf("netting: scope %q is owned by %s, not %s", e.Scope, e.Owner, e.NodeID)
}

// ErrorCode returns SESSION.MISROUTED.
func (e *MisroutedError) ErrorCode() string { return CodeMisrouted }

// Is makes errors.Is(err, ErrMisrouted) true.
func (e *MisroutedError) Is(target error) bool { return target == ErrMisrouted }

// ChainBrokenError names the first journal row whose seq, prevHash or hash
// does not verify.
type ChainBrokenError struct {
	SessionID string
	Seq       int64
	Reason    string
}

func (e *ChainBrokenError) Error() string {
	return fmt.Sprintf("netting: journal of %s broken at seq %d: %s", e.SessionID, e.Seq, e.Reason)
}

// ErrorCode returns CHAIN.BROKEN.
func (e *ChainBrokenError) ErrorCode() string { return CodeChainBroken }

// Is makes errors.Is(err, ErrChainBroken) true.
func (e *ChainBrokenError) Is(target error) bool { return target == ErrChainBroken }

// KeyConflictError lists the appended keys that were already journaled.
type KeyConflictError struct {
	Keys []string
}

func (e *KeyConflictError) Error() string {
	return "netting: keys already journaled: " + strings.Join(e.Keys, ", ")
}

// ErrorCode returns JOURNAL.KEY_CONFLICT.
func (e *KeyConflictError) ErrorCode() string { return CodeKeyConflict }

// Is makes errors.Is(err, ErrKeyConflict) true.
func (e *KeyConflictError) Is(target error) bool { return target == ErrKeyConflict }

// ClaimHeldError names the settler holding a live claim and when it lapses.
type ClaimHeldError struct {
	SessionID string
	Owner     string
	ExpiresAt time.Time
}

func (e *ClaimHeldError) Error() string {
	return fmt.Sprintf("netting: settle of %s claimed by %s until %s", e.SessionID, e.Owner, e.ExpiresAt.Format(time.RFC3339Nano))
}

// ErrorCode returns SETTLE.CLAIMED.
func (e *ClaimHeldError) ErrorCode() string { return CodeSettleClaimed }

// Is makes errors.Is(err, ErrSettleClaimed) true.
func (e *ClaimHeldError) Is(target error) bool { return target == ErrSettleClaimed }

// FencedError is a settle write refused because Token is no longer the
// session's current claim token.
type FencedError struct {
	SessionID string
	Token     int64
	Current   int64
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("netting: settle write on %s with token %d fenced by token %d", e.SessionID, e.Token, e.Current)
}

// ErrorCode returns SETTLE.FENCED.
func (e *FencedError) ErrorCode() string { return CodeFenced }

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// isLedgerRefusal is re-exported here so the settle code reads plainly.
func isLedgerRefusal(err error) bool { return ledger.IsRefusal(err) }
