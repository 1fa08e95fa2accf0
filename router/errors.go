package router

import (
	"fmt"
	"strings"

	"github.com/shardwise/shardwise/errcode"
)

var (
	// ErrNoNodes is returned when no live node can serve a key. It is
	// declared as error, exactly as in the API contract of issue 3 (code
	// outside the repository may take its address as an *error).
	ErrNoNodes error = errcode.New("ROUTER.NO_NODES", "router: no live nodes")
	// ErrClosed is returned by every method after Close.
	ErrClosed = errcode.New("ROUTER.CLOSED", "router: closed")
	// ErrNodeRemoved is returned by AddNode when RemoveNode took the node
	// away while it was connecting; the new client has been closed.
	ErrNodeRemoved = errcode.New("ROUTER.NODE_REMOVED", "router: node removed while it was joining")
	// ErrAllReplicasFailed matches the *ExecuteError of a call that failed
	// on every replica.
	ErrAllReplicasFailed = errcode.New("ROUTER.ALL_REPLICAS_FAILED", "router: every replica failed")
	// ErrCloseTimeout is returned by Close when user callbacks were still
	// running after Options.CloseTimeout; they are left to finish alone.
	ErrCloseTimeout = errcode.New("ROUTER.CLOSE_TIMEOUT", "router: callbacks still running after the close timeout")
	// ErrProbeTimeout is the failure recorded for a probe that exceeded
	// Health.Timeout (it appears in logs and mark-down reasons).
	ErrProbeTimeout = errcode.New("ROUTER.PROBE_TIMEOUT", "router: health probe timed out")
	// ErrProbeStillRunning is the failure recorded when a probe is due
	// while the previous one, already timed out, has not returned: probes
	// never overlap, and a node whose check hangs must still be marked down.
	ErrProbeStillRunning = errcode.New("ROUTER.PROBE_STILL_RUNNING", "router: previous health probe has not returned")
)

// ConnectError is returned by AddNode when every connect attempt failed.
type ConnectError struct {
	Node     Node
	Attempts int
	Err      error // the last attempt's error
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("router: connect to %s failed after %d attempt(s): %v", e.Node.ID(), e.Attempts, e.Err)
}

// ErrorCode returns "ROUTER.CONNECT_FAILED".
func (e *ConnectError) ErrorCode() string { return "ROUTER.CONNECT_FAILED" }
func (e *ConnectError) Unwrap() error     { return e.Err }

// NodeFailure is one failed attempt of an Execute or ExecuteAll.
type NodeFailure struct {
	Node Node
	Err  error
}

// ExecuteError is returned when fn failed on every replica it was tried on.
// errors.Is(err, ErrAllReplicasFailed) holds, and errors.Is/As also see
// each node's error.
type ExecuteError struct {
	Key      string
	Failures []NodeFailure // in the order the nodes were tried, leader first
}

func (e *ExecuteError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "router: key %q failed on all %d replica(s):", e.Key, len(e.Failures))
	for _, f := range e.Failures {
		fmt.Fprintf(&b, " %s: %v;", f.Node.ID(), f.Err)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// ErrorCode returns the code of ErrAllReplicasFailed.
func (e *ExecuteError) ErrorCode() string { return ErrAllReplicasFailed.ErrorCode() }

// Is makes errors.Is(err, ErrAllReplicasFailed) true.
func (e *ExecuteError) Is(target error) bool { return target == ErrAllReplicasFailed }

// Unwrap exposes every node's error to errors.Is and errors.As.
func (e *ExecuteError) Unwrap() []error {
	errs := make([]error, len(e.Failures))
	for i, f := range e.Failures {
		errs[i] = f.Err
	}
	return errs
}
