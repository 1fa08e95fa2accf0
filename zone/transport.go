package zone

import (
	"context"
	"sync"
	"time"

	"github.com/shardwise/shardwise/handoff"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/link/replication"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

// Transport is the runtime's port to its peers: the only way the
// protocol reaches the network. It is implemented over the node link for
// production (LinkTransport) and by an in-memory network in which a test
// decides every delivery (package zone/zonesim).
//
// The runtime calls Send and Replicate from the goroutine that steps it;
// they never block. What arrives is reported to the Arrivals the runtime
// gives Open, which only queue it for the next Step: the transport may
// call them from any goroutine (its own, the link's), or, in a
// simulation, from the goroutine that steps the runtime, between steps.
type Transport interface {
	// ID is the node's name on the transport: the runtime's Config.Name.
	ID() string
	// Open gives the transport the runtime's arrivals. The runtime calls
	// it once, in New, before any Send.
	Open(a Arrivals)
	// Send queues one control message for peer, without blocking. Control
	// messages to one peer are delivered in the order sent, each at most
	// once. A message the transport cannot queue is refused with an error
	// (the runtime counts it, and sends its subscriptions again); one
	// queued and later not taken by the network is reported through
	// Arrivals.Written.
	Send(peer string, kind uint32, payload []byte) error
	// Replicate sends one replication batch to peer on the lossy stream:
	// batches may be lost (the receiver sees a gap in their sequence and
	// resyncs), never reordered or duplicated as delivered.
	Replicate(peer string, entries []replication.Entry) error
	// Close stops what the transport started and is idempotent. It does
	// not close what the transport wraps (the link).
	Close() error
}

// Arrivals is the runtime's side of a Transport: what the network
// delivers and reports. Every method is safe for concurrent use and only
// queues, for the next Step to apply.
type Arrivals interface {
	// Control delivers a control message from peer.
	Control(from string, kind uint32, payload []byte)
	// Replication delivers a replication batch from peer with its
	// sequence (1, 2, … per sender incarnation and receiver).
	Replication(from string, seq uint64, entries []replication.Entry)
	// Written reports a control message queued by Send and then handed to
	// the network: taken (err nil) or not (a peer the network does not
	// know, a closing link). A subscription not taken is sent again.
	Written(peer string, kind uint32, err error)
}

// linkSendQueue is the control messages LinkTransport queues per peer.
const linkSendQueue = 4096

// linkSendTimeout bounds how long one control message waits for the
// link's queue.
const linkSendTimeout = 5 * time.Second

// outMsg is one control message queued for a peer's sender.
type outMsg struct {
	peer    string
	kind    uint32
	payload []byte
}

// LinkTransport is the Transport over a *link.Node: a queue and a sender
// goroutine per peer (started on its first message, joined by Close), so
// that a peer whose link queue is full (cut off, its lease still live)
// holds up nobody else's messages and never the world.
type LinkTransport struct {
	l *link.Node

	mu      sync.Mutex
	arr     Arrivals
	send    map[string]chan outMsg
	closed  bool
	ctx     context.Context // ends at Close: a Send blocked on a full link queue gives up
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closeMu sync.Once
}

var _ Transport = (*LinkTransport)(nil)

// NewLinkTransport returns the Transport over l. Config.Link wraps its
// link in one.
func NewLinkTransport(l *link.Node) *LinkTransport {
	t := &LinkTransport{l: l, send: make(map[string]chan outMsg)}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t
}

// ID is the link's node id.
func (t *LinkTransport) ID() string { return t.l.ID() }

// controlKinds are the zone's control message kinds.
var controlKinds = []uint32{wire.KindSubscribe, wire.KindIntents, wire.KindForward, wire.KindRoutes, wire.KindPlayer, wire.KindTerrain,
	handoff.KindTransfer, handoff.KindAck, handoff.KindRefuse, KindAbort,
	KindCheckpoint, KindAdoptQuery, KindAdoptAnswer}

// Open takes the link's handlers of the zone message kinds and its
// replication handler, and delivers what they receive to a.
func (t *LinkTransport) Open(a Arrivals) {
	t.mu.Lock()
	t.arr = a
	t.mu.Unlock()
	for _, k := range controlKinds {
		t.l.Handle(k, func(_ context.Context, from string, payload []byte) ([]byte, error) {
			a.Control(from, k, payload)
			return nil, nil
		})
	}
	t.l.OnReplication(a.Replication)
}

// Send queues m for peer's sender goroutine; a full queue refuses it
// (ErrSendQueueFull).
func (t *LinkTransport) Send(peer string, kind uint32, payload []byte) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrTransportClosed
	}
	ch, ok := t.send[peer]
	if !ok {
		ch = make(chan outMsg, linkSendQueue)
		t.send[peer] = ch
		t.wg.Add(1)
		go t.sender(ch)
	}
	t.mu.Unlock()
	select {
	case ch <- outMsg{peer: peer, kind: kind, payload: payload}:
		return nil
	default:
		return ErrSendQueueFull
	}
}

// Replicate hands the batch to the link (which never blocks on it).
func (t *LinkTransport) Replicate(peer string, entries []replication.Entry) error {
	return t.l.Replicate(peer, entries)
}

// sender writes one peer's control messages to the link in order, and
// reports each to the runtime.
func (t *LinkTransport) sender(send <-chan outMsg) {
	defer t.wg.Done()
	for {
		select {
		case <-t.ctx.Done():
			return
		case m := <-send:
			sctx, done := context.WithTimeout(t.ctx, linkSendTimeout)
			err := t.l.Send(sctx, m.peer, m.kind, m.payload)
			done()
			t.mu.Lock()
			a := t.arr
			t.mu.Unlock()
			if a != nil {
				a.Written(m.peer, m.kind, err)
			}
		}
	}
}

// Close stops the sender goroutines and waits for them; it does not close
// the link. Idempotent.
func (t *LinkTransport) Close() error {
	t.closeMu.Do(func() {
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		t.cancel()
		t.wg.Wait()
	})
	return nil
}
