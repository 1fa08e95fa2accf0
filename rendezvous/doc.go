// Package rendezvous places keys on nodes by rendezvous (highest random
// weight) hashing: every node gets a score for the key and the highest score
// owns it.
//
// # What it owns
//
// The key → node mapping for a fixed node list, and top-N for replicas. It
// does not track membership, connect to anything, or decide what happens to
// a scope whose owner changed; callers (netting's cluster node, the economy
// client) own that. No I/O, no goroutines, no clock.
//
// # Compatibility with economy-lab's scopeRouter
//
// Table built with New places every key exactly as the TypeScript
// scopeRouter does for the same node list:
//
//  1. The score of node n for key k is FNV-1a 64 over the UTF-16 code units
//     of n + "\n" + k (each 16-bit unit XORed in whole, not byte by byte),
//     then the murmur3 fmix64 finaliser. Score exposes it.
//  2. The highest unsigned score wins; on an exact tie the node earlier in
//     the list wins. So the order of the list matters only for ties.
//
// Go strings are UTF-8; they are turned into the UTF-16 units JavaScript
// would hold for the same text. Invalid UTF-8 bytes become U+FFFD, one per
// byte, as Go's range loop decodes them.
//
// # Weighted placement
//
// NewWeighted uses the logarithmic method: score = −w / ln(u), where u in
// (0, 1) comes from the compatible score. A node's share of keys is its
// weight over the total. With all weights equal it places exactly like New.
//
// # Invariants
//
//   - A Table is immutable and safe for concurrent use.
//   - The node list is non-empty and has no duplicates (CONFIG.INVALID
//     otherwise); weights are finite and positive.
//   - Removing a node moves only the keys it owned; adding one moves only the
//     keys it now wins.
//   - Owner does not allocate for keys up to 256 UTF-16 units.
package rendezvous
