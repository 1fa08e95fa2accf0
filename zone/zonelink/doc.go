// Package zonelink is the zone runtime's transport over the node link:
// LinkTransport implements zone.Transport on a *link.Node, for
// zone.Config.Transport.
//
// It is its own package so that package zone, and the game modules
// written against it, do not import the link and, through it, gRPC: the
// runtime knows only its Transport port, and a simulation
// (zone/zonesim) gives it an in-memory network instead.
//
// What it owns: a queue and a sender goroutine per peer (started on its
// first message, joined by Close), so that a peer whose link queue is
// full holds up nobody else's messages and never the world; the link's
// handlers of the zone's control kinds (zone.ControlKinds) and its
// replication handler, delivering into the runtime's zone.Arrivals.
//
// What it does not own: the link (its peers, certificates, connections:
// the host adds the peers and closes the link after the runtime), or what
// the messages mean (zone).
//
// Invariants:
//  1. Send never blocks: a full per-peer queue refuses the message
//     (zone.ErrSendQueueFull); one queued and later refused by the link is
//     reported through Arrivals.Written.
//  2. Control messages to one peer reach the link in the order sent.
//  3. Close stops and joins every goroutine the transport started, and is
//     idempotent; it does not close the link.
package zonelink
