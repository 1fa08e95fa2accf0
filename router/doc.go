// Package router routes keys to the nodes of a cache or database cluster
// and keeps a client per node: Router[C] picks a key's leader and replicas
// on a consistent-hash ring (package hashring) or by rendezvous hashing,
// runs the caller's function on them with failover, probes node health,
// and reconnects nodes that went down.
//
// It speaks no wire protocol. The caller's Connect opens a client of any
// type C (a go-redis client, a pgx pool, a net.Conn); the router only
// chooses which one to hand out. Its placement and defaults are those of
// the TypeScript @shardwise/core router, so a Go service and a TypeScript
// one given the same nodes place every key on the same node.
//
// # What it owns
//
//   - The node registry: a node is joining (first connect), live (on the
//     ring, with a client) or down (off the ring, reconnecting) from AddNode
//     until RemoveNode or Close.
//   - Failover: Execute tries the leader, then the next replicas; a failure
//     that ShouldMarkDown blames on the node marks it down.
//   - Multi-key calls: ExecuteMulti groups keys by leader and makes one
//     call per node (an MGET), failing over per node; ExecuteAllMulti makes
//     one call per node with every key it holds (an MSET);
//     ExecuteAllValues is ExecuteAll with each success's value.
//   - Health probes (optional), reconnects with jittered backoff, and the
//     goroutines that run them.
//   - Log events (log/slog) and Prometheus collectors (Collectors).
//
// It does not own replication consistency: writes through ExecuteAll are
// best effort, a replica that missed a write stays stale, and a node that
// comes back may hold old data. It does not share state between processes.
//
// # Invariants
//
//  1. One client per node: concurrent AddNode calls for a node share one
//     connect; AddNode of a node that is down leaves its reconnect in charge.
//  2. Route, RouteAll, Execute, ExecuteAll and the multi-key calls read one
//     immutable snapshot (placement + client table) with a single atomic
//     load; they take no lock, and Execute allocates nothing in steady
//     state. A call that sees a node fail flags its connection down (every
//     call skips it from then on, walking on along the placement as the
//     next one will) and hands the mark-down to the router's worker, so
//     failover never waits for a new placement.
//  3. A failure is acted on only if it came from the node's current client:
//     an error from a client replaced by a reconnect is ignored.
//  4. A node's reconnect loop and probes stop when it is removed or the
//     router closed; a connect that succeeds after that is closed, never
//     put on the ring.
//  5. Probes of a node never overlap. A probe failing after its node left,
//     or after Close, changes nothing. Failure counts belong to one
//     connection and start from zero on every join.
//  6. Disconnect runs on router goroutines, never on Execute's or Close's
//     path. The one exception is a client that AddNode connected but may
//     not keep (the node was removed or the router closed meanwhile): AddNode
//     closes it on its caller's goroutine before returning, because a
//     closed router may start no goroutine.
//  7. Close is idempotent and returns after every goroutine the router
//     started has stopped (or, for user callbacks that ignore their
//     context, after CloseTimeout, with ErrCloseTimeout). Every method
//     returns ErrClosed afterwards.
//  8. A rejoining node keeps the weight it was first added with and goes
//     last in join order; the ring is always the ring of the live nodes
//     added in join order.
//  9. A membership change costs the changed node's share of the placement,
//     not the whole placement: the ring and rendezvous placements are
//     derived from the previous one (IncrementalPlacement), and always equal
//     the placement built from scratch from the live nodes in join order.
//
// # Decisions that differ from the TypeScript router
//
//   - An error that ShouldMarkDown does not blame on the node, or one after
//     which the caller's ctx is done, is returned to the caller at once: no
//     replica is tried and nothing is marked down.
//   - Reconnect delays have equal jitter: attempt n waits a uniform draw
//     from [d/2, d], d = min(base·2ⁿ, max).
//   - Options.AttemptTimeout can bound each attempt of fn, so a hung leader
//     fails over instead of hanging the call.
package router
