// Package terrain is the ground of the world: the base heightmap of every
// chunk column, a pure function of the world's seed, so that every node
// generates any chunk without asking another.
//
// # What it owns
//
// Generator, built by New from a seed and a torus.World: Base returns the
// Heights of a chunk's column, Side × Side samples (17 × 17, one every
// ChunkEdge/16 metres: 2 m on the default world) in decimetres above z = 0,
// from five octaves of value noise hashed from the seed and integer lattice
// coordinates.
//
// Edits on top: an Edit is what the world store keeps per chunk column
// (kind, data, author), in revision order. Terrain defines one kind, the
// reference: KindMarker, a Marker of a small type on one of the chunk's
// 16 × 16 heightmap cells. Apply lays edits over a base in order and
// returns the Surface a client shows; a marker replaces the marker of its
// cell, and type 0 removes it (last writer wins, by revision). Kinds from
// FirstGameKind up are a game module's own: Apply and the decoders carry
// them through untouched.
//
// It does not own where edits are stored or how they travel between nodes
// (the world store), the gateway that streams chunks to clients, nor what a
// game's own edit kinds mean. It does no I/O, starts no goroutines, reads no
// clock and keeps no mutable state.
//
// # Slabs
//
// Terrain is a property of a column: Base ignores ChunkPos.Slab, and every
// slab of a column has the same heights. A column's heights are absolute z
// (the default octaves keep them within ±176 m, so in slabs −1 and 0 of the
// default world); which part of the ground falls in which slab is the
// client's to cut.
//
// # Invariants
//
//  1. Deterministic: Base is a function of (seed, world, normalised column)
//     alone, computed in integer arithmetic only (64-bit products, a
//     128-bit division, arithmetic shifts), so it gives the same heights on
//     every node, platform and Go version. Base does not allocate.
//  2. Chunks tile: sample (i, j) of chunk (x, y) is the height at global
//     sample (16x + i, 16y + j), so a chunk's last column (i = 16) is its
//     east neighbour's first and its last row its north neighbour's first,
//     exactly, also across the seam of the torus.
//  3. The noise tiles the torus: each octave's lattice has a whole number of
//     cells around each axis (the number nearest the world's extent over
//     the octave's wavelength, at least one, at most one per sample), and
//     lattice indices wrap, so the terrain is as smooth across the seam as
//     anywhere: there is no cliff where the world wraps.
//  4. The algorithm (the octaves' wavelengths and amplitudes, the hash, the
//     smoothstep, the fixed point) is part of the world: changing it
//     changes the ground under every placed edit of every deployed world.
//     Golden tests pin it.
//
// The package imports only the standard library, account, errcode and
// torus.
package terrain
