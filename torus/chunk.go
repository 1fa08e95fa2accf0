package torus

import (
	"iter"
	"math"
)

// ChunkPos addresses one chunk: a ChunkEdge × ChunkEdge column (X, Y) cut
// into SlabHeight-tall slabs (Slab). Normalised chunk positions (X in
// [0, ChunksX), Y in [0, ChunksY)) are the keys of every chunk-indexed map;
// ChunkOf and NormaliseChunk produce them. Slab is not bounded or wrapped.
//
// int32 keeps the key at 12 bytes; Config.Validate guarantees the chunk
// counts fit.
type ChunkPos struct {
	X, Y, Slab int32
}

// floorModInt returns v mod n in [0, n) for n > 0.
func floorModInt(v, n int) int {
	if uint(v) < uint(n) {
		return v
	}
	r := v % n
	if r < 0 {
		r += n
	}
	return r
}

// shortestInt maps a raw chunk difference onto (−n/2, n/2] (an exact tie on
// an even n gives +n/2, like the metre deltas).
func shortestInt(d, n int) int {
	r := floorModInt(d, n)
	if r > n/2 {
		r -= n
	}
	return r
}

// SlabOf returns floor(z / SlabHeight), saturated to the int32 range; NaN
// gives 0.
func (w World) SlabOf(z float64) int32 {
	s := math.Floor(z / w.slabHeight)
	switch {
	case s != s: // NaN
		return 0
	case s >= math.MaxInt32:
		return math.MaxInt32
	case s <= math.MinInt32:
		return math.MinInt32
	}
	return int32(s)
}

// ChunkX returns the normalised chunk column index of coordinate x:
// ChunkOf(p).X without the other axes.
//
// It floor-divides first and wraps the integer index after. Wrapping the
// coordinate first (adding the width to a negative x) could round a value
// just below a chunk boundary onto it; dividing first keeps the exact floor
// semantics. The index is exact for |x| below 2⁶³ chunk edges; beyond that,
// and for NaN or ±Inf, it is unspecified but still in range.
func (w World) ChunkX(x float64) int32 {
	return int32(floorModInt(int(math.Floor(x/w.chunkEdge)), w.chunksX))
}

// ChunkY returns the normalised chunk row index of coordinate y:
// ChunkOf(p).Y without the other axes. See ChunkX.
func (w World) ChunkY(y float64) int32 {
	return int32(floorModInt(int(math.Floor(y/w.chunkEdge)), w.chunksY))
}

// ChunkOf returns the normalised chunk that contains p. Negative coordinates
// round down: x = −0.5 lies in the last column, not in column 0.
func (w World) ChunkOf(p Pos) ChunkPos {
	return ChunkPos{
		X:    w.ChunkX(p.X),
		Y:    w.ChunkY(p.Y),
		Slab: w.SlabOf(p.Z),
	}
}

// NormaliseChunk floor-mods c.X into [0, ChunksX) and c.Y into [0, ChunksY);
// the slab is kept.
func (w World) NormaliseChunk(c ChunkPos) ChunkPos {
	return ChunkPos{
		X:    int32(floorModInt(int(c.X), w.chunksX)),
		Y:    int32(floorModInt(int(c.Y), w.chunksY)),
		Slab: c.Slab,
	}
}

// ChunkOrigin returns the corner of chunk c with the smallest coordinates
// (its west-south-bottom corner), after normalising c.
func (w World) ChunkOrigin(c ChunkPos) Pos {
	c = w.NormaliseChunk(c)
	return Pos{
		X: float64(c.X) * w.chunkEdge,
		Y: float64(c.Y) * w.chunkEdge,
		Z: float64(c.Slab) * w.slabHeight,
	}
}

// ChunkDelta returns the shortest chunk offset from a to b: wrap-aware on X
// and Y (each in (−n/2, n/2], a tie gives +n/2), plain difference on Slab.
// The inputs need not be normalised.
func (w World) ChunkDelta(a, b ChunkPos) (dx, dy, dslab int) {
	dx = shortestInt(int(b.X)-int(a.X), w.chunksX)
	dy = shortestInt(int(b.Y)-int(a.Y), w.chunksY)
	dslab = int(b.Slab) - int(a.Slab)
	return dx, dy, dslab
}

// ChunkDistance is the wrap-aware Chebyshev distance between the columns of
// a and b, in chunks: max(|dx|, |dy|). Slabs are ignored; view radii count
// slabs separately (ChunkDelta gives the slab difference). A client with
// view radius r holds exactly the columns with ChunkDistance ≤ r.
func (w World) ChunkDistance(a, b ChunkPos) int {
	dx, dy, _ := w.ChunkDelta(a, b)
	return max(abs(dx), abs(dy))
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// axisSpan returns where a wrap-aware window of radius r around c starts
// and how many cells it covers on an axis of n cells. A window as wide as
// the axis covers each cell once, starting at 0.
func axisSpan(c, r, n int) (start, count int) {
	if r >= n || 2*r+1 >= n {
		return 0, n
	}
	start = c - r
	if start < 0 {
		start += n
	}
	return start, 2*r + 1
}

// ChunksWithin yields every normalised chunk whose column lies within
// Chebyshev distance r of center's column and whose slab lies within slabs
// of center's slab, each exactly once, even when the window is wider than
// the world (then every column is yielded once). A negative r or slabs
// yields nothing; slabs beyond the int32 range are skipped. The order is
// slab, then row, then column, each ascending from the window's start
// (wrapping through the seam). The iterator does not allocate when ranged
// over directly.
func (w World) ChunksWithin(center ChunkPos, r, slabs int) iter.Seq[ChunkPos] {
	return func(yield func(ChunkPos) bool) {
		if r < 0 || slabs < 0 {
			return
		}
		c := w.NormaliseChunk(center)
		x0, nx := axisSpan(int(c.X), r, w.chunksX)
		y0, ny := axisSpan(int(c.Y), r, w.chunksY)
		sLo := max(int64(c.Slab)-int64(slabs), math.MinInt32)
		sHi := min(int64(c.Slab)+int64(slabs), math.MaxInt32)
		for s := sLo; s <= sHi; s++ {
			y := y0
			for range ny {
				x := x0
				for range nx {
					if !yield(ChunkPos{X: int32(x), Y: int32(y), Slab: int32(s)}) {
						return
					}
					if x++; x == w.chunksX {
						x = 0
					}
				}
				if y++; y == w.chunksY {
					y = 0
				}
			}
		}
	}
}

// ChunkCount returns how many chunks ChunksWithin(·, r, slabs) yields
// (ignoring int32 slab saturation): the size of a view volume.
func (w World) ChunkCount(r, slabs int) int {
	if r < 0 || slabs < 0 {
		return 0
	}
	_, nx := axisSpan(0, r, w.chunksX)
	_, ny := axisSpan(0, r, w.chunksY)
	return nx * ny * (2*slabs + 1)
}
