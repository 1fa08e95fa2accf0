package worldstore

import (
	"fmt"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

// Stable error codes.
const (
	CodeNotFound   = "WORLDSTORE.NOT_FOUND"
	CodeStaleEpoch = "WORLDSTORE.STALE_EPOCH"
	CodeConflict   = "WORLDSTORE.CONFLICT"
	CodeChunkFull  = "WORLDSTORE.CHUNK_FULL"
	CodeInvalid    = "WORLDSTORE.INVALID"
	CodeClosed     = "WORLDSTORE.CLOSED"
)

var (
	// ErrNotFound: the account has no saved record.
	ErrNotFound = errcode.New(CodeNotFound, "worldstore: player not found")
	// ErrStaleEpoch: a newer session's record is stored, or the final
	// record of the same session (its logout's). Typed detail:
	// *StaleEpochError.
	ErrStaleEpoch = errcode.New(CodeStaleEpoch, "worldstore: stale session epoch")
	// ErrConflict: the chunk's revision is not the one the append expected.
	// Typed detail: *ConflictError.
	ErrConflict = errcode.New(CodeConflict, "worldstore: chunk revision conflict")
	// ErrChunkFull: the chunk already holds MaxEditsPerChunk edits.
	ErrChunkFull = errcode.New(CodeChunkFull, "worldstore: chunk holds the maximum number of edits")
	// ErrInvalid: an argument breaks a rule of the port. Typed detail:
	// *InvalidError.
	ErrInvalid = errcode.New(CodeInvalid, "worldstore: invalid argument")
	// ErrClosed: the store was closed.
	ErrClosed = errcode.New(CodeClosed, "worldstore: store closed")
)

// StaleEpochError refuses a SavePlayer whose epoch is below the stored
// record's, or equal to a final stored record's (Final: the session
// ended, and its logout's record stays). errors.Is(err, ErrStaleEpoch)
// holds.
type StaleEpochError struct {
	Account account.ID
	Epoch   uint64 // the caller's
	Stored  uint64 // the stored record's: higher, or equal and final
	// Final reports that the stored record is the final one of the
	// caller's own session (Stored == Epoch): the session logged out.
	Final bool
}

func (e *StaleEpochError) Error() string {
	if e.Final {
		return fmt.Sprintf("worldstore: save of account %s with epoch %d refused: the session's final record (its logout's) is stored", e.Account, e.Epoch)
	}
	return fmt.Sprintf("worldstore: save of account %s with epoch %d refused: a record of epoch %d is stored", e.Account, e.Epoch, e.Stored)
}

// refusesSave reports whether a stored record refuses a save of epoch,
// and the refusal: invariant 1, in one place for every implementation
// that compares in Go.
func refusesSave(stored Player, epoch uint64) *StaleEpochError {
	if stored.Epoch > epoch || stored.Epoch == epoch && stored.Final {
		return &StaleEpochError{Account: stored.Account, Epoch: epoch, Stored: stored.Epoch, Final: stored.Epoch == epoch}
	}
	return nil
}

// ErrorCode returns CodeStaleEpoch.
func (e *StaleEpochError) ErrorCode() string { return CodeStaleEpoch }

// Is makes errors.Is(err, ErrStaleEpoch) true.
func (e *StaleEpochError) Is(target error) bool { return target == ErrStaleEpoch }

// ConflictError refuses an AppendEdit whose expected revision is not the
// chunk's. The caller reads the edits since its revision (Edits), applies
// them, and decides whether its edit still makes sense at Current.
// errors.Is(err, ErrConflict) holds.
type ConflictError struct {
	Chunk    torus.ChunkPos
	Expected uint64 // the caller's expectRev
	Current  uint64 // the chunk's revision when refused
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("worldstore: append to chunk %s expected revision %d, current is %d", formatChunk(e.Chunk), e.Expected, e.Current)
}

// ErrorCode returns CodeConflict.
func (e *ConflictError) ErrorCode() string { return CodeConflict }

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// InvalidError names the argument a store refused and why.
// errors.Is(err, ErrInvalid) holds.
type InvalidError struct {
	Field  string // "Player.State", "Edit.Kind", "chunk", …
	Reason string // includes the offending value
}

func (e *InvalidError) Error() string { return "worldstore: invalid " + e.Field + ": " + e.Reason }

// ErrorCode returns CodeInvalid.
func (e *InvalidError) ErrorCode() string { return CodeInvalid }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, reason string) error { return &InvalidError{Field: field, Reason: reason} }
