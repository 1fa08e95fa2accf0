package torus

import (
	"math"

	"github.com/shardwise/shardwise/errcode"
)

// Defaults of the world, in metres (1 position unit = 1 m).
const (
	DefaultWidth      = 128_000
	DefaultHeight     = 128_000
	DefaultChunkEdge  = 32
	DefaultSlabHeight = 256
)

// MaxExtent bounds Width and Height. At 2³² m a float64 coordinate still
// resolves about a micrometre.
const MaxExtent int64 = 1 << 32

// Config describes a world. The zero value is the default world. Defaults
// are filled by WithDefaults and nowhere else.
type Config struct {
	// Width is the extent of x in metres; x wraps at Width.
	// 0 means DefaultWidth (128 000). It must be a multiple of ChunkEdge.
	Width int `json:"width"`
	// Height is the extent of y in metres; y wraps at Height.
	// 0 means DefaultHeight (128 000). It must be a multiple of ChunkEdge.
	Height int `json:"height"`
	// ChunkEdge is the side of a chunk column in metres.
	// 0 means DefaultChunkEdge (32).
	ChunkEdge int `json:"chunkEdge"`
	// SlabHeight is the height of a chunk slab in metres (z never wraps).
	// 0 means DefaultSlabHeight (256).
	SlabHeight int `json:"slabHeight"`
}

// DefaultConfig returns the default world: 128 km × 128 km, 32 m chunks,
// 256 m slabs.
func DefaultConfig() Config { return Config{}.WithDefaults() }

// WithDefaults returns c with every zero field replaced by its default.
func (c Config) WithDefaults() Config {
	if c.Width == 0 {
		c.Width = DefaultWidth
	}
	if c.Height == 0 {
		c.Height = DefaultHeight
	}
	if c.ChunkEdge == 0 {
		c.ChunkEdge = DefaultChunkEdge
	}
	if c.SlabHeight == 0 {
		c.SlabHeight = DefaultSlabHeight
	}
	return c
}

// Validate checks c after defaults are applied. Every error is an
// errcode.Config naming the field and its value.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if c.ChunkEdge < 0 {
		return errcode.Config("ChunkEdge", c.ChunkEdge, "must be positive")
	}
	if c.SlabHeight < 0 {
		return errcode.Config("SlabHeight", c.SlabHeight, "must be positive")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Width", c.Width}, {"Height", c.Height}} {
		switch {
		case f.v < 0:
			return errcode.Config(f.name, f.v, "must be positive")
		case int64(f.v) > MaxExtent:
			return errcode.Config(f.name, f.v, "must be at most 2^32 metres")
		case f.v%c.ChunkEdge != 0:
			return errcode.Config(f.name, f.v, "must be a multiple of ChunkEdge")
		case f.v/c.ChunkEdge > math.MaxInt32:
			return errcode.Config(f.name, f.v, "must hold at most 2^31-1 chunks of ChunkEdge")
		}
	}
	return nil
}

// World is a validated, immutable world description. Obtain one from New
// or Default; the zero World is not usable. Worlds compare with ==.
//
// It holds only four floats and two ints, so the register ABI passes it in
// registers: value receivers cost no copy through memory on the hot path.
type World struct {
	width, height         float64 // extents: x wraps at width, y at height
	chunkEdge, slabHeight float64
	chunksX, chunksY      int
}

// New validates cfg (after defaults) and returns the world it describes.
func New(cfg Config) (World, error) {
	if err := cfg.Validate(); err != nil {
		return World{}, err
	}
	cfg = cfg.WithDefaults()
	w := World{
		width:      float64(cfg.Width),
		height:     float64(cfg.Height),
		chunkEdge:  float64(cfg.ChunkEdge),
		slabHeight: float64(cfg.SlabHeight),
		chunksX:    cfg.Width / cfg.ChunkEdge,
		chunksY:    cfg.Height / cfg.ChunkEdge,
	}
	return w, nil
}

// Default returns the default world (DefaultConfig).
func Default() World {
	w, err := New(Config{})
	if err != nil {
		// The defaults are constants checked by the tests; this cannot happen.
		panic(err)
	}
	return w
}

// Config returns the effective configuration (defaults filled in).
func (w World) Config() Config {
	// Every field is an integer below 2^32, so the floats hold them exactly.
	return Config{
		Width:      int(w.width),
		Height:     int(w.height),
		ChunkEdge:  int(w.chunkEdge),
		SlabHeight: int(w.slabHeight),
	}
}

// Width is the extent of x in metres.
func (w World) Width() float64 { return w.width }

// Height is the extent of y in metres.
func (w World) Height() float64 { return w.height }

// ChunkEdge is the side of a chunk column in metres.
func (w World) ChunkEdge() float64 { return w.chunkEdge }

// SlabHeight is the height of a chunk slab in metres.
func (w World) SlabHeight() float64 { return w.slabHeight }

// ChunksX is the number of chunk columns along x (4000 by default).
func (w World) ChunksX() int { return w.chunksX }

// ChunksY is the number of chunk columns along y (4000 by default).
func (w World) ChunksY() int { return w.chunksY }

