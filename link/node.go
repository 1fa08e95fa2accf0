package link

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/link/replication"
	"github.com/shardwise/shardwise/nodename"
	"github.com/shardwise/shardwise/proto/linkpb"
)

// Handler serves one control message kind. from is the sender's node id,
// taken from its verified certificate. For a request the returned bytes are
// the reply and a returned error reaches the caller as a *RemoteError with
// the error's code; for a one-way message both are discarded. ctx carries
// the caller's deadline and ends when the node closes, not when the stream
// that brought the frame breaks: an accepted frame has been acknowledged
// and will not be resent, so it must be handled to the end.
//
// Handlers for one sending peer run one at a time, in the order the peer
// sent: that is the ordering guarantee. A slow handler therefore delays
// every later frame from that peer; hand long work to your own goroutine.
type Handler func(ctx context.Context, from string, payload []byte) ([]byte, error)

// Entry is one replicated update: opaque payload about one entity, stamped
// with the entity's ownership epoch and its per-entity sequence. It is
// replication.Entry, a package of its own so that the zone runtime names
// entries without importing the link.
type Entry = replication.Entry

// ReplicationHandler receives each accepted batch from one peer, in seq
// order, one call at a time per peer. seq may skip (batches dropped at the
// sender or lost in a cut) but never repeats or goes back.
type ReplicationHandler func(from string, seq uint64, entries []Entry)

// Node is one end of the node link: it serves peers that dial it and keeps
// one connection to each peer it was told about.
type Node struct {
	cfg       Config
	id        string
	serverTLS *tls.Config
	metrics   *Metrics

	hmu      sync.RWMutex
	handlers map[uint32]Handler
	onRepl   ReplicationHandler

	mu      sync.Mutex
	peers   map[string]*peer
	closed  bool
	server  *grpc.Server
	lisAddr net.Addr

	inmu    sync.Mutex
	inbound map[string]*peerInbound // by dialing peer id

	rndMu sync.Mutex
	rnd   *rand.Rand

	// handlerCtx is the parent of every handler's ctx; Close cancels it
	// (before stopping the server, which waits for handlers).
	handlerCtx   context.Context
	stopHandlers context.CancelFunc
	wg           sync.WaitGroup
	closeOnce    sync.Once
}

// New validates cfg and returns a node that neither listens nor dials yet.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	leaf, err := x509.ParseCertificate(cfg.Certificate.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("link: %w", err)
	}
	id, err := NodeIDFromCert(leaf)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:      cfg,
		id:       id,
		metrics:  cfg.Metrics,
		handlers: map[uint32]Handler{},
		peers:    map[string]*peer{},
		inbound:  map[string]*peerInbound{},
		rnd:      rand.New(rand.NewPCG(cfg.Seed, 0x5eed11c)),
	}
	n.handlerCtx, n.stopHandlers = context.WithCancel(context.Background())
	n.serverTLS = &tls.Config{
		Certificates: []tls.Certificate{cfg.Certificate},
		ClientCAs:    cfg.ClusterCA,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
	if cfg.Reload != nil {
		n.serverTLS.Certificates = nil
		n.serverTLS.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cfg.Reload() }
	}
	return n, nil
}

// ID is this node's id, read from its certificate.
func (n *Node) ID() string { return n.id }

// Metrics returns the node's collectors (the user registers them).
func (n *Node) Metrics() *Metrics { return n.metrics }

// Handle registers h for control messages of kind, replacing any earlier
// handler. Register before peers can send, or early frames find none.
func (n *Node) Handle(kind uint32, h Handler) {
	n.hmu.Lock()
	n.handlers[kind] = h
	n.hmu.Unlock()
}

// OnReplication registers the receiver of replication batches.
func (n *Node) OnReplication(h ReplicationHandler) {
	n.hmu.Lock()
	n.onRepl = h
	n.hmu.Unlock()
}

func (n *Node) handler(kind uint32) Handler {
	n.hmu.RLock()
	defer n.hmu.RUnlock()
	return n.handlers[kind]
}

