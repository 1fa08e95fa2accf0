// Package zonecoord is a zone node's side of etcd: its membership and the
// regions it owns (Ownership, from Join), and the failover controller
// (RunFailover) that gives a dead node's regions to their standbys.
//
// It is its own package, above package zone, so that the runtime and the
// game modules written against it do not import etcd's client: a hosted
// node (package zone/zonehost) joins here and gives the runtime its
// Ownership as the zone.Territory; a simulation (zone/zonesim) gives it
// an in-memory one instead. The errors it returns are zone's (ZONE.FENCED,
// ZONE.NOT_OWNER, ZONE.NO_TABLE, ZONE.CLOSED), and which node takes a
// region (zone.Standby, zone.PlanFailover) is zone's pure derivation.
//
// What it owns:
//   - Ownership (Join): a coord registration with role "zone" under the
//     node's name (explicit, or "node-<id>" derived by coord), and the
//     region table the node holds, followed through coord's watch by one
//     goroutine the Ownership owns.
//   - Answers from the held table only: Table and Version, Owns and
//     OwnedRegions (this node's regions), OwnerOf (the owner of any
//     position, derived with cells.Table.OwnerOf, never looked up), and
//     CheckWrite, the write permission: a Grant naming the table version
//     and lease that allow it, or a coded error (zone.ErrFenced: ZONE.FENCED,
//     ZONE.NOT_OWNER with the owner to forward to, ZONE.NO_TABLE,
//     ZONE.CLOSED).
//   - Change notifications (JoinConfig.OnChange) with the old and new table
//     and the regions gained and lost; WaitVersion; Fenced and Context,
//     which end at the fence.
//   - Prometheus gauges (Collectors): owned regions, held table version,
//     fenced.
//   - The failover controller (RunFailover, FailoverConfig): every hosted
//     node campaigns in FailoverElection unless zonehost.HostConfig.
//     NoFailover; the one elected writes zone.PlanFailover's table when a
//     zone member's lease ends, compare-and-set on the version and fenced
//     by its leadership, so one write re-owns them however many
//     controllers there are.
//
// It does not own the table's storage, versions or compare-and-set
// (coord), its geometry and derivation rules (cells), the runtime that
// simulates the owned regions (zone), or the process (zonehost).
//
// Ownership invariants:
//  1. The node owns a region only while it holds a table version that gives
//     it the region: a region the operator gives it is not owned until the
//     watch delivered that version, and a region taken away stops being
//     owned the moment the newer version is installed, before OnChange
//     runs.
//     Across nodes this leaves a window during a move: the node gaining a
//     region may hold the new version while the node losing it still holds
//     the old one, and both answer Owns true. Holding versions cannot close
//     that window (the two nodes learn the version at different moments);
//     the handoff does, per entity, with its epoch fence: the losing node
//     hands its entities over once the gaining node's messages show the
//     new version, so the window can give no entity two writers; it can
//     let both nodes create something there (a den's stock, a spawn), which
//     callers must not do on the strength of Owns alone while a move is in
//     flight.
//  2. Held versions only go up, one table replaced whole (an atomic
//     pointer), so every answer reads one consistent version.
//  3. Once the lease is lost (coord closes Registration.Lost) the node owns
//     nothing: Owns reads coord's channel on every call, so there is no lag
//     of ours between coord giving up and Owns answering false, and
//     coord gives up a tenth of the TTL before etcd can free the node's
//     name (coord's invariant 2). CheckWrite returns *zone.FencedError from
//     then on; the fence never lifts.
//  4. A fenced node does not re-register: it must be restarted. Its name
//     and id may already belong to a new holder, its regions to other
//     nodes through a newer table, and everything it simulated is
//     unauthorised; a fresh process starts from the current table with a
//     fresh incarnation instead of trying to reconcile the old state.
//  5. The one goroutine Ownership starts is joined by Close, which is
//     idempotent and does not close the coord client it was given.
package zonecoord
