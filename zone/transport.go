package zone

import (
	"slices"

	"github.com/shardwise/shardwise/handoff"
	"github.com/shardwise/shardwise/link/replication"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

// Transport is the runtime's port to its peers: the only way the
// protocol reaches the network. It is implemented over the node link for
// production (package zone/zonelink) and by an in-memory network in which a test
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

// controlKinds are the zone's control message kinds.
var controlKinds = []uint32{wire.KindSubscribe, wire.KindIntents, wire.KindIntentsAck, wire.KindForward, wire.KindRoutes, wire.KindPlayer, wire.KindTerrain,
	handoff.KindTransfer, handoff.KindAck, handoff.KindRefuse, KindAbort,
	KindCheckpoint, KindAdoptQuery, KindAdoptAnswer}

// ControlKinds returns the control message kinds the runtime sends and
// must receive (a fresh slice): a transport over a network that
// dispatches by kind, as the link does, takes each of them for Arrivals.
func ControlKinds() []uint32 { return slices.Clone(controlKinds) }
