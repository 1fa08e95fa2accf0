package link

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/proto/linkpb"
)

// peer is the dialing side of one peer: its queues, its pending calls and
// the goroutine (run) that keeps one connection with both streams open.
type peer struct {
	n         *Node
	id, addr  string
	clientTLS *tls.Config

	repl      *batchQueue
	ctrl      chan *outFrame
	replDepth prometheus.Gauge
	ctrlDepth prometheus.Gauge

	// incarnation numbers this sender: random, fixed for the life of this
	// peer value. Per AddPeer rather than per Node, because a removed and
	// re-added peer starts its seqs from 1 again while the receiver still
	// remembers the old numbering.
	incarnation uint64

	// Owned by run and the writers it starts one connection at a time.
	ctrlSeq uint64
	window  []*linkpb.ControlFrame // control frames written and not yet acknowledged, for resend

	acked   atomic.Uint64 // highest ack from the server, written by readControl
	ackSeen chan struct{} // wakes writeControl after a new ack

	connected atomic.Bool
	callID    atomic.Uint64
	pmu       sync.Mutex
	pending   map[uint64]*pendingCall

	ctx      context.Context
	cancel   context.CancelFunc
	stopOnce sync.Once
	stopped  chan struct{} // closed when stopping starts
	done     chan struct{} // closed when run has returned
}

type outFrame struct {
	f    *linkpb.ControlFrame
	call *pendingCall // nil for one-way messages
}

type callResult struct {
	payload []byte
	err     error
}

type pendingCall struct {
	ch        chan callResult // capacity 1: the first result wins
	written   atomic.Bool     // the request went onto a stream
	abandoned atomic.Bool     // the caller stopped waiting
}

func (pc *pendingCall) finish(r callResult) {
	select {
	case pc.ch <- r:
	default:
	}
}

func newPeer(n *Node, id, addr string) *peer {
	ctx, cancel := context.WithCancel(context.Background())
	var b [8]byte
	crand.Read(b[:]) // never fails (it crashes the program instead)
	p := &peer{
		n:           n,
		id:          id,
		addr:        addr,
		incarnation: binary.LittleEndian.Uint64(b[:]) | 1, // never 0, which means "absent"
		repl:        newBatchQueue(n.cfg.ReplicationQueue),
		ctrl:        make(chan *outFrame, n.cfg.ControlQueue),
		replDepth:   n.metrics.queueDepth.WithLabelValues(id, string(StreamReplication)),
		ctrlDepth:   n.metrics.queueDepth.WithLabelValues(id, string(StreamControl)),
		pending:     map[uint64]*pendingCall{},
		ackSeen:     make(chan struct{}, 1),
		ctx:         ctx,
		cancel:      cancel,
		stopped:     make(chan struct{}),
		done:        make(chan struct{}),
	}
	p.clientTLS = &tls.Config{
		Certificates: []tls.Certificate{n.cfg.Certificate},
		RootCAs:      n.cfg.ClusterCA,
		MinVersion:   tls.VersionTLS13,
		// The chain and host name are verified by crypto/tls; this adds
		// that the server is the node we meant to reach, not just any
		// member of the cluster.
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return ErrBadIdentity.Wrap("peer sent no certificate")
			}
			got, err := NodeIDFromCert(cs.PeerCertificates[0])
			if err != nil {
				return err
			}
			if got != id {
				return ErrBadIdentity.Wrap("dialed %q, certificate names %q", id, got)
			}
			return nil
		},
	}
	if reload := n.cfg.Reload; reload != nil {
		p.clientTLS.Certificates = nil
		p.clientTLS.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return reload() }
	}
	return p
}

// stop ends run, waits for it, and fails everything still waiting.
func (p *peer) stop() {
	p.stopOnce.Do(func() {
		close(p.stopped)
		p.cancel()
		<-p.done
		if k := p.repl.clear(); k > 0 {
			p.n.metrics.dropped.WithLabelValues(p.id, string(StreamReplication), DropClosed).Add(float64(k))
		}
		p.drainControl()
		p.failPending(func(*pendingCall) bool { return true }, ErrClosed)
	})
}

