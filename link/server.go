package link

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/proto/linkpb"
)

// inboundState is what a server remembers about one incarnation of one
// dialing peer: the last seq it accepted on each stream. The mutexes are
// held across accept-and-handle so that frames from one peer are handled
// one at a time, in order, even when an old and a new stream overlap
// briefly after a reconnect. They belong to the peer id, not the
// incarnation (see peerInbound), so that a stream of the old incarnation
// still draining cannot run a handler beside the new one.
type inboundState struct {
	replMu   *sync.Mutex
	replLast uint64
	// ctrlMu serialises accept-and-dispatch; ctrlLast is written only
	// under it but read without it when a stream opens, so that a slow
	// handler on an old stream cannot stall a reconnect's handshake.
	ctrlMu   *sync.Mutex
	ctrlLast atomic.Uint64
}

// peerInbound is the receiving side's memory of one dialing peer id: the
// state of its most recent incarnations, newest last, and the locks every
// incarnation of that peer shares.
type peerInbound struct {
	replMu, ctrlMu sync.Mutex
	states         []inboundIncarnation
}

type inboundIncarnation struct {
	incarnation uint64
	st          *inboundState
}

// keptIncarnations is how many incarnations per peer a receiver remembers.
// More than one, because the stream of an incarnation that has just ended
// (a restart, or RemovePeer+AddPeer) can open late, after its successor's;
// if that evicted the successor's state, the successor's next reconnect
// would start from nothing and frames it had sent but not yet seen
// acknowledged would be handled twice.
const keptIncarnations = 4

// inboundFor returns the state of (peer, incarnation), remembering at
// most keptIncarnations incarnations per peer (the oldest first seen is
// forgotten first).
func (n *Node) inboundFor(peer string, incarnation uint64) *inboundState {
	n.inmu.Lock()
	defer n.inmu.Unlock()
	pi := n.inbound[peer]
	if pi == nil {
		pi = &peerInbound{}
		n.inbound[peer] = pi
	}
	for _, x := range pi.states {
		if x.incarnation == incarnation {
			return x.st
		}
	}
	st := &inboundState{replMu: &pi.replMu, ctrlMu: &pi.ctrlMu}
	if len(pi.states) == keptIncarnations {
		pi.states = append(pi.states[:0], pi.states[1:]...)
	}
	pi.states = append(pi.states, inboundIncarnation{incarnation, st})
	return st
}

type service struct {
	linkpb.UnimplementedLinkServer
	n *Node
}

// streamIdentity is who opened the stream (from the verified client
// certificate) and the metadata it opened it with.
func streamIdentity(ctx context.Context) (from string, incarnation, resendFrom uint64, err error) {
	p, ok := grpcpeer.FromContext(ctx)
	if !ok {
		return "", 0, 0, status.Error(codes.Unauthenticated, "no peer")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.PeerCertificates) == 0 {
		return "", 0, 0, status.Error(codes.Unauthenticated, "no verified client certificate")
	}
	from, err = NodeIDFromCert(info.State.PeerCertificates[0])
	if err != nil {
		return "", 0, 0, status.Error(codes.Unauthenticated, err.Error())
	}
	md, _ := metadata.FromIncomingContext(ctx)
	incarnation, err = parseUintMD(md.Get(mdIncarnation))
	if err == nil && incarnation == 0 {
		err = ErrBadFrame.Wrap("no %s", mdIncarnation)
	}
	if err != nil {
		return "", 0, 0, status.Error(codes.InvalidArgument, err.Error())
	}
	resendFrom, err = parseUintMD(md.Get(mdResendFrom))
	if err != nil {
		return "", 0, 0, status.Error(codes.InvalidArgument, err.Error())
	}
	return from, incarnation, resendFrom, nil
}

