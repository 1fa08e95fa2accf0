package link

import (
	"fmt"

	"github.com/shardwise/shardwise/errcode"
)

// Error codes of the link. They are stable: callers and remote nodes match
// on them, never on message text.
const (
	CodeQueueFull   = "LINK.QUEUE_FULL"
	CodeUnavailable = "LINK.UNAVAILABLE"
	CodeDeadline    = "LINK.DEADLINE_EXCEEDED"
	CodeUnknownPeer = "LINK.UNKNOWN_PEER"
	CodeClosed      = "LINK.CLOSED"
	CodeNoHandler   = "LINK.NO_HANDLER"
	CodeRemote      = "LINK.REMOTE"
	CodeBadFrame    = "LINK.BAD_FRAME"
	CodeBadIdentity = "LINK.BAD_IDENTITY"
	CodeTooLarge    = "LINK.TOO_LARGE"
)

var (
	// ErrQueueFull: the control queue to the peer stayed full until the
	// caller's deadline. Nothing was queued.
	ErrQueueFull = errcode.New(CodeQueueFull, "link: control queue full")
	// ErrUnavailable: the peer is not connected, or the connection broke
	// after a request was written, so its outcome is unknown.
	ErrUnavailable = errcode.New(CodeUnavailable, "link: peer unavailable")
	// ErrDeadline: the peer is connected but no reply came before the
	// caller's deadline.
	ErrDeadline = errcode.New(CodeDeadline, "link: deadline exceeded")
	// ErrUnknownPeer: no peer with that id was added (or it was removed).
	ErrUnknownPeer = errcode.New(CodeUnknownPeer, "link: unknown peer")
	// ErrClosed: the node (or the peer) was closed while the call waited.
	ErrClosed = errcode.New(CodeClosed, "link: closed")
	// ErrNoHandler: the receiver has no handler for the message kind.
	ErrNoHandler = errcode.New(CodeNoHandler, "link: no handler for kind")
	// ErrBadFrame: a frame from a peer failed validation.
	ErrBadFrame = errcode.New(CodeBadFrame, "link: bad frame")
	// ErrTooLarge: a payload (or replication batch) is bigger than
	// MaxFrameBytes. It is refused at the sender: the receiver would refuse
	// the stream, and the control stream would resend it forever.
	ErrTooLarge = errcode.New(CodeTooLarge, "link: frame too large")
	// ErrBadIdentity: a certificate does not name a valid node id.
	ErrBadIdentity = errcode.New(CodeBadIdentity, "link: bad node identity")
)

// PeerError is what Send, Call and Replicate return: which peer and stream
// failed, the link sentinel (errors.Is), and the cause (often a context
// error, so errors.Is(err, context.DeadlineExceeded) also holds).
type PeerError struct {
	Peer   string
	Stream Stream
	Err    error // one of the sentinels above
	Cause  error // may be nil
}

func (e *PeerError) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%v (peer %q, %s stream): %v", e.Err, e.Peer, e.Stream, e.Cause)
	}
	return fmt.Sprintf("%v (peer %q, %s stream)", e.Err, e.Peer, e.Stream)
}

// ErrorCode returns the code of the sentinel.
func (e *PeerError) ErrorCode() string { return errcode.Of(e.Err) }

// Unwrap exposes both the sentinel and the cause to errors.Is/As.
func (e *PeerError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// RemoteError is a failure reported by the peer's handler. Code is the
// handler error's code (errcode.Of), or LINK.REMOTE when it had none.
type RemoteError struct {
	Peer    string
	Kind    uint32
	Code    string
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("link: peer %q failed kind %d: %s: %s", e.Peer, e.Kind, e.Code, e.Message)
}

// ErrorCode returns the code the remote handler reported.
func (e *RemoteError) ErrorCode() string { return e.Code }

// Is lets errors.Is(err, ErrNoHandler) hold when the peer had no handler.
func (e *RemoteError) Is(target error) bool {
	return target == ErrNoHandler && e.Code == CodeNoHandler
}

func peerErr(peer string, s Stream, sentinel, cause error) error {
	return &PeerError{Peer: peer, Stream: s, Err: sentinel, Cause: cause}
}