// drainControl empties the control queue of a stopping peer: queued calls
// fail with ErrClosed, queued one-way frames are counted as dropped.
func (p *peer) drainControl() {
	for {
		select {
		case of := <-p.ctrl:
			if of.call != nil {
				of.call.finish(callResult{err: peerErr(p.id, StreamControl, ErrClosed, nil)})
			} else {
				p.n.metrics.dropped.WithLabelValues(p.id, string(StreamControl), DropClosed).Inc()
			}
		default:
			return
		}
	}
}

func (p *peer) failPending(match func(*pendingCall) bool, sentinel error) {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	for id, pc := range p.pending {
		if match(pc) {
			pc.finish(callResult{err: peerErr(p.id, StreamControl, sentinel, nil)})
			delete(p.pending, id)
		}
	}
}

func (p *peer) enqueue(ctx context.Context, of *outFrame) error {
	select {
	case <-p.stopped:
		return peerErr(p.id, StreamControl, ErrClosed, nil)
	default:
	}
	select {
	case p.ctrl <- of:
		return p.queued()
	default:
	}
	select {
	case p.ctrl <- of:
		// stop's drain makes room, so this can win against <-p.stopped.
		return p.queued()
	case <-ctx.Done():
		return peerErr(p.id, StreamControl, ErrQueueFull, ctx.Err())
	case <-p.stopped:
		return peerErr(p.id, StreamControl, ErrClosed, nil)
	}
}

// queued finishes a successful enqueue. A frame that got in after stop
// began would otherwise sit in a queue nobody reads, uncounted, while Send
// reported success: drain it (counted) and report ErrClosed instead.
func (p *peer) queued() error {
	select {
	case <-p.stopped:
		p.drainControl()
		return peerErr(p.id, StreamControl, ErrClosed, nil)
	default:
	}
	p.ctrlDepth.Set(float64(len(p.ctrl)))
	return nil
}

func (p *peer) call(ctx context.Context, kind uint32, payload []byte) ([]byte, error) {
	id := p.callID.Add(1)
	pc := &pendingCall{ch: make(chan callResult, 1)}
	p.pmu.Lock()
	p.pending[id] = pc
	p.pmu.Unlock()
	defer func() {
		p.pmu.Lock()
		delete(p.pending, id)
		p.pmu.Unlock()
	}()
	f := &linkpb.ControlFrame{
		Type:             linkpb.ControlFrame_TYPE_REQUEST,
		CallId:           id,
		Kind:             kind,
		DeadlineUnixNano: deadlineNanos(ctx),
		Payload:          payload,
	}
	if err := p.enqueue(ctx, &outFrame{f: f, call: pc}); err != nil {
		return nil, err
	}
	select {
	case r := <-pc.ch:
		return r.payload, r.err
	case <-ctx.Done():
		pc.abandoned.Store(true)
		if !p.connected.Load() {
			return nil, peerErr(p.id, StreamControl, ErrUnavailable, ctx.Err())
		}
		return nil, peerErr(p.id, StreamControl, ErrDeadline, ctx.Err())
	case <-p.stopped:
		return nil, peerErr(p.id, StreamControl, ErrClosed, nil)
	}
}

// run keeps one connection to the peer until stop, waiting between
// attempts on the node's clock.
func (p *peer) run() {
	defer close(p.done)
	cfg := p.n.cfg
	attempt := 0
	for {
		established, err := p.connectAndServe(p.ctx)
		if p.ctx.Err() != nil {
			return
		}
		if established {
			attempt = 0
		}
		cfg.Logger.Debug("link: connection to peer ended", "node", p.n.id, "peer", p.id, "established", established, "err", err)
		delay := backoffDelay(attempt, cfg.BackoffMin, cfg.BackoffMax, p.n.jitter())
		attempt++
		p.n.metrics.reconnects.WithLabelValues(p.id).Inc()
		if clock.Sleep(p.ctx, cfg.Clock, delay) != nil {
			return
		}
	}
}

