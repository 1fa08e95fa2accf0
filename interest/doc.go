// Package interest decides who sees what on the torus: which chunks each
// subscriber holds, which entities stand in each chunk, what each
// subscriber must be told appeared or vanished after a tick, and which
// columns must be simulated.
//
// It owns four pieces, all single-goroutine, deterministic and free of I/O
// and clocks (layer 0: the standard library, account, errcode and torus
// only):
//
//   - Subscriptions[S]: per subscriber (an account.ID, a node, or the
//     Subscriber key that holds either; S is any comparable key) the announced set (what it asked for, through
//     Manifests) and the sent set (what it was delivered, through MarkSent);
//     per chunk its subscribers; per column the number of holdings. Hooks
//     fire on first subscriber, last subscriber, chunk sent, chunk unsent.
//   - View: the 11 × 11 × 3 volume around an anchor with a release margin,
//     and ViewManifest, the wrap-aware diff that keeps a subscriber's
//     announced set on it.
//   - Visibility[S, E]: residents per chunk, Reindex on move, appear/vanish
//     events per subscriber folded at Drain into one Delivery each.
//   - Residency: refcounts of holders per column (all clients together are
//     one holder, every simulation anchor another), committed once per tick.
//
// It does not own what a chunk's data is, how deliveries are encoded or
// sent (see package outbox), or the entity store (package ecs).
//
// Invariants:
//
//  1. Every chunk and column key is normalised on the torus before it is
//     stored or looked up; callers may pass any integer coordinates.
//  2. A subscriber is in a chunk's subscriber set iff the chunk is in its
//     sent set, and sent ⊆ announced. MarkSent of an unannounced or already
//     sent chunk, and Unsend of an unsent one, change nothing and fire no
//     hook, so column counts equal the number of (subscriber, chunk) pairs.
//  3. An entity is visible to a subscriber iff the subscriber holds the
//     entity's chunk. Every event Visibility records is a change of that
//     predicate, so folding a tick's events gives the net change: Appeared
//     and Vanished of a Delivery are disjoint, and an appear and a vanish
//     of the same entity within a tick cancel.
//  4. Residency changes counts immediately but materialises and
//     dematerialises only in Commit, so a column released and re-held
//     within a tick is never torn down (its entities keep their ids).
//  5. Iteration that produces output never follows Go map (or hash table)
//     order: whatever is collected from a table is sorted before it drives
//     hooks, deliveries or commits, so they come out in the same order for
//     the same calls.
//
// The caller's obligations, per tick:
//
//  1. Apply manifests (Apply, or ViewManifest then Apply) and MarkSent the
//     chunks it delivered.
//  2. Reindex every entity whose chunk may have changed; Remove destroyed
//     ones with a reason; Evict/Adopt for entities changing writer.
//  3. After the tick, Drain the Visibility and hand the deliveries to the
//     outbox; Commit the Residency and act on its changes.
package interest