func (s *service) Replication(stream grpc.BidiStreamingServer[linkpb.ReplicationBatch, linkpb.ReplicationBatch]) error {
	n := s.n
	from, inc, _, err := streamIdentity(stream.Context())
	if err != nil {
		return err
	}
	st := n.inboundFor(from, inc)
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	m := n.metrics
	received := m.received.WithLabelValues(from, string(StreamReplication))
	for {
		b, err := stream.Recv()
		if err != nil {
			return endOfStream(err)
		}
		if err := validateBatch(b); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		st.replMu.Lock()
		if b.Seq <= st.replLast {
			st.replMu.Unlock()
			m.dropped.WithLabelValues(from, string(StreamReplication), DropDuplicate).Inc()
			continue
		}
		if gap := b.Seq - st.replLast - 1; gap > 0 {
			m.dropped.WithLabelValues(from, string(StreamReplication), DropGap).Add(float64(gap))
		}
		st.replLast = b.Seq
		received.Inc()
		if h := n.replicationHandler(); h != nil {
			entries := make([]Entry, len(b.Entries))
			for i, e := range b.Entries {
				entries[i] = Entry{Entity: e.Entity, Epoch: e.Epoch, Sequence: e.Sequence, Kind: e.Kind, Payload: e.Payload}
			}
			h(from, b.Seq, entries)
		}
		st.replMu.Unlock()
	}
}

func (s *service) Control(stream grpc.BidiStreamingServer[linkpb.ControlFrame, linkpb.ControlFrame]) error {
	n := s.n
	from, inc, resendFrom, err := streamIdentity(stream.Context())
	if err != nil {
		return err
	}
	st := n.inboundFor(from, inc)
	m := n.metrics
	if cur := st.ctrlLast.Load(); resendFrom > 0 && resendFrom-1 > cur && st.ctrlLast.CompareAndSwap(cur, resendFrom-1) {
		// The dialer no longer holds frames we never acknowledged: we lost
		// our state (this node restarted) and the frames with it. Count
		// them if we had seen this incarnation before, and move on rather
		// than refuse the stream forever.
		if cur > 0 {
			m.dropped.WithLabelValues(from, string(StreamControl), DropLost).Add(float64(resendFrom - 1 - cur))
		}
	}
	last := st.ctrlLast.Load()
	if err := stream.SendHeader(metadata.Pairs(mdLastSeq, strconv.FormatUint(last, 10))); err != nil {
		return err
	}
	received := m.received.WithLabelValues(from, string(StreamControl))

	// Replies are sent by this goroutine and acks by the acker; sendMu
	// keeps their writes apart. Acks are cumulative, so the acker sends
	// only the latest and coalesces under load.
	var (
		sendMu   sync.Mutex
		replySeq uint64
		ackSeq   atomic.Uint64
		ackWake  = make(chan struct{}, 1)
		stop     = make(chan struct{})
		ackerEnd = make(chan struct{})
	)
	go func() {
		defer close(ackerEnd)
		var sentAck uint64
		for {
			select {
			case <-stop:
				return
			case <-ackWake:
			}
			a := ackSeq.Load()
			if a == sentAck {
				continue
			}
			sendMu.Lock()
			err := stream.Send(&linkpb.ControlFrame{Type: linkpb.ControlFrame_TYPE_ACK, Ack: a})
			sendMu.Unlock()
			if err != nil {
				return
			}
			sentAck = a
		}
	}()
	defer func() {
		close(stop)
		<-ackerEnd
	}()
	ack := func(seq uint64) {
		ackSeq.Store(seq)
		select {
		case ackWake <- struct{}{}:
		default:
		}
	}
	if last > 0 {
		ack(last)
	}
	for {
		f, err := stream.Recv()
		if err != nil {
			return endOfStream(err)
		}
		if err := validateInbound(f, n.cfg.MaxFrameBytes); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		st.ctrlMu.Lock()
		last := st.ctrlLast.Load()
		if f.Seq <= last {
			st.ctrlMu.Unlock()
			m.dropped.WithLabelValues(from, string(StreamControl), DropDuplicate).Inc()
			ack(last) // the dialer may be resending because it missed our ack
			continue
		}
		if f.Seq != last+1 {
			st.ctrlMu.Unlock()
			// A hole in an ordered stream: refuse it, so the dialer
			// reconnects and resends from its window.
			return status.Errorf(codes.DataLoss, "control seq %d, want %d", f.Seq, last+1)
		}
		st.ctrlLast.Store(f.Seq)
		received.Inc()
		// Accepted means it will be handled, in order, whatever happens
		// to this stream: ack now, so a slow handler does not trip the
		// sender's ack watchdog.
		ack(f.Seq)
		// Not the stream's ctx: the frame is acknowledged, so a cut now
		// must not cancel its handler (nothing would ever resend it).
		reply := n.dispatch(n.handlerCtx, from, f)
		st.ctrlMu.Unlock()
		if reply != nil {
			sendMu.Lock()
			replySeq++
			reply.Seq = replySeq
			err := stream.Send(reply)
			sendMu.Unlock()
			if err != nil {
				return err
			}
		}
	}
}

