package terrain

import (
	"math/bits"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

// Cells is the number of heightmap cells along each side of a chunk, and
// Side the number of samples: a chunk's heightmap has Side × Side samples
// on its cell corners, so its last row and column repeat the first row and
// column of the next chunk (package doc, invariant 2).
const (
	Cells = 16
	Side  = Cells + 1
)

// Heights is the heightmap of one chunk column: Side × Side heights in
// decimetres above z = 0, row by row from the chunk's south edge, each row
// from its west edge. Sample (i, j) is at index j*Side + i and lies at
// x = origin.X + i*ChunkEdge/Cells, y = origin.Y + j*ChunkEdge/Cells.
type Heights [Side * Side]int16

// At returns the height of sample (i, j) in decimetres; i and j are in
// [0, Side).
func (h *Heights) At(i, j int) int16 { return h[j*Side+i] }

// Metres returns the height of sample (i, j) in metres.
func (h *Heights) Metres(i, j int) float64 { return float64(h.At(i, j)) / 10 }

// octave is one layer of value noise: a lattice of wavelength metres (at
// least; it is stretched so that a whole number of cells fits the world)
// and an amplitude in decimetres.
type octave struct {
	wavelength int64 // metres
	amplitude  int64 // decimetres: this octave adds [−amplitude, +amplitude)
}

// octaves are the layers of every world. They are part of the
// compatibility contract (package doc, invariant 4): changing them changes
// every world's terrain. The amplitudes sum to 1758 dm, so heights lie in
// (−176 m, +176 m).
var octaves = [...]octave{
	{4096, 1200},
	{1024, 400},
	{256, 120},
	{64, 30},
	{16, 8},
}

// axis is the lattice of one octave along one axis: n cells over the
// world's period of p samples.
type axis struct {
	n uint64 // lattice cells around the world, in [1, p]
	p uint64 // samples around the world: chunks × Cells
}

// layer is one octave of one generator.
type layer struct {
	key       uint64 // hash key of the octave's lattice, from the seed
	amplitude int32
	x, y      axis
}

// Generator computes the base terrain of a world from its seed. It is
// immutable, so one Generator serves any number of goroutines.
type Generator struct {
	seed   uint64
	world  torus.World
	layers [len(octaves)]layer
}

// New returns the generator of the world w with the given seed. Every seed
// is valid; w must be a World built by torus.New or torus.Default.
func New(seed uint64, w torus.World) (*Generator, error) {
	if w == (torus.World{}) {
		return nil, errcode.Config("World", "the zero torus.World", "build it with torus.New or torus.Default")
	}
	g := &Generator{seed: seed, world: w}
	cfg := w.Config()
	for o, oct := range octaves {
		g.layers[o] = layer{
			key:       mix(seed ^ (uint64(o)+1)*0x9E3779B97F4A7C15),
			amplitude: int32(oct.amplitude),
			x:         newAxis(int64(cfg.Width), w.ChunksX(), oct.wavelength),
			y:         newAxis(int64(cfg.Height), w.ChunksY(), oct.wavelength),
		}
	}
	return g, nil
}

// newAxis fits a lattice of about wavelength metres to an extent of
// metres and chunks: the number of cells is the nearest whole number, at
// least 1 (so a lattice always tiles the world, invariant 3) and at most
// one per sample (finer noise than the samples could not be seen).
func newAxis(extent int64, chunks int, wavelength int64) axis {
	p := uint64(chunks) * Cells
	n := uint64(max(1, (extent+wavelength/2)/wavelength))
	return axis{n: min(n, p), p: p}
}

// Seed returns the seed g was built with.
func (g *Generator) Seed() uint64 { return g.seed }

// World returns the world g generates.
func (g *Generator) World() torus.World { return g.world }

// Base returns the base heightmap of chunk c's column: a pure function of
// the seed, the world and c's column. c need not be normalised; its slab is
// ignored. Base does not allocate.
func (g *Generator) Base(c torus.ChunkPos) Heights {
	c = g.world.NormaliseChunk(c)
	var acc [Side * Side]int32
	for o := range g.layers {
		g.layers[o].add(&acc, uint64(c.X)*Cells, uint64(c.Y)*Cells)
	}
	var h Heights
	for k, v := range acc {
		h[k] = int16(v) // |v| < 1758 (see octaves)
	}
	return h
}

// span is where the Side samples of a chunk fall on one axis of one
// octave's lattice: the first cell, and for each sample its cell relative
// to the first and its smoothed weight towards the next lattice point.
type span struct {
	first  uint64      // cell of sample 0, in [0, n)
	rel    [Side]uint8 // cell of sample i minus first, in [0, Cells]
	weight [Side]int64 // smoothstep of the position in the cell, in [0, 1<<16)
	cells  int         // lattice points needed: rel[Side-1] + 2
}

// locate fills s for the samples g0, g0+1, …, g0+Cells of axis a. Sample g
// lies at lattice coordinate g·n/p: cell ⌊g·n/p⌋ mod n, at fraction
// (g·n mod p)/p of it. The product can pass 2⁶⁴ on the largest worlds, so
// the first sample is divided in 128 bits and the rest step by n (n ≤ p, so
// each step crosses at most one cell boundary).
func (a axis) locate(s *span, g0 uint64) {
	hi, lo := bits.Mul64(g0, a.n)
	cell, frac := bits.Div64(hi, lo, a.p) // hi < p: g0 < p, so the quotient is below n
	s.first = cell % a.n
	rel := uint8(0)
	for i := range Side {
		if i > 0 {
			frac += a.n
			if frac >= a.p {
				frac -= a.p
				rel++
			}
		}
		s.rel[i] = rel
		s.weight[i] = smoothstep(int64((frac << 16) / a.p))
	}
	s.cells = int(rel) + 2
}

// smoothstep maps f in [0, 1<<16) to 3f² − 2f³ in the same fixed point:
// the weight of value noise, flat at the lattice points so the slope is
// continuous across cell edges.
func smoothstep(f int64) int64 {
	f2 := f * f >> 16
	return f2 * (3<<16 - 2*f) >> 16
}

// add adds layer l of the chunk whose first samples are gx0, gy0 (global
// sample indices on each axis) to acc.
func (l *layer) add(acc *[Side * Side]int32, gx0, gy0 uint64) {
	var sx, sy span
	l.x.locate(&sx, gx0)
	l.y.locate(&sy, gy0)
	// The lattice values this chunk needs: at most (Cells+2)² points,
	// usually 2×2 to 4×4, interpolated along x once per lattice row, so
	// each sample costs one interpolation along y.
	var rows [Cells + 2][Side]int32
	var lat [Cells + 2]int64
	for ry := range sy.cells {
		iy := (sy.first + uint64(ry)) % l.y.n
		for rx := range sx.cells {
			lat[rx] = latticeValue(l.key, (sx.first+uint64(rx))%l.x.n, iy)
		}
		for i := range Side {
			k := sx.rel[i]
			rows[ry][i] = int32(lerp(lat[k], lat[k+1], sx.weight[i]))
		}
	}
	amp := int64(l.amplitude)
	for j := range Side {
		south, north := &rows[sy.rel[j]], &rows[sy.rel[j]+1]
		wy := sy.weight[j]
		out := acc[j*Side : j*Side+Side]
		for i := range out {
			v := lerp(int64(south[i]), int64(north[i]), wy) // in [−1<<15, 1<<15)
			out[i] += int32((amp * v) >> 15)
		}
	}
}

// lerp returns a + (b − a)·w for w in [0, 1<<16), rounding towards −∞ (Go's
// >> on a signed integer is arithmetic, the same on every platform).
func lerp(a, b, w int64) int64 { return a + ((b-a)*w)>>16 }

// latticeValue is the noise value at lattice point (ix, iy) of the octave
// with the given key, in [−1<<15, 1<<15).
func latticeValue(key, ix, iy uint64) int64 {
	h := mix(mix(key^ix*0xC2B2AE3D27D4EB4F) ^ iy*0x165667B19E3779F9)
	return int64(h>>48) - (1 << 15)
}

// mix is the finaliser of MurmurHash3 (fmix64): a bijection of uint64 whose
// output bits each depend on every input bit.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xFF51AFD7ED558CCD
	h ^= h >> 33
	h *= 0xC4CEB9FE1A85EC53
	h ^= h >> 33
	return h
}
