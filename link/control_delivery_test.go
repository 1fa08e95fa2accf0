package link_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/link"
)

// closeWatchListener reports every accepted connection the server closes.
type closeWatchListener struct {
	net.Listener
	closed chan struct{}
}

func (l *closeWatchListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &closeWatchConn{Conn: c, closed: l.closed}, nil
}

type closeWatchConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *closeWatchConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		select {
		case c.closed <- struct{}{}:
		default:
		}
	})
	return err
}

// A frame the receiver accepted is acknowledged and never resent, so the
// cut of the connection that brought it must not cancel its handler:
// otherwise a ctx-honouring handler (a handoff) gives up half-way and the
// frame is lost although the sender was told it arrived.
func TestCutDoesNotCancelHandlerOfAcceptedFrame(t *testing.T) {
	serverClosed := make(chan struct{}, 16)
	c := newCluster(t, clusterOpts{noPeers: true, wrap: func(id string, l net.Listener) net.Listener {
		if id != "b" {
			return l
		}
		return &closeWatchListener{Listener: l, closed: serverClosed}
	}}, "a", "b")
	entered := make(chan struct{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseAll) // runs before the nodes' Close
	cancelledEarly := make(chan bool, 1)
	var ctrl orderChecker
	first := true
	c.nodes["b"].Handle(kindSeq, func(ctx context.Context, from string, p []byte) ([]byte, error) {
		if first { // handlers for one peer run one at a time: no race
			first = false
			close(entered)
			select {
			case <-release:
				cancelledEarly <- ctx.Err() != nil
			case <-ctx.Done():
				cancelledEarly <- true
				return nil, ctx.Err() // what a ctx-honouring handler does
			}
		}
		ctrl.see(p)
		return nil, nil
	})
	c.peer("a", "b")
	ctx := ctxTimeout(t, 30*time.Second)
	if err := c.nodes["a"].Send(ctx, "b", kindSeq, seqPayload(0, 0)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the first frame never reached its handler")
	}
	c.net.Cut("a", "b")
	// The server has closed its side of the connection; gRPC cancels that
	// connection's streams right after. Reconnecting takes long enough
	// for that to have happened.
	select {
	case <-serverClosed:
	case <-ctx.Done():
		t.Fatal("b never closed the cut connection")
	}
	c.net.Heal("a", "b")
	c.waitConnected("a", "b")
	if err := c.nodes["a"].Send(ctx, "b", kindSeq, seqPayload(0, 1)); err != nil {
		t.Fatal(err)
	}
	releaseAll()
	if <-cancelledEarly {
		t.Fatal("the handler of an accepted frame was cancelled by the cut")
	}
	testenv.PollUntil(t, 10*time.Second, "both frames", func() bool { return ctrl.count() == 2 })
	ctrl.check(t)
	if got := c.nodes["b"].Metrics().Received("a", link.StreamControl); got != 2 {
		t.Fatalf("received %v control frames, want exactly 2", got)
	}
}

// A control frame the receiver must refuse would be resent after every
// reconnect and block the stream for good; it is refused at the sender,
// and frames after it still flow. Replication batches likewise.
func TestOversizedFramesAreRefusedAtTheSender(t *testing.T) {
	const limit = 1024
	c := newCluster(t, clusterOpts{tweak: func(cfg *link.Config) { cfg.MaxFrameBytes = limit }}, "a", "b")
	var ctrl orderChecker
	c.nodes["b"].Handle(kindSeq, func(ctx context.Context, from string, p []byte) ([]byte, error) {
		ctrl.see(p)
		return nil, nil
	})
	ctx := ctxTimeout(t, 30*time.Second)
	if err := c.nodes["a"].Send(ctx, "b", kindSeq, seqPayload(0, 0)); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, limit+1)
	if err := c.nodes["a"].Send(ctx, "b", kindSeq, big); !errors.Is(err, link.ErrTooLarge) || errcode.Of(err) != link.CodeTooLarge {
		t.Fatalf("oversized Send: %v, want ErrTooLarge", err)
	}
	if _, err := c.nodes["a"].Call(ctx, "b", kindEcho, big); !errors.Is(err, link.ErrTooLarge) {
		t.Fatalf("oversized Call: %v, want ErrTooLarge", err)
	}
	if err := c.nodes["a"].Replicate("b", []link.Entry{{Entity: 1, Payload: big}}); !errors.Is(err, link.ErrTooLarge) {
		t.Fatalf("oversized Replicate: %v, want ErrTooLarge", err)
	}
	if err := c.nodes["a"].Send(ctx, "b", kindSeq, seqPayload(0, 1)); err != nil {
		t.Fatal(err)
	}
	testenv.PollUntil(t, 10*time.Second, "the frames around the refused one", func() bool { return ctrl.count() == 2 })
	ctrl.check(t)
	if r := c.nodes["a"].Metrics().Reconnects("b"); r != 0 {
		t.Fatalf("%v reconnects: an oversized frame reached the wire", r)
	}
}

