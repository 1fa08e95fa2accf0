// Package cells partitions the torus world between nodes: a fixed grid of
// square regions, a versioned table saying which node owns each region, and
// the border rules derived from them.
//
// It owns:
//   - Grid: regions of RegionEdge metres (8 km by default, 16 × 16 = 256 on
//     the default 128 km world), the region of a position or chunk, region
//     bounds, and the eight neighbours of a region with the coordinate
//     offsets that carry a neighbour's positions across the seam;
//   - Table: an immutable, versioned region → node assignment with
//     validation, builders (NewTable, Uniform, WithOwners), OwnerOf, the
//     owners of a region's neighbours, peers, diffs, and a strict JSON form
//     (MarshalJSON / ParseTable);
//   - Bands: the ghost band (7 chunks), interaction band (1 chunk) and
//     handoff margin (1 chunk), BandShare, InForeignBand and
//     AppendForeignOwners (which foreign nodes must see an entity here;
//     OtherOwnerWithin and AppendOwnersWithin for an entity whose owner is
//     not its region's owner), and HandoffTarget, the handoff predicate
//     with hysteresis.
//
// It does not own how a table is stored, watched or fenced (coord does,
// in etcd), nor the handoff protocol or ghost replicas (package zone does,
// over packages handoff and replica).
//
// Invariants:
//   - The grid never moves: region edges lie on chunk boundaries and divide
//     the world, so every position and every chunk lies in exactly one
//     region, and RegionOf(p) == RegionOfChunk(ChunkOf(p)).
//   - Authority is derived: every node computes the same OwnerOf(p) from the
//     same table, with no lookup. A table only ever changes by being
//     replaced by one with a higher version.
//   - Every Table built by this package assigns every region to a valid
//     node name (nodename's rule, the one coord and link use too), and has
//     a version of at least 1.
//   - Everything is wrap-aware: every region has eight neighbours; a node
//     can be its own neighbour and one peer can border a region twice, at
//     two different offsets.
//   - Distances to regions are measured per axis (Chebyshev), like the
//     square view window of chunks, so a band is a square collar around a
//     border and its share of a region is exactly BandShare.
//   - OwnerOf, InForeignBand, OtherOwnerWithin and HandoffTarget do not
//     allocate; AppendForeignOwners and AppendOwnersWithin allocate only
//     when dst is too small.
//
// The package has no I/O, no goroutines and no clock, and imports only the
// standard library, errcode, nodename and torus.
package cells