func (n *Node) replicationHandler() ReplicationHandler {
	n.hmu.RLock()
	defer n.hmu.RUnlock()
	return n.onRepl
}

// Listen binds addr (for example "127.0.0.1:0") and serves on it.
func (n *Node) Listen(addr string) (net.Addr, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("link: listen: %w", err)
	}
	if err := n.Serve(lis); err != nil {
		lis.Close()
		return nil, err
	}
	return lis.Addr(), nil
}

// Serve serves peers on lis in a goroutine the node owns; Close stops it.
// A node serves at most one listener.
func (n *Node) Serve(lis net.Listener) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return peerErr("", "", ErrClosed, nil)
	}
	if n.server != nil {
		return errors.New("link: node already serving")
	}
	n.server = grpc.NewServer(
		grpc.Creds(credentials.NewTLS(n.serverTLS)),
		grpc.MaxRecvMsgSize(n.cfg.MaxFrameBytes+1024),
		grpc.WaitForHandlers(true),
		// Allow the peers' keepalive pings (the default policy would
		// answer pings every 10s with GOAWAY).
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: n.cfg.KeepaliveInterval / 2, PermitWithoutStream: true}),
		// Ping silent dialers too: without it a partitioned dialer's
		// streams (and a reply blocked on its flow control) linger for
		// gRPC's default two hours.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: n.cfg.KeepaliveInterval, Timeout: n.cfg.KeepaliveInterval}),
	)
	linkpb.RegisterLinkServer(n.server, &service{n: n})
	n.lisAddr = lis.Addr()
	srv := n.server
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := srv.Serve(lis); err != nil {
			n.cfg.Logger.Warn("link: serve ended", "node", n.id, "err", err)
		}
	}()
	return nil
}

// Addr is the address Serve listens on, nil before Serve.
func (n *Node) Addr() net.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lisAddr
}

// AddPeer starts keeping a connection to the node id at addr. The peer
// must present a certificate naming id; anything else is refused.
func (n *Node) AddPeer(id, addr string) error {
	if !nodename.Valid(id) {
		return badID("id", id)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return peerErr(id, "", ErrClosed, nil)
	}
	if _, ok := n.peers[id]; ok {
		return fmt.Errorf("link: peer %q already added", id)
	}
	p := newPeer(n, id, addr)
	n.peers[id] = p
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		p.run()
	}()
	return nil
}

// RemovePeer stops the connection to id and waits for it. Calls waiting on
// it fail with ErrClosed; queued frames are dropped and counted.
func (n *Node) RemovePeer(id string) error {
	n.mu.Lock()
	p, ok := n.peers[id]
	delete(n.peers, id)
	n.mu.Unlock()
	if !ok {
		return peerErr(id, "", ErrUnknownPeer, nil)
	}
	p.stop()
	n.metrics.forgetPeer(id)
	return nil
}

// Peers lists the ids of the peers added.
func (n *Node) Peers() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	ids := make([]string, 0, len(n.peers))
	for id := range n.peers {
		ids = append(ids, id)
	}
	return ids
}

// Connected reports whether the connection to id is up right now.
func (n *Node) Connected(id string) bool {
	p := n.peer(id)
	return p != nil && p.connected.Load()
}

func (n *Node) peer(id string) *peer {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.peers[id]
}

// lookup finds peer id for stream s, or explains why there is none.
func (n *Node) lookup(id string, s Stream) (*peer, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, peerErr(id, s, ErrClosed, nil)
	}
	p, ok := n.peers[id]
	if !ok {
		return nil, peerErr(id, s, ErrUnknownPeer, nil)
	}
	return p, nil
}

