// Package hashring is a consistent-hash ring with virtual nodes: it maps a
// key to a leader node and to the next distinct nodes clockwise (replicas).
//
// # What it owns
//
// The key → node mapping only. It does no I/O, starts no goroutines and
// reads no clock; the router (package router) owns clients, failover and
// health. Ring also offers GetWhere, and BoundedLoad builds consistent
// hashing with bounded loads on it.
//
// # Compatible mode
//
// With the default hash (SHA1) a Ring places every key exactly where the
// TypeScript @shardwise/core ring does, given the same nodes, vnode counts
// and order of Add calls:
//
//  1. hash(s) is the first four bytes of SHA-1(UTF-8 s), big-endian.
//  2. A node with v vnodes has points hash("<id>-0") … hash("<id>-<v-1>").
//  3. A point already taken (by any node, the same one included) is salted:
//     "<id>-<i>#1", "#2", … until free. Existing points never move on Add,
//     so the ring depends on the order of Adds (as the TypeScript one does).
//     Remove moves no point either, as in the TypeScript ring: a label
//     salted against the removed node stays salted, so the ring depends on
//     the history of Adds and Removes. Without instead returns the ring that
//     adding the remaining nodes in their order builds, so two processes
//     with the same nodes in the same order have the same ring whatever
//     their histories (the router uses it). The two differ only on a
//     salted label, a 32-bit collision.
//  4. A key's leader owns the first point strictly greater than hash(key),
//     wrapping past the largest point to the smallest.
//  5. GetN walks clockwise from the leader's point and keeps each node the
//     first time it is met: leader first, at most Len nodes.
//
// XXHash is a faster hash that is not compatible; pass it to New when only
// Go processes share the ring.
//
// # Invariants
//
//   - Points are distinct; every node has exactly its vnode count of points.
//   - Readers see a whole snapshot, before or after a write, never a mix.
//     Get takes no lock, allocates nothing and costs O(log points).
//   - A change copies only what it touches: Add and Remove cost the
//     changed node's points, the buckets and lookup pages those touch, and
//     the two header tables (about 500 KiB at 100,000 points); Clone costs
//     nothing, and Without costs what Remove does except in the rare case
//     where it must rebuild.
//   - Salting is bounded: a hash with too small a range makes Add fail with
//     ErrNoFreePoint and leave the ring unchanged, instead of looping.
//   - A bad vnode count is a CONFIG.INVALID error (errcode.ErrConfigInvalid).
package hashring
