package coord

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/errcode"
)

// Stable error codes of this package. They never change once published.
const (
	CodeUnavailable      = "COORD.UNAVAILABLE"
	CodeNodeIDsExhausted = "NODEID.EXHAUSTED"
	CodeNameTaken        = "NODENAME.TAKEN"
	CodeLeaseLost        = "LEASE.LOST"
	CodeMemberClosed     = "MEMBER.CLOSED"
	CodeRegionsConflict  = "REGIONS.CONFLICT"
	CodeRegionsNotFound  = "REGIONS.NOT_FOUND"
	CodeRegionsInvalid   = "REGIONS.INVALID"
	CodeRegionsUnknown   = "REGIONS.UNKNOWN_NODE"
	CodeNoLeader         = "ELECTION.NO_LEADER"
	CodeNotLeader        = "ELECTION.NOT_LEADER"
)

var (
	// ErrUnavailable: etcd could not be reached or did not answer.
	ErrUnavailable = errcode.New(CodeUnavailable, "coord: etcd unavailable")
	// ErrNodeIDsExhausted: every node id 0–255 is held by a live member.
	// Returned by Register, typically at boot; the typed detail is
	// *NodeIDsExhaustedError.
	ErrNodeIDsExhausted = errcode.New(CodeNodeIDsExhausted, "coord: no free node id")
	// ErrNameTaken: another live member holds the node name. The typed
	// detail is *NameTakenError.
	ErrNameTaken = errcode.New(CodeNameTaken, "coord: node name held by another member")
	// ErrLeaseLost: the registration's lease expired or could not be renewed
	// within its TTL. The node must stop writing: the lease was its fence.
	ErrLeaseLost = errcode.New(CodeLeaseLost, "coord: lease lost")
	// ErrMemberClosed: the registration was closed by its owner.
	ErrMemberClosed = errcode.New(CodeMemberClosed, "coord: registration closed")
	// ErrRegionsConflict: the region table was not at the expected version.
	// The typed detail is *RegionsConflictError.
	ErrRegionsConflict = errcode.New(CodeRegionsConflict, "coord: region table version conflict")
	// ErrRegionsNotFound: no region table has been stored yet.
	ErrRegionsNotFound = errcode.New(CodeRegionsNotFound, "coord: no region table stored")
	// ErrRegionsInvalid: the region table (or its encoding) is not valid.
	ErrRegionsInvalid = errcode.New(CodeRegionsInvalid, "coord: invalid region table")
	// ErrRegionsUnknownNode: the table names a node id that is not a live
	// member. The typed detail is *UnknownNodesError.
	ErrRegionsUnknownNode = errcode.New(CodeRegionsUnknown, "coord: region table names a node that is not a member")
	// ErrNoLeader: no candidate leads the election (Client.Leader).
	ErrNoLeader = errcode.New(CodeNoLeader, "coord: the election has no leader")
	// ErrNotLeader: a write fenced by ApplyOptions.Leader was refused
	// because that leadership has ended.
	ErrNotLeader = errcode.New(CodeNotLeader, "coord: no longer the leader")
)

// NodeIDsExhaustedError reports that a registering node got no node id:
// every id was held by a live member, or the node lost each of the claims
// it tried (maxClaimAttempts at most) to other nodes registering at the
// same time, or to named members holding the names derived from the free
// ids ("node-<id>").
type NodeIDsExhaustedError struct {
	Role  string // the role of the node that asked
	Taken int    // how many ids were held when it gave up
	// Free is how many ids were not held when it gave up (NodeIDCount −
	// Taken); each of them was one it had already claimed and lost, unless
	// Attempts reached the bound first.
	Free int
	// Attempts is how many claims it tried and lost (0: none was free).
	Attempts int
}

func (e *NodeIDsExhaustedError) Error() string {
	if e.Attempts == 0 || e.Free == 0 {
		return fmt.Sprintf("coord: no free node id for a %q node: all %d ids (0–%d) are held by live members", e.Role, e.Taken, MaxNodeID)
	}
	if e.Attempts >= maxClaimAttempts {
		return fmt.Sprintf("coord: no node id for a %q node: gave up after losing %d claims in a row (the most one registration tries) to nodes registering at the same time, with %d of %d ids still free; register again", e.Role, e.Attempts, e.Free, NodeIDCount)
	}
	return fmt.Sprintf("coord: no node id for a %q node: %d of %d ids are held by live members, and each of the %d free ones was lost, to a node registering at the same time or because a named member holds its derived name (node-<id>); register again, or give the node a name", e.Role, e.Taken, NodeIDCount, e.Free)
}
func (e *NodeIDsExhaustedError) ErrorCode() string { return CodeNodeIDsExhausted }
func (e *NodeIDsExhaustedError) Unwrap() error     { return ErrNodeIDsExhausted }

// NameTakenError reports that a live member already holds the name a node
// tried to register with. After a crash, the old holder's name is freed
// when its lease expires (at most its TTL later).
type NameTakenError struct {
	Name   string
	HeldBy string // node id of the holder, as stored
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("coord: node name %q is held by live member %s (if that was this node before a restart, its lease expires within its TTL)", e.Name, e.HeldBy)
}
func (e *NameTakenError) ErrorCode() string { return CodeNameTaken }
func (e *NameTakenError) Unwrap() error     { return ErrNameTaken }

// RegionsConflictError reports a compare-and-set on the region table that
// lost: the table was at Actual, the caller expected Expected.
type RegionsConflictError struct {
	Expected uint64
	Actual   uint64
}

func (e *RegionsConflictError) Error() string {
	return fmt.Sprintf("coord: region table is at version %d, not the expected %d: someone else applied a table; re-read it and apply again", e.Actual, e.Expected)
}
func (e *RegionsConflictError) ErrorCode() string { return CodeRegionsConflict }
func (e *RegionsConflictError) Unwrap() error     { return ErrRegionsConflict }

// UnknownNodesError lists the node names a region table uses that no live
// member holds.
type UnknownNodesError struct {
	Nodes []string // sorted
}

func (e *UnknownNodesError) Error() string {
	quoted := make([]string, len(e.Nodes))
	for i, n := range e.Nodes {
		quoted[i] = strconv.Quote(n)
	}
	return fmt.Sprintf("coord: region table names node(s) %s that are not live members (apply with force to store it anyway)", strings.Join(quoted, ", "))
}
func (e *UnknownNodesError) ErrorCode() string { return CodeRegionsUnknown }
func (e *UnknownNodesError) Unwrap() error     { return ErrRegionsUnknownNode }

// invalidTable marks a table error from cells (which already reads "invalid
// region table: …") as ErrRegionsInvalid without saying so twice: it
// matches both ErrRegionsInvalid and the cells error with errors.Is and
// errors.As, and has ErrRegionsInvalid's code.
func invalidTable(err error) error { return &invalidTableError{err: err} }

type invalidTableError struct{ err error }

func (e *invalidTableError) Error() string {
	if errors.Is(e.err, cells.ErrInvalidTable) {
		return "coord: " + e.err.Error()
	}
	return ErrRegionsInvalid.Error() + ": " + e.err.Error()
}
func (e *invalidTableError) ErrorCode() string { return CodeRegionsInvalid }
func (e *invalidTableError) Unwrap() []error   { return []error{ErrRegionsInvalid, e.err} }
