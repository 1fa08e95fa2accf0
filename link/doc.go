// Package link is the node-to-node transport: gRPC over mutual TLS, with
// one connection from each node to each of its peers carrying two
// bidirectional streams.
//
//   - Replication: high rate, lossy by design. Replicate queues one batch
//     (one tick's updates for that peer, each an opaque payload stamped
//     with the entity's epoch and sequence) and never blocks; when the
//     per-peer queue is full the oldest batch is dropped and counted.
//   - Control: ordered, never silently dropped. Send (one-way) and Call
//     (request/reply, correlated by call id, bounded by the ctx deadline)
//     block while the queue is full and fail with LINK.QUEUE_FULL when the
//     deadline comes first.
//
// What it owns: the wire format (proto/link.proto), connections and
// reconnection with backoff and jitter on an injected clock, per-peer
// bounded queues, sequence numbers, node identity from certificates, the
// cluster CA helpers behind "shardwise certs" (a kept CA key, nodes added
// and certificates rotated with it), a node's certificate read again from
// disk at every handshake (CertReloader), and its Prometheus
// collectors. What it does not own: who the peers are (coord membership
// tells the caller, which calls AddPeer/RemovePeer), what the payloads
// mean, and the per-entity epoch fence (the link only carries Entry.Epoch;
// checking it is the job of the planned ghost and handoff layers).
//
// Invariants:
//
//  1. A peer's node id is read from its verified certificate (URI SAN
//     shardwise://node/<id>, equal to the CN), never from a message. The
//     id is a node name (nodename's rule, the same as coord's member names
//     and the region table's owners), checked wherever link takes one. A
//     peer without a certificate from the cluster CA is refused by TLS; a
//     dialed peer whose certificate names another node is refused too.
//  2. Every frame on a stream carries a seq, per stream and per sender
//     incarnation (a random number drawn at AddPeer, so a restarted node
//     or a re-added peer numbers afresh). A receiver accepts only seqs
//     above the last it accepted from that incarnation, so duplicates and
//     replays are dropped (and counted). Replication batches are numbered
//     when queued, so one dropped from a full queue (or lost in a cut)
//     leaves a gap the receiver sees.
//  3. Control frames are handled in the order they were queued, exactly
//     once, across reconnects. The receiver acknowledges cumulatively
//     (coalesced ACK frames); the sender keeps every frame written but not
//     acknowledged (at most ControlQueue, then Send blocks) and, on
//     reconnect, resends what follows the receiver's last accepted seq. A
//     hole in the seqs makes the receiver refuse the stream, and a frame
//     unacknowledged for AckTimeout makes the sender drop the connection:
//     both force that resend.
//  4. A Call whose request was written to a connection that then broke
//     fails at once with LINK.UNAVAILABLE (its outcome is unknown); a Call
//     still queued waits for the reconnect or its deadline. At the deadline
//     it fails with LINK.UNAVAILABLE if the peer is down, LINK.DEADLINE_EXCEEDED
//     if it is up.
//  5. Handlers for one sending peer run one at a time in seq order; a
//     replication handler likewise. A handler's ctx ends at its caller's
//     deadline or at Close, never because the stream that brought the
//     frame broke: an accepted frame is acknowledged and never resent, so
//     it must be handled to the end.
//  6. Nothing the receiver would refuse is queued: a control payload or a
//     replication batch over MaxFrameBytes fails at once with
//     LINK.TOO_LARGE (on the exactly-once stream it would otherwise be
//     resent after every reconnect and block the frames behind it). A
//     reply the caller would refuse becomes a LINK.TOO_LARGE remote error
//     for that call alone.
//  7. Close stops the server and every peer loop and returns after every
//     goroutine the node started has returned; it is idempotent.
//
// Deadlines travel as wall-clock nanoseconds, because context deadlines
// are wall time; the injected clock drives only the reconnect schedule.
package link
