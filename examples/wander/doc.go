// Package wander is a second, tiny zone module (zone.Module): N wanderers
// that walk between waypoints, each owned by an account. It exists so
// that the runtime's API is not shaped around the reference game alone,
// and to drive a cluster before handoff exists: no wanderer ever leaves
// the region it spawned in.
//
// What it has:
//   - the built-in Position, synced as WirePosition and sent every tick a
//     wanderer moves;
//   - Mood (public, WireMood) and Secret (owner only, WireSecret), each
//     redrawn every so many of the wanderer's own steps;
//   - Walk, the movement state (the spawn region, the leg, the waypoint,
//     the steps taken), handed over but never synced.
//
// It owns its components and its one system. The runtime owns the world,
// positions and owners, views, residency and the outbox.
//
// Invariants:
//  1. Wanderer i (0 ≤ i < Entities) has the id zone.DerivedID(i) and
//     belongs to account 1 + i mod Accounts, on every node and in every
//     run.
//  2. Its spawn point, its waypoints, its moods and its secrets are pure
//     functions of (Seed, i or its id, a counter the wanderer carries: its
//     leg or its steps), by a hash: no shared random source, whose draw
//     order would depend on the iteration order, which differs between a
//     node that holds every wanderer and one that holds some. No component
//     holds a tick number.
//  3. Setup creates exactly the wanderers whose spawn point lies in a
//     region the runtime owns (Table().OwnerOf(p) == Name()). The first
//     wanderer of each account (i < Accounts) is that account's viewer and
//     a residency anchor, on the node that created it.
//  4. A wanderer never leaves its spawn region: its spawn point and every
//     waypoint lie at least Margin from every border of that region, and
//     it walks in straight lines inside that rectangle (convex, so the
//     path stays in it; every step is clamped to it as well, against
//     rounding). The default Margin (64 m) is more than cells' default
//     handoff margin plus a chunk, so a wanderer is never a candidate for
//     a handoff. With Config.Roam set, instead, waypoints lie anywhere in
//     the square of that side around the spawn point, across borders and
//     seams (to exercise handoff), and the wanderer walks the torus's
//     shortest way.
//  5. Same Config and the same runtime configuration (clock included) →
//     the same batches, byte for byte.
//  6. Secret reaches only the owning account (outbox.Owner audience).
//  7. The system's query is built with zone.Query4, which excludes the
//     runtime's ghost and frozen markers itself.
package wander
