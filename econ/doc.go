// Package econ runs economy nodes: netting's ClusterNode as a long-lived
// member of a cluster whose node list follows etcd membership.
//
// It owns: one node's registration in coord (role "econ", its service
// address under Addrs["econ"]), the view (the live econ members the node
// routes scopes over), re-forming the node's netting.ClusterNode when the
// view changes, epoch rotation and the orphan sweep on timers of an injected
// clock, the fence on a lost lease, graceful close, the decoding of the
// service's requests (codec.go: bytes that are not a request are answered
// with a code, not by gRPC), and the money audit (Audit) any operator tool
// can call: the sums, and every accepted movement matched with the ledger
// postings that settle it. It does not own the netting rules
// (package netting), storage (netting.SharedStore: netting/sqlstore on
// SQLite or PostgreSQL, or netting.MemStore), or the transport that brings
// callers to a node (server.go and client.go, over gRPC).
//
// # Views and the re-forming barrier
//
// A view is the sorted set of live econ member names; its id is a digest of
// the names and their incarnations, so a node that died and came back under
// the same name is a new view. Scopes are placed on a view by rendezvous
// hashing (netting.ScopeRouter), so every node with the same view computes the
// same owner.
//
// Nodes learn of a membership change at different moments, and a scope whose
// owner changes must never have two writers. So a node serves a view only
// after every member of it has adopted it:
//
//  1. On a new view the node stops recording under the old one (its
//     ClusterNode is closed once the Records already in it have returned),
//     settles the old node's open sessions, and opens a ClusterNode for the
//     new view.
//  2. It then publishes the new view's id in its member record
//     (Meta["econ.view"], a write fenced by its lease).
//  3. It records under the new view only once every member of that view
//     publishes the same id. Until then Record waits (bounded by the
//     caller's context and Config.ReadyWait) and then answers ECON.NOT_READY,
//     which callers retry with the same movement key. A scope the new view
//     places on another node is redirected at once (SESSION.MISROUTED with
//     the owner), ready or not.
//
// Two nodes can therefore record the same scope only under two different
// views at once, and the later view's nodes wait for every one of its
// members, each of which stopped recording under every earlier view before
// publishing. A node missing from the later view has lost its lease, and a
// lost lease fences the node before etcd can expire it (coord.Registration):
// its ClusterNode is closed and it records nothing more.
//
// A dead node's open sessions are orphans: nobody writes them, and the sweep
// of any live node settles them once their last journal row is older than
// the sweep bound (at least 2·EpochMaxAge, netting's epoch-age law).
//
// # Escrows
//
// A trade's escrow (escrow.go: offers into it, one end key that decides,
// claims out of it) is decided by the economy within a bound even if the
// zone node deciding it never comes back: the escrow sweep of the node
// owning one of its offers' scopes cancels an escrow with no end
// EscrowBound after its first offer (refusing for ever the offers not yet
// answered, so the set it returns is final), pays the claims an ended
// escrow lacks EscrowBound after its end, and Record answers an end whose
// key the journal holds with other legs REJECTED (ESCROW.DECIDED): the
// first end recorded decides, once.
//
// # Goroutines
//
// Start launches five, all joined by Close (and Halt): the membership loop
// (the only writer of the view), the fence (it waits for a lost lease and
// stops the node at once, even while the loop is re-forming), the rotator
// (RotateDue every RotateEvery), the sweeper (SweepOrphans every
// SweepEvery) and the escrow sweeper (SweepEscrows every EscrowEvery). Close is graceful: it stops recording, settles the node's
// open sessions and ends its registration, so the others re-form without it
// at once rather than after its lease expires. Halt stops as a crash would:
// nothing settled, the registration revoked.
package econ
