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
// Invariants kept by a Generator:
//   - ids it returns are strictly increasing, so never reused and never equal;
//   - a clock that reads earlier than the last millisecond used is an error
//     (ErrClockBackwards), never a silently repeated or reordered id;
//   - when the 2048 sequence numbers of a millisecond are spent, Next waits
//     on the injected clock for the next millisecond instead of overflowing
//     into the node bits, without holding the generator while it waits
//     (TryNext answers ErrSequenceExhausted at once meanwhile);
//   - a time before Epoch or past the 45-bit range is an error.
//
// The package imports only the standard library, errcode and clock.
package entityid
