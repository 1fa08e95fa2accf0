// Package zonehost runs one zone node as its own process: Host builds the
// node's link from its certificates, joins coord (zonecoord.Join), follows
// the membership to add link peers and answer the runtime's fence, runs
// the failover controller (zonecoord.RunFailover), builds the runtime
// (zone.New) over that Ownership and a transport over the link
// (zonelink.LinkTransport), serves its Prometheus metrics and probes over
// HTTP and, with a gateway address, the players' WebSocket and the
// browser client, with the session directory (Redis or in-process) and
// the world store (SQL or in-process) it opens; then ticks the runtime on
// a clock until its context ends or the node is fenced. `shardwise zone`
// is Host behind flags (package zone/zonecli).
//
// It is the top of the zone's packages: it imports the runtime (zone),
// its ownership in etcd (zonecoord) and its transport over the link
// (zonelink), and none of them imports it, so a game module that imports
// package zone does not pull in gRPC, etcd's client, Redis, SQL or an
// HTTP server (the layering test in zone/layering_test.go keeps it so).
//
// What it owns:
//   - Host, HostConfig (validated without I/O, naming the field as
//     written), HostReady (the node as it starts ticking), HostReport
//     (one tick, to OnTick and the metrics).
//   - The node's metrics beyond its Ownership's gauges: tick, entities by
//     state and by region, render ghosts, handoffs, intents it could not
//     deliver by reason (shardwise_zone_*),
//     served with the link's, the gateway's and the Go runtime's at
//     /metrics, and /healthz and /readyz (internal/health).
//   - The membership follower: every other live zone member with a link
//     address is a link peer, and its lease is the one the runtime's
//     fence (zone.Config.Accept) lets through.
//
// It does not own the protocol (zone), the region table or the lease
// (zonecoord, coord), the link's connections (link) or the client
// protocol (gateway).
//
// Invariants:
//  1. Everything Host starts has stopped before it returns, in the order
//     Host's doc lists; nothing outlives the call.
//  2. The runtime is owned by the goroutine that called Host; OnReady and
//     OnTick run on it, and the gateway reaches the runtime only through
//     zone.Runtime.Post.
package zonehost
