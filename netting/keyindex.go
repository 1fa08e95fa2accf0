package netting

import (
	"fmt"

	"github.com/shardwise/shardwise/errcode"
)

// A store may keep its journal in two parts: the rows (hash-chained, which
// VerifyChain checks) and an index of their keys, which the key lookups and
// the conflict check of every append read. The chain does not cover the
// index: a key whose index entry is lost would be accepted again on a
// resend. A store that keeps such an index can check it against the rows
// (sqlstore.Store.VerifyKeyIndex; econ.Audit calls it), and reports what
// disagrees as a *KeyIndexBrokenError.

// CodeKeyIndexBroken is a store's finding that its journal key index
// disagrees with the journal rows.
const CodeKeyIndexBroken = "JOURNAL.KEY_INDEX_BROKEN"

// ErrKeyIndexBroken matches *KeyIndexBrokenError.
var ErrKeyIndexBroken = errcode.New(CodeKeyIndexBroken, "netting: journal key index disagrees with the journal")

// KeyIndexFault is one place where a journal's key index and its rows
// disagree: a journaled key the index does not point at, or an index entry
// that points at a row not holding its key.
type KeyIndexFault struct {
	// Key is the key concerned: the journaled key without its entry, or the
	// entry's key.
	Key string `json:"key"`
	// Batch is the store's id of the batch concerned (the one holding the
	// key, or the one the entry points at); SessionID and FirstSeq name it
	// when it exists ("" and 0 when the entry points at no batch).
	Batch     int64  `json:"batch"`
	SessionID string `json:"session,omitempty"`
	FirstSeq  int64  `json:"first_seq"`
	// Offset is the row's position in the batch: the key's, or the one the
	// entry names.
	Offset int64  `json:"offset"`
	Reason string `json:"reason"`
}

func (f KeyIndexFault) String() string {
	if f.SessionID == "" {
		return fmt.Sprintf("key %q, batch %d offset %d: %s", f.Key, f.Batch, f.Offset, f.Reason)
	}
	return fmt.Sprintf("key %q, batch %d (%s@%d) offset %d: %s", f.Key, f.Batch, f.SessionID, f.FirstSeq, f.Offset, f.Reason)
}

// KeyIndexBrokenError lists where a journal's key index disagrees with the
// journal: the first Faults found (in batch order) out of Total.
type KeyIndexBrokenError struct {
	Faults []KeyIndexFault
	Total  int
}

func (e *KeyIndexBrokenError) Error() string {
	if len(e.Faults) == 0 {
		return fmt.Sprintf("netting: journal key index broken: %d faults", e.Total)
	}
	s := "netting: journal key index broken: " + e.Faults[0].String()
	if e.Total > 1 {
		s += fmt.Sprintf(" (and %d more)", e.Total-1)
	}
	return s
}

// ErrorCode returns JOURNAL.KEY_INDEX_BROKEN.
func (e *KeyIndexBrokenError) ErrorCode() string { return CodeKeyIndexBroken }

// Is makes errors.Is(err, ErrKeyIndexBroken) true.
func (e *KeyIndexBrokenError) Is(target error) bool { return target == ErrKeyIndexBroken }
