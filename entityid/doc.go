// Package entityid mints and decodes the 64-bit entity ids of the world.
//
// An id is a snowflake laid out, from the most significant bit down, as
//
//	45 bits  milliseconds since 2024-01-01T00:00:00Z (Epoch)
//	 8 bits  node part (0–255), leased so that no two live nodes share one
//	11 bits  sequence within that millisecond on that node (0–2047)
//
// It owns the layout, a Generator that mints ids for one node part, and the
// decode helpers (Time, Node, Seq). It does not own the lease of the node
// part (coord does); a node without one must not build a Generator.
//
// A Generator reads its injected clock (the wall clock by default) at
// every mint, so it starts from the wall time at boot, not from a
// configured instant: a node restarted with the same node part goes on
// above the ids of its previous run instead of minting them again.
//
// Invariants kept by a Generator:
//   - ids it returns are strictly increasing, so never reused and never equal;
//   - an id's millisecond is never later than the latest reading of the
//     clock: the generator never borrows time ahead of it;
//   - a clock that reads earlier than the last millisecond used (a wall
//     clock stepped back) is held at that millisecond: ids go on rising in
//     its sequence, and the time part resumes once the clock passes it. It
//     is not an error, because a node's clock may be stepped at any time
//     and minting must go on;
//   - when the 2048 sequence numbers of a millisecond are spent (held or
//     not), Next waits on the injected clock until it reads the next
//     millisecond instead of overflowing into the node bits, without
//     holding the generator while it waits (TryNext answers
//     ErrSequenceExhausted at once meanwhile); after a large step back
//     that wait lasts until the clock has caught up;
//   - a time before Epoch or past the 45-bit range is an error.
//
// Across restarts: the second invariant bounds every id of a run by the
// latest clock reading of that run, so a generator whose clock, at boot,
// reads a later millisecond than any reading of the previous run with the
// same node part mints only larger ids. Only a clock that reads earlier at
// boot than it did before the restart (stepped back while the node was
// down) can repeat ids; the package cannot detect that without storage.
//
// The package imports only the standard library, errcode and clock.
package entityid
