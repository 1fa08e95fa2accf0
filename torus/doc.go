// Package torus is the wrap-aware geometry of the world: a surface that
// wraps on x and y (a torus, 128 km × 128 km by default, 1 unit = 1 m) with
// a height axis z that never wraps.
//
// It owns positions (Pos), the normalisation of a position into the world's
// canonical range, the shortest signed delta and distance between two
// positions across the seam, chunks (32 m columns cut into 256 m slabs) and
// everything keyed by them: the chunk of a position, chunk normalisation,
// wrap-aware chunk deltas, Chebyshev chunk distance and iteration over the
// chunks within a radius. Every gameplay distance, area query, spatial index
// key and spawner cell key is meant to go through this package, so that
// nothing in the game silently uses plain Euclid on raw coordinates.
//
// It does not own regions, the region table or anything about nodes (see
// package cells), nor terrain or chunk contents.
//
// Invariants:
//   - A World is immutable once built by New or Default; the zero World is
//     not usable. World values are comparable with ==.
//   - Normalise maps every finite x into [0, Width) and y into [0, Height);
//     z is returned unchanged. Non-finite inputs give NaN, never a panic.
//     (An exact multiple of the extent may come back as −0, which == 0.)
//   - DeltaX/DeltaY return the shortest signed delta from a to b in
//     (−W/2, +W/2]: an exact half-world tie is +W/2. For inputs whose plain
//     difference already lies in that range the result is exactly b − a, so
//     wrap-awareness costs no precision for nearby objects.
//   - ChunkOf always returns a normalised chunk (X in [0, ChunksX), Y in
//     [0, ChunksY)); the slab is floor(z / SlabHeight), saturated to int32.
//   - ChunkOf(p) == NormaliseChunk(chunk by plain floor division of p), for
//     every p within ±2⁶³ chunk edges, negative coordinates included.
//     (ChunkOf divides before it wraps, so it never inherits the rounding of
//     Normalise, which can move a raw negative coordinate by one ulp.) For
//     non-finite p the chunk is unspecified but still normalised.
//   - Nothing here allocates except where a function's doc says so.
//
// The package has no I/O, no goroutines and no clock, and imports only the
// standard library and errcode.
package torus
