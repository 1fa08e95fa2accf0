// Package worldstore is the world store of a zone cluster: the durable state
// that outlives a session and a node. It holds two things:
//
//   - players: the last saved record of each account (position, the session
//     epoch that wrote it, and the game module's opaque state: experience,
//     its pet, …), saved at logout and every few seconds by the node that
//     simulates the player, loaded at login;
//   - chunk edits: the player edits of the terrain (the game module defines
//     them, for example placing a marker), one append-only log per chunk with
//     a revision, applied by every node that holds the chunk on top of the
//     base terrain.
//
// It owns the Store port (Players, ChunkEdits and Close), the limits and
// validation every implementation shares (ValidatePlayer, ValidateEdit,
// ValidateChunk), the errors, and Memory, the in-process implementation.
// Package worldstore/sqlworld is the SQLite and PostgreSQL implementation;
// worldstore/storetest is the contract suite both pass.
//
// It does not own when a player is saved (the zone node's save timer and
// logout path), what State or an Edit's Data mean (the game module), how
// an edit reaches the other nodes that hold its chunk (the zone's chunk
// subscriptions), or the session epoch itself (package directory issues it;
// this package only compares it).
//
// Invariants every implementation keeps:
//  1. A player record is written only by a session at least as new as the
//     one that wrote it, and never again by a session that ended:
//     SavePlayer with Epoch e applies when the stored epoch is < e, or = e
//     and the stored record is not Final (the periodic saves of one
//     session overwrite each other, and its logout's Final save overwrites
//     them), and otherwise changes nothing and returns a *StaleEpochError
//     (ErrStaleEpoch, WORLDSTORE.STALE_EPOCH; its Final field set when a
//     final record of e refused it). The compare and the write are one
//     atomic step, so of two racing sessions the newer one's record
//     survives, and of a session's final save and any other save of it
//     the final one survives, whatever the order. The order is the
//     store's, not the callers': a standby that adopts a player's master
//     from a checkpoint older than the player's logout and saves it under
//     the same session is refused however late the logout's save lands.
//     Final is read back by LoadPlayer.
//  2. A chunk's revision is the number of edits it has: 0 before the first,
//     and AppendEdit with expectRev r writes edit r+1 only when the
//     revision is r (compare-and-set), otherwise it changes nothing and
//     returns a *ConflictError (ErrConflict, WORLDSTORE.CONFLICT) carrying
//     the current revision. Of racing appenders with the same expectRev
//     exactly one wins; revisions have no gaps and no duplicates.
//  3. Edits(chunk, since) returns the chunk's revision rev and exactly the
//     edits since < Rev ≤ rev, in revision order: a caller that applies them
//     and remembers rev misses nothing and sees nothing twice.
//  4. Bad input is refused before anything is written, with an
//     *InvalidError (ErrInvalid, WORLDSTORE.INVALID) naming the field.
//     The limits are MaxStateBytes, MaxEditBytes, MaxEditsPerChunk and
//     MaxEpoch.
//  5. Stored bytes are the caller's copy: the store never keeps or returns
//     a slice the caller can still change. An empty State or Data reads
//     back as nil.
//  6. Saved times are the store's clock (the database's, for sqlworld),
//     never the caller's.
//  7. After Close every call returns ErrClosed (WORLDSTORE.CLOSED); Close
//     is idempotent.
//
// A chunk holds at most MaxEditsPerChunk edits; the next append fails with
// ErrChunkFull (WORLDSTORE.CHUNK_FULL). The cap bounds what a node reads
// when it takes a chunk (at most MaxEditsPerChunk × MaxEditBytes of data,
// 1 MiB) and what one player can pile onto one place. Folding a chunk's
// edits into a new base is the game module's business, not the store's.
//
// There is no "chunks changed since" query. A cluster-wide change sequence
// would either serialise every append on one counter row, or (a PostgreSQL
// sequence) hand out numbers that commit out of order, so that a reader
// holding "since 41" could miss edit 40 committed after it read. Nodes catch
// up per chunk instead: a node holding a chunk knows its revision and asks
// Edits(chunk, rev).
//
// Layer 1: imports account, torus, clock, errcode and the standard library.
package worldstore