// Replicate queues one batch for peer. It never blocks: when the peer's
// replication queue is full the oldest queued batch is dropped and counted
// (shardwise_link_dropped_total{reason="queue_full"}).
func (n *Node) Replicate(peer string, entries []Entry) error {
	p, err := n.lookup(peer, StreamReplication)
	if err != nil {
		return err
	}
	b := &linkpb.ReplicationBatch{Entries: make([]*linkpb.ReplicationEntry, len(entries))}
	for i, e := range entries {
		b.Entries[i] = &linkpb.ReplicationEntry{Entity: e.Entity, Epoch: e.Epoch, Sequence: e.Sequence, Kind: e.Kind, Payload: e.Payload}
	}
	if size := proto.Size(b); size > n.cfg.MaxFrameBytes {
		return peerErr(peer, StreamReplication, ErrTooLarge, fmt.Errorf("batch of %d bytes > MaxFrameBytes %d", size, n.cfg.MaxFrameBytes))
	}
	dropped, depth := p.repl.push(b)
	if dropped {
		n.metrics.dropped.WithLabelValues(peer, string(StreamReplication), DropQueueFull).Inc()
	}
	select {
	case <-p.stopped:
		// Raced with RemovePeer/Close: stop may already have emptied the
		// queue, so empty it again rather than leave an uncounted batch.
		if k := p.repl.clear(); k > 0 {
			n.metrics.dropped.WithLabelValues(peer, string(StreamReplication), DropClosed).Add(float64(k))
		}
		return peerErr(peer, StreamReplication, ErrClosed, nil)
	default:
	}
	p.replDepth.Set(float64(depth))
	return nil
}

// Send queues a one-way control message for peer, ordered after every
// message and request queued before it. When the queue is full it blocks
// until there is room or ctx ends (then ErrQueueFull); it never drops.
// A payload over MaxFrameBytes fails at once with ErrTooLarge.
func (n *Node) Send(ctx context.Context, peer string, kind uint32, payload []byte) error {
	p, err := n.lookup(peer, StreamControl)
	if err != nil {
		return err
	}
	if err := n.checkPayload(peer, payload); err != nil {
		return err
	}
	return p.enqueue(ctx, &outFrame{f: &linkpb.ControlFrame{Type: linkpb.ControlFrame_TYPE_MESSAGE, Kind: kind, Payload: payload}})
}

// Call sends a request of kind to peer and waits for its reply, at most
// until ctx's deadline. Errors: ErrQueueFull (never queued), ErrUnavailable
// (peer not connected at the deadline, or the connection broke after the
// request was written: outcome unknown), ErrDeadline (connected, no reply
// in time), ErrClosed, ErrTooLarge (payload over MaxFrameBytes), or a
// *RemoteError from the peer's handler.
func (n *Node) Call(ctx context.Context, peer string, kind uint32, payload []byte) ([]byte, error) {
	p, err := n.lookup(peer, StreamControl)
	if err != nil {
		return nil, err
	}
	if err := n.checkPayload(peer, payload); err != nil {
		return nil, err
	}
	return p.call(ctx, kind, payload)
}

// checkPayload refuses a control payload the receiver would refuse: on an
// exactly-once stream such a frame would be resent after every reconnect
// and block everything queued behind it. Peers share MaxFrameBytes.
func (n *Node) checkPayload(peer string, payload []byte) error {
	if len(payload) > n.cfg.MaxFrameBytes {
		return peerErr(peer, StreamControl, ErrTooLarge, fmt.Errorf("payload of %d bytes > MaxFrameBytes %d", len(payload), n.cfg.MaxFrameBytes))
	}
	return nil
}

// Close stops serving, stops every peer connection and returns after every
// goroutine the node started has returned. It is idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closed = true
		peers := n.peers
		n.peers = map[string]*peer{}
		srv := n.server
		n.mu.Unlock()
		for _, p := range peers {
			p.stop()
		}
		n.stopHandlers()
		if srv != nil {
			srv.Stop()
		}
		n.wg.Wait()
	})
	return nil
}

func (n *Node) jitter() float64 {
	n.rndMu.Lock()
	defer n.rndMu.Unlock()
	return n.rnd.Float64()
}

// deadlineNanos is ctx's deadline as wall-clock nanoseconds (context
// deadlines are wall time), 0 for none.
func deadlineNanos(ctx context.Context) int64 {
	if d, ok := ctx.Deadline(); ok {
		return d.UnixNano()
	}
	return 0
}

func expired(deadline int64) bool {
	return deadline != 0 && time.Now().UnixNano() > deadline
}
