// Package replica is the render-ghost store of an observer node: for each
// foreign entity in the chunks this node subscribes to, the last message of
// each public component type exactly as its owner sent it, indexed by the
// chunk the entity stands in.
//
// What it owns:
//
//   - Ghosts: entity id → (component type → the owner's component frame, in
//     outbox's wire format), the entity's stamp (epoch, sequence) and its
//     chunk. There are no component stores and nothing decodes a payload,
//     so no system can write a ghost: it changes only through Apply and
//     Replace.
//   - The chunk index (AppendResidents), keyed by chunks normalised on the
//     torus, so an observers-of or area lookup finds ghosts by chunk.
//   - The fence: each entity's (epoch, sequence), and a bounded memory of
//     the stamps of entities that vanished (tombstones), so a late or
//     duplicated message never moves a ghost back or brings it back.
//   - Gap detection on each source's batch sequence (Batch), and the
//     snapshot that repairs a gap (Replace).
//   - Appear bursts for local clients that subscribe later (AppendBurst),
//     in outbox's encoding, and lifecycle events (Drain) for the caller to
//     reindex ghosts in its interest.Visibility and tell its clients.
//   - Counters (Stats); the node turns them into metrics.
//
// What it does not own: subscribing to chunks or choosing whom to
// resubscribe (the zone runtime), the link, which components are public
// (the owner's outbox sends a node subscriber only PublicInRange frames: a
// node key is never an entity's owner or party member), who of the local
// clients sees a ghost (interest.Visibility), simulation ghosts (real ECS
// entities with a Ghost marker), and handoff.
//
// The update shapes. Update.Frames holds outbox frames, all of
// Update.Entity, in exactly one of three shapes:
//
//   - an appear burst (head and its component frames): the entity's whole
//     public state; it creates the ghost or replaces its state;
//   - one or more component frames (a delta): replaces those types; it
//     needs the ghost to exist (a delta for an unknown entity is an orphan,
//     counted, and means its appear was lost);
//   - one vanish frame: removes the ghost and leaves a tombstone.
//
// Frames are read one at a time with outbox.ReadFrame and checked as a
// whole before anything changes, so a malformed update changes nothing.
//
// Invariants:
//
//  1. A ghost's stamp only rises. An update whose stamp is not after the
//     ghost's (an older epoch, or the same epoch and a sequence not newer)
//     is ignored and counted as stale; so is one not after a remembered
//     tombstone. A newer epoch replaces the ghost's state with what the
//     update carries (another writer's older values are not kept). A
//     snapshot entry is refused only when strictly older: at the ghost's
//     own stamp it is the whole state a lost delta may have left behind.
//  2. Every ghost is in exactly one chunk's residents, the chunk of the
//     last update applied to it, normalised; a chunk with no ghosts has no
//     entry.
//  3. After Replace(chunk, entries) the chunk holds exactly the entries'
//     entities (less any entry a newer stamp fences off): ghosts of the
//     chunk that are not in the snapshot vanish, the others appear. So a
//     lost appear or vanish leaves no missing or zombie ghost once the
//     snapshot that follows the gap is applied.
//  4. Every change of a ghost's existence or chunk is one Event, in the
//     order it happened; nothing follows Go map order.
//  5. AppendBurst returns an appear head followed by the ghost's stored
//     frames, byte for byte as the owner sent them, in the order of the
//     last burst applied (types first seen in a later delta follow, in the
//     order they came).
//
// The caller's obligations:
//
//  1. For each replication batch from a source, call Batch(source, seq)
//     first, then Apply each update in order. A *GapError means messages
//     from that source were lost (or the source restarted): the batch is
//     still applied, and the caller resubscribes the chunks it holds from
//     that source.
//  2. A resubscribe's snapshot (every resident of the chunk, each as a
//     burst) goes to Replace at the point of the source's stream where the
//     owner took it: send it in the replication stream, after the updates
//     the owner sent before it. (A snapshot applied ahead of older updates
//     would be undone by them; one applied after newer ones would vanish
//     ghosts that had just arrived.) A lost snapshot shows as a gap like
//     any lost batch.
//  3. A chunk the node stops holding is cleared with Replace(chunk, nil).
//  4. Drain the events after each batch or snapshot, and feed them to the
//     node's Visibility (Reindex on Appeared and Moved, Remove on Vanished).
//  5. One goroutine owns a Store; it is not safe for concurrent use.
//
// The package has no I/O, no goroutines and no clock, and imports only the
// standard library, errcode, torus, interest and outbox (layer 0).
package replica