// Pos is a position in metres. x and y wrap at the world's width and
// height; z is height and never wraps. A Pos need not be normalised: every
// function here accepts raw coordinates, and Normalise gives the canonical
// form used as a key.
type Pos struct {
	X, Y, Z float64
}

// Finite reports whether every coordinate is a finite number. Positions
// that arrive from outside (a client, a decoder) should be checked with it:
// the geometry maps non-finite input to NaN or to an arbitrary chunk.
func (p Pos) Finite() bool {
	return !math.IsNaN(p.X) && !math.IsInf(p.X, 0) &&
		!math.IsNaN(p.Y) && !math.IsInf(p.Y, 0) &&
		!math.IsNaN(p.Z) && !math.IsInf(p.Z, 0)
}

// floorMod returns v mod n in [0, n) with the sign of the divisor (floor
// semantics). The common cases (in range, or one world away) are exact and
// skip math.Mod.
func floorMod(v, n float64) float64 {
	if v >= 0 {
		if v < n {
			return v
		}
		if v < 2*n {
			return v - n // exact: n ≤ v < 2n (Sterbenz)
		}
	} else if v >= -n {
		// A tiny negative v rounds v+n up to n itself; the true value lies
		// just below n, so the nearest in-range float is the one below n.
		if r := v + n; r < n {
			return r
		}
		return math.Nextafter(n, 0)
	}
	r := math.Mod(v, n) // NaN for NaN or ±Inf input
	if r < 0 {
		r += n
		if r >= n {
			r = math.Nextafter(n, 0)
		}
	}
	return r
}

// shortest maps a raw difference d that lies outside (−n/2, n/2] onto it.
// The in-range case is handled by the callers; keeping this out of line
// keeps them small, so the no-seam path of DistanceSq makes no call.
//
//go:noinline
func shortest(d, n float64) float64 {
	r := floorMod(d, n)
	if r > n/2 {
		r -= n // exact: n/2 < r < n (Sterbenz)
	}
	return r
}

// NormaliseX floor-mods x into [0, Width).
func (w World) NormaliseX(x float64) float64 {
	if x >= 0 && x < w.width { // the common case, kept inlinable
		return x
	}
	return floorMod(x, w.width)
}

// NormaliseY floor-mods y into [0, Height).
func (w World) NormaliseY(y float64) float64 {
	if y >= 0 && y < w.height {
		return y
	}
	return floorMod(y, w.height)
}

// Normalise returns p with x in [0, Width) and y in [0, Height); z is kept.
func (w World) Normalise(p Pos) Pos {
	return Pos{X: w.NormaliseX(p.X), Y: w.NormaliseY(p.Y), Z: p.Z}
}

// DeltaX is the shortest signed x distance from a to b, in (−Width/2,
// Width/2]. An exact half-world tie gives +Width/2.
func (w World) DeltaX(a, b float64) float64 {
	d, h := b-a, w.width*0.5
	if d > -h && d <= h { // no seam between a and b: exactly b − a
		return d
	}
	return shortest(d, w.width)
}

// DeltaY is the shortest signed y distance from a to b, in (−Height/2,
// Height/2]. An exact half-world tie gives +Height/2.
func (w World) DeltaY(a, b float64) float64 {
	d, h := b-a, w.height*0.5
	if d > -h && d <= h {
		return d
	}
	return shortest(d, w.height)
}

// Delta is the shortest vector from a to b: wrap-aware on x and y, plain
// b.Z − a.Z on z. a + Delta(a, b) is b, up to normalisation.
func (w World) Delta(a, b Pos) Pos {
	return Pos{X: w.DeltaX(a.X, b.X), Y: w.DeltaY(a.Y, b.Y), Z: b.Z - a.Z}
}

// Distance is the surface distance between a and b: the hypotenuse of the
// two shortest deltas (z ignored, as in the seed). Because each delta is at
// most half the world, the sum of squares cannot overflow, so a plain square
// root replaces the slower math.Hypot.
func (w World) Distance(a, b Pos) float64 {
	return math.Sqrt(w.DistanceSq(a, b))
}

// DistanceSq is Distance squared; compare it with r*r to test a radius
// without a square root.
func (w World) DistanceSq(a, b Pos) float64 {
	// DeltaX and DeltaY written out, so the no-seam case makes no call.
	dx, dy := b.X-a.X, b.Y-a.Y
	if hw := w.width * 0.5; !(dx > -hw && dx <= hw) {
		dx = shortest(dx, w.width)
	}
	if hh := w.height * 0.5; !(dy > -hh && dy <= hh) {
		dy = shortest(dy, w.height)
	}
	return dx*dx + dy*dy
}

// Within reports whether b lies within surface distance r of a (inclusive).
func (w World) Within(a, b Pos, r float64) bool {
	return w.DistanceSq(a, b) <= r*r
}

// Translate returns p moved by d and normalised.
func (w World) Translate(p, d Pos) Pos {
	return Pos{X: w.NormaliseX(p.X + d.X), Y: w.NormaliseY(p.Y + d.Y), Z: p.Z + d.Z}
}