// maxErrorMessage bounds the text of a remote error on the wire: it only
// explains, the code is what callers match.
const maxErrorMessage = 4 << 10

// wireString makes s fit a proto3 string field: at most limit bytes and
// valid UTF-8 (protobuf refuses to marshal anything else, which would end
// the stream and lose the reply).
func wireString(s string, limit int) string {
	if len(s) > limit {
		s = s[:limit]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func endOfStream(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// dispatch runs the handler for f and returns the reply to send, if any.
func (n *Node) dispatch(ctx context.Context, from string, f *linkpb.ControlFrame) *linkpb.ControlFrame {
	m := n.metrics
	isRequest := f.Type == linkpb.ControlFrame_TYPE_REQUEST
	if isRequest && expired(f.DeadlineUnixNano) {
		// The caller has already given up; running it now could only do
		// harm the caller cannot see.
		m.dropped.WithLabelValues(from, string(StreamControl), DropExpired).Inc()
		return nil
	}
	h := n.handler(f.Kind)
	if h == nil {
		if !isRequest {
			m.dropped.WithLabelValues(from, string(StreamControl), DropNoHandler).Inc()
			n.cfg.Logger.Warn("link: no handler for one-way message", "node", n.id, "from", from, "kind", f.Kind)
			return nil
		}
		return &linkpb.ControlFrame{Type: linkpb.ControlFrame_TYPE_REPLY, CallId: f.CallId, Kind: f.Kind,
			ErrorCode: CodeNoHandler, ErrorMessage: ErrNoHandler.Error()}
	}
	hctx := ctx
	if f.DeadlineUnixNano != 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithDeadline(ctx, time.Unix(0, f.DeadlineUnixNano))
		defer cancel()
	}
	out, err := h(hctx, from, f.Payload)
	if !isRequest {
		if err != nil {
			n.cfg.Logger.Warn("link: one-way handler failed", "node", n.id, "from", from, "kind", f.Kind, "err", err)
		}
		return nil
	}
	reply := &linkpb.ControlFrame{Type: linkpb.ControlFrame_TYPE_REPLY, CallId: f.CallId, Kind: f.Kind}
	if err == nil && len(out) > n.cfg.MaxFrameBytes {
		// The caller's side would refuse the frame and drop the whole
		// connection (failing every call on it); fail just this one.
		err = ErrTooLarge.Wrap("reply of %d bytes > MaxFrameBytes %d", len(out), n.cfg.MaxFrameBytes)
	}
	if err != nil {
		reply.ErrorCode = errcode.Of(err)
		if reply.ErrorCode == "" {
			reply.ErrorCode = CodeRemote
		}
		reply.ErrorMessage = wireString(err.Error(), maxErrorMessage)
		reply.ErrorCode = wireString(reply.ErrorCode, maxErrorMessage)
		return reply
	}
	reply.Payload = out
	return reply
}
