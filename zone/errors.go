package zone

import (
	"fmt"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/errcode"
)

// Stable error codes of this package. They never change once published.
const (
	CodeFenced         = "ZONE.FENCED"
	CodeNotOwner       = "ZONE.NOT_OWNER"
	CodeNoTable        = "ZONE.NO_TABLE"
	CodeClosed         = "ZONE.CLOSED"
	CodeNoCodec        = "ZONE.NO_HANDOFF_CODEC"
	CodeMalformedState = "ZONE.MALFORMED_STATE"
	CodeNotLocal       = "ZONE.NOT_LOCAL"
	CodeMalformedInput = "ZONE.MALFORMED_INPUT"
	CodeSendQueueFull  = "ZONE.SEND_QUEUE_FULL"
	CodeTransportShut  = "ZONE.TRANSPORT_CLOSED"
)

var (
	// ErrFenced: the node's lease is lost; it may write nothing any more.
	// Every *FencedError matches it.
	ErrFenced = errcode.New(CodeFenced, "zone: lease lost, the node is fenced")
	// ErrNotOwner: the table the node holds gives the region to another
	// node. Every *NotOwnerError matches it.
	ErrNotOwner = errcode.New(CodeNotOwner, "zone: region owned by another node")
	// ErrNoTable: the node holds no region table yet, so it owns nothing.
	ErrNoTable = errcode.New(CodeNoTable, "zone: no region table held yet")
	// ErrClosed: the Ownership (zone/zonecoord) was closed by its owner.
	ErrClosed = errcode.New(CodeClosed, "zone: closed")
	// ErrNoCodec: a component has neither a handoff codec nor the mark
	// that it is not handed over (a boot error).
	ErrNoCodec = errcode.New(CodeNoCodec, "zone: component has no handoff codec and is not marked local")
	// ErrNotLocal: the entity is not simulated here (absent, or a ghost of
	// another node's).
	ErrNotLocal = errcode.New(CodeNotLocal, "zone: entity not simulated here")
	// ErrSendQueueFull: a Transport could not queue a control message
	// (LinkTransport: the peer's queue is full, the peer cut off while its
	// lease is still live).
	ErrSendQueueFull = errcode.New(CodeSendQueueFull, "zone: the peer's control queue is full")
	// ErrTransportClosed: a Transport was used after Close.
	ErrTransportClosed = errcode.New(CodeTransportShut, "zone: the transport is closed")
	// ErrMalformedState: component bytes (a handoff codec's or a wire
	// payload) do not decode.
	ErrMalformedState = errcode.New(CodeMalformedState, "zone: malformed component state")
	// ErrMalformedInput: bytes a peer sent do not decode — the client
	// input inside a reserved intent, or a checkpoint message; the error
	// names the message, the field and its byte offset.
	ErrMalformedInput = errcode.New(CodeMalformedInput, "zone: malformed input from a peer")
)

// FencedError says the node lost its lease: coord could not prove it alive,
// so another node may already hold its name and, through a new table, its
// regions. It carries the last table version the node held and coord's
// reason (which matches coord.ErrLeaseLost).
type FencedError struct {
	Node         string
	TableVersion uint64 // the last version held; 0 if none arrived
	Cause        error
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("zone: node %q is fenced (lease lost; last table version %d): %v", e.Node, e.TableVersion, e.Cause)
}

// ErrorCode returns CodeFenced.
func (e *FencedError) ErrorCode() string { return CodeFenced }

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// Unwrap returns coord's reason.
func (e *FencedError) Unwrap() error { return e.Cause }

// NotOwnerError says the held table gives Region to Owner, not to Node, so
// the caller can forward to the owner. Owner is "" for a region the grid
// does not have.
type NotOwnerError struct {
	Node         string
	Region       cells.RegionID
	Owner        string
	TableVersion uint64
}

func (e *NotOwnerError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("zone: node %q: region %d is not in the grid of table version %d", e.Node, e.Region, e.TableVersion)
	}
	return fmt.Sprintf("zone: node %q: region %d is owned by %q in table version %d", e.Node, e.Region, e.Owner, e.TableVersion)
}

// ErrorCode returns CodeNotOwner.
func (e *NotOwnerError) ErrorCode() string { return CodeNotOwner }

// Is makes errors.Is(err, ErrNotOwner) true.
func (e *NotOwnerError) Is(target error) bool { return target == ErrNotOwner }
