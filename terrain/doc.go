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
// A Chunk (column, revision, heights, edits) is what a client receives;
// AppendChunk encodes it and DecodeChunk decodes it (the format below).
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
// # Format
//
// A chunk encoding is what a gateway sends a client for every chunk column
// it holds: the base and the edits, for the client to apply (as Apply
// does). Every field is a byte or an unsigned LEB128 varint ("uvarint", as
// in Protocol Buffers: 7 bits a byte, least significant group first, the
// high bit set on every byte but the last), and every varint must be
// minimal (its last byte is not 0x00 unless it is the only one: 0 is the
// byte 0x00, never 0x80 0x00):
//
//	chunk    = version:byte x:uvarint y:uvarint revision:uvarint heights edits
//	heights  = delta:uvarint × 289           (Side × Side samples)
//	edits    = count:uvarint edit × count     (count ≤ MaxEdits, 1024)
//	edit     = kind:uvarint account:uvarint len:uvarint data:byte × len
//
// In order:
//
//   - version is Version, 1. Any other first byte is refused.
//   - x and y are the column: a normalised chunk position (torus.ChunkPos
//     without its slab), each at most 2³¹ − 1.
//   - revision is the world store's revision of the column's edits,
//     uninterpreted.
//   - heights are the 289 samples in decimetres, row by row from the
//     chunk's south edge (j = 0) and each row from its west edge (i = 0),
//     so sample (i, j) is the (17j + i)-th. Each is sent as its difference
//     d from a prediction, zigzag-mapped to an unsigned value u
//     (u = 2d for d ≥ 0, u = −2d − 1 for d < 0: 0, −1, 1, −2 … become 0, 1,
//     2, 3 …). The prediction of sample (i, j) is sample (i − 1, j) when
//     i > 0, else sample (0, j − 1) when j > 0, else 0. Every sample must
//     be an int16 (−32768 … 32767); u above 131070 is refused. Neighbouring
//     samples of smooth ground differ by a few decimetres, so heights take
//     about one byte a sample.
//   - each edit is its kind (1 … 65535; 0 is refused), the account that made
//     it (0 for none), and len bytes of data (len ≤ MaxEditData, 1024),
//     in revision order. A marker (kind 1) has exactly 2 bytes of data:
//     the cell, (y << 4) | x, then the marker's type (0 removes the
//     marker of the cell). The data of other kinds is the game's.
//
// Nothing may follow the last edit. The limits bound the whole encoding
// by MaxChunkBytes (1 064 826 bytes); a longer input is refused unread. A
// flat chunk without edits is 294 bytes; the
// default world's terrain is about the same, plus 5 to 14 bytes a marker
// (by the length of its account).
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
//  5. The encoding is canonical: DecodeChunk accepts exactly the bytes
//     AppendChunk writes for a Chunk that passes Check, so for every b it
//     accepts, AppendChunk of the result gives back b. It refuses anything
//     else with an error matching ErrMalformed (code TERRAIN.MALFORMED)
//     that names the field and its byte offset, never panics, and checks
//     every count against its limit and the bytes left before allocating
//     for it. Fuzzed, with a seed corpus in testdata/fuzz.
//  6. A decoded Chunk is in canonical form (no edits and no data are nil,
//     never empty non-nil slices), its edits Apply without error, and each
//     Edit.Data aliases the input with its capacity clipped: the caller
//     copies what it keeps beyond the input's life.
//  7. AppendChunk does not check: a value outside the limits is the
//     sender's bug, encoded anyway and refused by the receiver. A sender
//     that takes sizes from outside calls Chunk.Check first.
//
// The package imports only the standard library, account, errcode and
// torus.
package terrain
