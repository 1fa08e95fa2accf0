package zonelink

import (
	"context"
	"sync"
	"time"

	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/link/replication"
	"github.com/shardwise/shardwise/zone"
)

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

// LinkTransport is the zone.Transport over a *link.Node: a queue and a sender
// goroutine per peer (started on its first message, joined by Close), so
// that a peer whose link queue is full (cut off, its lease still live)
// holds up nobody else's messages and never the world.
type LinkTransport struct {
	l *link.Node

	mu      sync.Mutex
	arr     zone.Arrivals
	send    map[string]chan outMsg
	closed  bool
	ctx     context.Context // ends at Close: a Send blocked on a full link queue gives up
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closeMu sync.Once
}

var _ zone.Transport = (*LinkTransport)(nil)

// NewLinkTransport returns the transport over l, for zone.Config.Transport.
// The runtime closes it; the link stays the caller's to close, after the
// runtime.
func NewLinkTransport(l *link.Node) *LinkTransport {
	t := &LinkTransport{l: l, send: make(map[string]chan outMsg)}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t
}

// ID is the link's node id.
func (t *LinkTransport) ID() string { return t.l.ID() }

// Open takes the link's handlers of the zone message kinds and its
// replication handler, and delivers what they receive to a.
func (t *LinkTransport) Open(a zone.Arrivals) {
	t.mu.Lock()
	t.arr = a
	t.mu.Unlock()
	for _, k := range zone.ControlKinds() {
		t.l.Handle(k, func(_ context.Context, from string, payload []byte) ([]byte, error) {
			a.Control(from, k, payload)
			return nil, nil
		})
	}
	t.l.OnReplication(a.Replication)
}

// Send queues m for peer's sender goroutine; a full queue refuses it
// (zone.ErrSendQueueFull).
func (t *LinkTransport) Send(peer string, kind uint32, payload []byte) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return zone.ErrTransportClosed
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
		return zone.ErrSendQueueFull
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