// Removing a peer and adding it back (a membership flap) starts its
// sequence numbers again from 1. The receiver still remembers the old
// numbering, so the new one must be a new sender incarnation, or the
// first frames after the re-add are silently dropped as duplicates.
func TestReAddedPeerIsANewSenderIncarnation(t *testing.T) {
	c := newCluster(t, clusterOpts{}, "a", "b")
	var ctrl orderChecker
	var mu sync.Mutex
	var batches int
	c.nodes["b"].Handle(kindSeq, func(ctx context.Context, from string, p []byte) ([]byte, error) {
		ctrl.see(p)
		return nil, nil
	})
	c.nodes["b"].OnReplication(func(from string, seq uint64, entries []link.Entry) {
		mu.Lock()
		batches++
		mu.Unlock()
	})
	ctx := ctxTimeout(t, 30*time.Second)
	for i := range 3 {
		if err := c.nodes["a"].Send(ctx, "b", kindSeq, seqPayload(0, i)); err != nil {
			t.Fatal(err)
		}
		if err := c.nodes["a"].Replicate("b", []link.Entry{{Entity: 1, Sequence: uint64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.PollUntil(t, 10*time.Second, "the first frames", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return ctrl.count() == 3 && batches == 3
	})
	if err := c.nodes["a"].RemovePeer("b"); err != nil {
		t.Fatal(err)
	}
	c.peer("a", "b")
	if err := c.nodes["a"].Send(ctx, "b", kindSeq, seqPayload(0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes["a"].Replicate("b", []link.Entry{{Entity: 1, Sequence: 3}}); err != nil {
		t.Fatal(err)
	}
	testenv.PollUntil(t, 10*time.Second, "the frames after the re-add", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return ctrl.count() == 4 && batches == 4
	})
	ctrl.check(t)
	m := c.nodes["b"].Metrics()
	if d := m.Dropped("a", link.StreamControl, link.DropDuplicate) + m.Dropped("a", link.StreamReplication, link.DropDuplicate); d != 0 {
		t.Fatalf("%v frames dropped as duplicates", d)
	}
}

// A reply that comes after its caller's deadline is dropped: it never
// reaches a later call, which gets its own reply.
func TestLateReplyDoesNotReachALaterCall(t *testing.T) {
	c := newCluster(t, clusterOpts{}, "a", "b")
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseAll)
	lateReplied := make(chan struct{})
	c.nodes["b"].Handle(kindEcho, func(ctx context.Context, from string, p []byte) ([]byte, error) {
		if string(p) == "late" {
			<-release // deliberately ignores ctx: its reply must come late
			defer close(lateReplied)
		}
		return p, nil
	})
	c.waitConnected("a", "b")
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := c.nodes["a"].Call(short, "b", kindEcho, []byte("late"))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !(errors.Is(err, link.ErrDeadline) || errors.Is(err, link.ErrUnavailable)) {
		t.Fatalf("late call: %v, want a deadline error", err)
	}
	releaseAll()
	<-lateReplied
	got, err := c.nodes["a"].Call(ctxTimeout(t, 30*time.Second), "b", kindEcho, []byte("second"))
	if err != nil || string(got) != "second" {
		t.Fatalf("call after a late reply: %q, %v", got, err)
	}
}

// A reply the caller's side would refuse (too large, or an error text
// protobuf cannot carry) fails that one call with a remote error; it does
// not break the connection under every other call.
func TestUnsendableRepliesFailOnlyTheirCall(t *testing.T) {
	const limit = 1024
	c := newCluster(t, clusterOpts{tweak: func(cfg *link.Config) { cfg.MaxFrameBytes = limit }}, "a", "b")
	c.nodes["b"].Handle(kindEcho, func(ctx context.Context, from string, p []byte) ([]byte, error) {
		switch string(p) {
		case "big":
			return make([]byte, limit+1), nil
		case "bad utf-8":
			return nil, errors.New("bad \xff byte")
		}
		return p, nil
	})
	ctx := ctxTimeout(t, 30*time.Second)
	_, err := c.nodes["a"].Call(ctx, "b", kindEcho, []byte("big"))
	var re *link.RemoteError
	if !errors.As(err, &re) || re.Code != link.CodeTooLarge {
		t.Fatalf("oversized reply: %v, want a RemoteError LINK.TOO_LARGE", err)
	}
	_, err = c.nodes["a"].Call(ctx, "b", kindEcho, []byte("bad utf-8"))
	if !errors.As(err, &re) || re.Code != link.CodeRemote {
		t.Fatalf("reply with invalid UTF-8 error text: %v, want a RemoteError LINK.REMOTE", err)
	}
	if got, err := c.nodes["a"].Call(ctx, "b", kindEcho, []byte("ok")); err != nil || string(got) != "ok" {
		t.Fatalf("call after: %q, %v", got, err)
	}
	if r := c.nodes["a"].Metrics().Reconnects("b"); r != 0 {
		t.Fatalf("%v reconnects: a reply broke the connection", r)
	}
}