// connectAndServe makes one connection, opens both streams, and pumps them
// until one fails. established reports whether both streams came up.
func (p *peer) connectAndServe(ctx context.Context) (established bool, err error) {
	cfg := p.n.cfg
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(p.clientTLS)),
		grpc.WithContextDialer(cfg.Dial),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.MaxFrameBytes + 1024)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: cfg.KeepaliveInterval, Timeout: cfg.KeepaliveInterval, PermitWithoutStream: true}),
		// Our loop owns the retry schedule (on the injected clock); gRPC's
		// own reconnect only matters within one attempt.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: cfg.BackoffMin, Multiplier: 1.6, Jitter: 0.2, MaxDelay: cfg.BackoffMax},
			MinConnectTimeout: cfg.ConnectTimeout,
		}),
	}
	if len(cfg.StreamInterceptors) > 0 {
		opts = append(opts, grpc.WithChainStreamInterceptor(cfg.StreamInterceptors...))
	}
	cc, err := grpc.NewClient("passthrough:///"+p.addr, opts...)
	if err != nil {
		return false, err
	}
	defer cc.Close()
	client := linkpb.NewLinkClient(cc)

	resendFrom := p.ctrlSeq + 1
	if len(p.window) > 0 {
		resendFrom = p.window[0].Seq
	}
	sctx := metadata.NewOutgoingContext(actx, metadata.Pairs(
		mdIncarnation, strconv.FormatUint(p.incarnation, 10),
		mdResendFrom, strconv.FormatUint(resendFrom, 10),
	))
	// Bound the setup in wall time: gRPC's transport runs on it anyway.
	setupTimer := time.AfterFunc(cfg.ConnectTimeout, cancel)
	ctrl, err := client.Control(sctx)
	if err != nil {
		setupTimer.Stop()
		return false, err
	}
	hdr, err := ctrl.Header()
	if err != nil {
		setupTimer.Stop()
		return false, err
	}
	lastSeq, err := parseUintMD(hdr.Get(mdLastSeq))
	if err != nil {
		setupTimer.Stop()
		return false, err
	}
	repl, err := client.Replication(sctx)
	if err == nil {
		_, err = repl.Header()
	}
	if !setupTimer.Stop() {
		return false, fmt.Errorf("link: connect to %s took longer than %v", p.addr, cfg.ConnectTimeout)
	}
	if err != nil {
		return false, err
	}

	p.connected.Store(true)
	cfg.Logger.Debug("link: connected", "node", p.n.id, "peer", p.id, "addr", p.addr)
	errc := make(chan error, 3)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); errc <- p.writeReplication(actx, repl) }()
	go func() { defer wg.Done(); errc <- p.writeControl(actx, ctrl, lastSeq) }()
	go func() { defer wg.Done(); errc <- p.readControl(ctrl) }()
	err = <-errc
	p.connected.Store(false)
	cancel()
	wg.Wait()
	// A request already written may or may not have run: its caller must
	// not wait for a reply that the broken stream can no longer bring.
	p.failPending(func(pc *pendingCall) bool { return pc.written.Load() }, ErrUnavailable)
	return true, err
}

func (p *peer) writeReplication(ctx context.Context, s grpc.BidiStreamingClient[linkpb.ReplicationBatch, linkpb.ReplicationBatch]) error {
	sent := p.n.metrics.sent.WithLabelValues(p.id, string(StreamReplication))
	for {
		b, depth, ok := p.repl.pop()
		if !ok {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-p.repl.signal:
			}
			continue
		}
		p.replDepth.Set(float64(depth))
		if err := s.Send(b); err != nil {
			return err // the batch is lost; replication is lossy by contract
		}
		sent.Inc()
	}
}

// errAckTimeout ends a connection whose peer stopped acknowledging control
// frames; reconnecting resends them.
var errAckTimeout = ErrUnavailable.Wrap("control frames unacknowledged for too long")

