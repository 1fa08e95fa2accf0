package cells

import (
	"errors"
	"fmt"
	"math"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

// DefaultRegionEdge is the side of a region in metres: 8 km, 16 × 16 = 256
// regions on the default 128 km world (the knee of the seed's band-share
// table).
const DefaultRegionEdge = 8_000

// MaxRegions bounds the number of regions in a grid (4096 × 4096), enough
// for 32 m regions on the default world while keeping a table's owner slice
// a sane size.
const MaxRegions = 1 << 24

// GridConfig describes the fixed region grid laid over a world. The zero
// value is the default world with 8 km regions. Defaults are filled by
// WithDefaults and nowhere else.
type GridConfig struct {
	// World is the torus the grid covers; zero fields take torus defaults.
	World torus.Config `json:"world"`
	// RegionEdge is the side of a square region in metres. It must divide
	// both world extents and be a multiple of the chunk edge, so that every
	// chunk lies in exactly one region. 0 means DefaultRegionEdge (8000).
	RegionEdge int `json:"regionEdge"`
}

// DefaultGridConfig returns the default grid: 8 km regions on the default
// world.
func DefaultGridConfig() GridConfig { return GridConfig{}.WithDefaults() }

// WithDefaults returns c with every zero field (nested ones included)
// replaced by its default.
func (c GridConfig) WithDefaults() GridConfig {
	c.World = c.World.WithDefaults()
	if c.RegionEdge == 0 {
		c.RegionEdge = DefaultRegionEdge
	}
	return c
}

// Validate checks c after defaults are applied. Every error is an
// errcode.Config naming the field and its value.
func (c GridConfig) Validate() error {
	if err := c.World.Validate(); err != nil {
		var ce *errcode.ConfigError
		if errors.As(err, &ce) {
			return errcode.Config("World."+ce.Field, ce.Value, ce.Reason)
		}
		return err
	}
	c = c.WithDefaults()
	e := c.RegionEdge
	switch {
	case e < 0:
		return errcode.Config("RegionEdge", e, "must be positive")
	case e%c.World.ChunkEdge != 0:
		return errcode.Config("RegionEdge", e, fmt.Sprintf("must be a multiple of the chunk edge (%d)", c.World.ChunkEdge))
	case c.World.Width%e != 0:
		return errcode.Config("RegionEdge", e, fmt.Sprintf("must divide the world width (%d)", c.World.Width))
	case c.World.Height%e != 0:
		return errcode.Config("RegionEdge", e, fmt.Sprintf("must divide the world height (%d)", c.World.Height))
	case int64(c.World.Width/e)*int64(c.World.Height/e) > MaxRegions:
		return errcode.Config("RegionEdge", e, fmt.Sprintf("gives more than %d regions", MaxRegions))
	}
	return nil
}

// RegionID names a region: its row-major index, row × Cols + col, with
// col counted along x and row along y from the world origin.
type RegionID int32

// Grid is the immutable region grid: square regions of RegionEdge metres
// over a torus. It never moves. Obtain one from NewGrid or DefaultGrid.
// Grids compare with == (equal geometry).
type Grid struct {
	world           torus.World
	edge            float64
	cols, rows      int
	chunksPerRegion int
}

// NewGrid validates cfg (after defaults) and returns the grid.
func NewGrid(cfg GridConfig) (Grid, error) {
	if err := cfg.Validate(); err != nil {
		return Grid{}, err
	}
	cfg = cfg.WithDefaults()
	w, err := torus.New(cfg.World)
	if err != nil {
		return Grid{}, err // unreachable: validated above
	}
	return Grid{
		world:           w,
		edge:            float64(cfg.RegionEdge),
		cols:            cfg.World.Width / cfg.RegionEdge,
		rows:            cfg.World.Height / cfg.RegionEdge,
		chunksPerRegion: cfg.RegionEdge / cfg.World.ChunkEdge,
	}, nil
}

// DefaultGrid returns the default grid (DefaultGridConfig).
func DefaultGrid() Grid {
	g, err := NewGrid(GridConfig{})
	if err != nil {
		panic(err) // the defaults are constants checked by the tests
	}
	return g
}

// Config returns the effective configuration (defaults filled in).
func (g Grid) Config() GridConfig {
	return GridConfig{World: g.world.Config(), RegionEdge: int(g.edge)}
}

// World returns the torus the grid covers.
func (g Grid) World() torus.World { return g.world }

// RegionEdge is the side of a region in metres.
func (g Grid) RegionEdge() float64 { return g.edge }

// Cols is the number of regions along x.
func (g Grid) Cols() int { return g.cols }

// Rows is the number of regions along y.
func (g Grid) Rows() int { return g.rows }

// Regions is the number of regions, Cols × Rows. Valid ids are
// 0 … Regions()−1.
func (g Grid) Regions() int { return g.cols * g.rows }

// Valid reports whether r names a region of this grid.
func (g Grid) Valid(r RegionID) bool { return r >= 0 && int(r) < g.cols*g.rows }

// RegionAt returns the region at column col and row row, both wrapped onto
// the grid (col −1 is the last column).
func (g Grid) RegionAt(col, row int) RegionID {
	return RegionID(floorModInt(row, g.rows)*g.cols + floorModInt(col, g.cols))
}

// Coords returns the column and row of r. r must be valid.
func (g Grid) Coords(r RegionID) (col, row int) {
	return int(r) % g.cols, int(r) / g.cols
}

// RegionOf returns the region that contains p (x and y wrapped, negative
// coordinates rounding down). It agrees with RegionOfChunk(ChunkOf(p)).
func (g Grid) RegionOf(p torus.Pos) RegionID {
	// Through the chunk, so that the two can never disagree at a boundary;
	// the chunk indices are already normalised.
	x, y := int(g.world.ChunkX(p.X)), int(g.world.ChunkY(p.Y))
	return RegionID((y/g.chunksPerRegion)*g.cols + x/g.chunksPerRegion)
}

// RegionOfChunk returns the region that contains chunk c (normalised
// first). Because the region edge is a whole number of chunks, every chunk
// lies in exactly one region.
func (g Grid) RegionOfChunk(c torus.ChunkPos) RegionID {
	x := floorModInt(int(c.X), g.world.ChunksX())
	y := floorModInt(int(c.Y), g.world.ChunksY())
	return RegionID((y/g.chunksPerRegion)*g.cols + x/g.chunksPerRegion)
}

// Bounds returns the half-open rectangle [minX, maxX) × [minY, maxY) that
// region r covers, in normalised coordinates. r must be valid.
func (g Grid) Bounds(r RegionID) (minX, minY, maxX, maxY float64) {
	col, row := g.Coords(r)
	minX, minY = float64(col)*g.edge, float64(row)*g.edge
	return minX, minY, minX + g.edge, minY + g.edge
}

// Neighbour is one of the eight regions around a region on the torus.
type Neighbour struct {
	// Region is the neighbouring region. On a grid one or two regions wide
	// it can be the region itself, or the same region twice.
	Region RegionID
	// DX and DY give the direction from the centre region, each −1, 0 or 1.
	DX, DY int
	// OffsetX and OffsetY are added to a normalised position inside Region
	// to express it in the centre region's frame, so that it lies beside
	// the centre region: 0 for an interior neighbour, ±world width (height)
	// when the step crosses the seam.
	OffsetX, OffsetY float64
	// Node owns Region. Set by Table.Neighbours; empty from Grid.Neighbours.
	Node string
}

// Neighbours returns the eight regions around r, always eight, in the
// order (dx, dy) = (−1,−1), (0,−1), (1,−1), (−1,0), (1,0), (−1,1), (0,1),
// (1,1). Every region has all eight: the world has no edge. r must be
// valid.
func (g Grid) Neighbours(r RegionID) [8]Neighbour {
	col, row := g.Coords(r)
	var out [8]Neighbour
	i := 0
	for dy := -1; dy <= 1; dy++ {
		for dx := -1; dx <= 1; dx++ {
			if dx != 0 || dy != 0 {
				out[i] = g.neighbour(col, row, dx, dy)
				i++
			}
		}
	}
	return out
}

// neighbour is the region one step (dx, dy) from (col, row), wrapped, with
// the offset that the wrap adds.
func (g Grid) neighbour(col, row, dx, dy int) Neighbour {
	nc, nr := col+dx, row+dy
	var ox, oy float64
	switch {
	case nc < 0:
		nc += g.cols
		ox = -g.world.Width()
	case nc >= g.cols:
		nc -= g.cols
		ox = g.world.Width()
	}
	switch {
	case nr < 0:
		nr += g.rows
		oy = -g.world.Height()
	case nr >= g.rows:
		nr -= g.rows
		oy = g.world.Height()
	}
	return Neighbour{Region: RegionID(nr*g.cols + nc), DX: dx, DY: dy, OffsetX: ox, OffsetY: oy}
}

// axisSpan returns the first cell and the number of cells, on an axis of n
// cells of size e, whose extent comes within distance b of coordinate v
// (v in [0, n·e)). closed selects distance ≤ b (cells touching the closed
// window [v−b, v+b]) rather than < b (the open window). A window as wide
// as the axis covers each cell once, starting at 0.
func axisSpan(v, b, e float64, n int, closed bool) (first, count int) {
	if 2*b >= float64(n)*e {
		return 0, n
	}
	var lo, hi int
	if closed {
		lo = int(math.Ceil((v-b)/e)) - 1
		hi = int(math.Floor((v + b) / e))
	} else {
		lo = int(math.Floor((v - b) / e))
		hi = int(math.Ceil((v+b)/e)) - 1
	}
	count = hi - lo + 1
	if count >= n {
		return 0, n
	}
	return floorModInt(lo, n), count
}

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

// BandShare is the share of a square region of edge e that lies within
// band b of its border: 1 − ((e − 2b)/e)². It is 0 for b ≤ 0 and 1 once the
// bands from opposite sides meet (2b ≥ e).
func BandShare(e, b float64) float64 {
	switch {
	case b <= 0:
		return 0
	case 2*b >= e:
		return 1
	}
	inner := (e - 2*b) / e
	return 1 - inner*inner
}