func (p *peer) writeControl(ctx context.Context, s grpc.BidiStreamingClient[linkpb.ControlFrame, linkpb.ControlFrame], lastSeq uint64) error {
	m := p.n.metrics
	cfg := p.n.cfg
	sent := m.sent.WithLabelValues(p.id, string(StreamControl))
	// Resend what the server has not accepted, oldest first, before
	// anything new: this is what keeps the stream ordered across a cut.
	p.forgetUpTo(lastSeq)
	for _, f := range p.window {
		if err := s.Send(f); err != nil {
			return err
		}
		sent.Inc()
	}
	// The watchdog runs while frames are unacknowledged and is pushed back
	// by every ack that makes progress. It catches the one loss a gap check
	// cannot: the last frame, with nothing after it to reveal the hole.
	var watchdog clock.Timer
	defer func() {
		if watchdog != nil {
			watchdog.Stop()
		}
	}()
	arm := func() {
		switch {
		case len(p.window) == 0 && watchdog != nil:
			watchdog.Stop()
			watchdog = nil
		case len(p.window) > 0 && watchdog == nil:
			watchdog = cfg.Clock.NewTimer(cfg.AckTimeout)
		case len(p.window) > 0:
			watchdog.Reset(cfg.AckTimeout)
		}
	}
	arm()
	for {
		in := p.ctrl
		if len(p.window) >= cfg.ControlQueue {
			in = nil // too much unacknowledged: let the queue fill, Send block
		}
		var expiredC <-chan time.Time
		if watchdog != nil {
			expiredC = watchdog.C()
		}
		var of *outFrame
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.ackSeen:
			before := len(p.window)
			p.forgetUpTo(p.acked.Load())
			if len(p.window) != before {
				arm()
			}
			continue
		case <-expiredC:
			return errAckTimeout
		case of = <-in:
		}
		p.ctrlDepth.Set(float64(len(p.ctrl)))
		if of.call != nil && (of.call.abandoned.Load() || expired(of.f.DeadlineUnixNano)) {
			m.dropped.WithLabelValues(p.id, string(StreamControl), DropExpired).Inc()
			continue
		}
		p.ctrlSeq++
		of.f.Seq = p.ctrlSeq
		p.window = append(p.window, of.f)
		if len(p.window) == 1 {
			arm()
		}
		if of.call != nil {
			of.call.written.Store(true)
		}
		if err := s.Send(of.f); err != nil {
			return err
		}
		sent.Inc()
	}
}

// forgetUpTo drops acknowledged frames from the front of the window.
func (p *peer) forgetUpTo(seq uint64) {
	i := 0
	for i < len(p.window) && p.window[i].Seq <= seq {
		p.window[i] = nil
		i++
	}
	p.window = p.window[i:]
}

func (p *peer) readControl(s grpc.BidiStreamingClient[linkpb.ControlFrame, linkpb.ControlFrame]) error {
	received := p.n.metrics.received.WithLabelValues(p.id, string(StreamControl))
	for {
		f, err := s.Recv()
		if err != nil {
			return err
		}
		if err := validateReply(f, p.n.cfg.MaxFrameBytes); err != nil {
			return err
		}
		if f.Type == linkpb.ControlFrame_TYPE_ACK {
			for {
				old := p.acked.Load()
				if f.Ack <= old || p.acked.CompareAndSwap(old, f.Ack) {
					break
				}
			}
			select {
			case p.ackSeen <- struct{}{}:
			default:
			}
			continue
		}
		received.Inc()
		p.pmu.Lock()
		pc, ok := p.pending[f.CallId]
		delete(p.pending, f.CallId)
		p.pmu.Unlock()
		if !ok {
			continue // the caller gave up, or a duplicate
		}
		if f.ErrorCode != "" {
			pc.finish(callResult{err: &RemoteError{Peer: p.id, Kind: f.Kind, Code: f.ErrorCode, Message: f.ErrorMessage}})
		} else {
			pc.finish(callResult{payload: f.Payload})
		}
	}
}
