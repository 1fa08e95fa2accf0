package cells_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

const W = 128_000.0

func mustGrid(t testing.TB, cfg cells.GridConfig) cells.Grid {
	t.Helper()
	g, err := cells.NewGrid(cfg)
	if err != nil {
		t.Fatalf("NewGrid(%+v): %v", cfg, err)
	}
	return g
}

func TestGridDefaults(t *testing.T) {
	g := cells.DefaultGrid()
	if g.Cols() != 16 || g.Rows() != 16 || g.Regions() != 256 || g.RegionEdge() != 8000 {
		t.Fatalf("default grid %d×%d (%d), edge %v", g.Cols(), g.Rows(), g.Regions(), g.RegionEdge())
	}
	want := cells.GridConfig{World: torus.DefaultConfig(), RegionEdge: 8000}
	if g.Config() != want || cells.DefaultGridConfig() != want {
		t.Fatalf("Config() = %+v, DefaultGridConfig() = %+v, want %+v", g.Config(), cells.DefaultGridConfig(), want)
	}
	if g.World() != torus.Default() {
		t.Fatal("default grid is not on the default world")
	}
	if mustGrid(t, want) != g {
		t.Fatal("explicit default config gives a different grid")
	}
}

func TestGridConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		cfg   cells.GridConfig
		field string // "" means valid
	}{
		{"zero", cells.GridConfig{}, ""},
		{"4 km", cells.GridConfig{RegionEdge: 4000}, ""},
		{"2 km on 16 m chunks", cells.GridConfig{World: torus.Config{ChunkEdge: 16}, RegionEdge: 2000}, ""},
		// The seed's 2 km row is 62.5 chunks of 32 m: not a valid grid.
		{"2 km on 32 m chunks", cells.GridConfig{RegionEdge: 2000}, "RegionEdge"},
		{"one region", cells.GridConfig{RegionEdge: 128_000}, ""},
		{"one chunk per region", cells.GridConfig{World: torus.Config{Width: 320, Height: 224}, RegionEdge: 32}, ""},
		{"rectangular world", cells.GridConfig{World: torus.Config{Width: 96_000, Height: 64_000}, RegionEdge: 32_000}, ""},
		{"negative", cells.GridConfig{RegionEdge: -8000}, "RegionEdge"},
		{"not whole chunks", cells.GridConfig{RegionEdge: 8016 + 1}, "RegionEdge"},
		{"does not divide width", cells.GridConfig{RegionEdge: 96}, "RegionEdge"},
		{"does not divide height", cells.GridConfig{World: torus.Config{Width: 128_000, Height: 96_000}, RegionEdge: 128_000}, "RegionEdge"},
		{"too many regions", cells.GridConfig{World: torus.Config{ChunkEdge: 16}, RegionEdge: 16}, "RegionEdge"},
		{"bad world", cells.GridConfig{World: torus.Config{Width: -1}}, "World.Width"},
		{"bad world chunk", cells.GridConfig{World: torus.Config{ChunkEdge: 7}}, "World.Width"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			_, newErr := cells.NewGrid(c.cfg)
			if c.field == "" {
				if err != nil || newErr != nil {
					t.Fatalf("Validate = %v, NewGrid = %v", err, newErr)
				}
				return
			}
			var ce *errcode.ConfigError
			if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, errcode.ErrConfigInvalid) {
				t.Fatalf("Validate = %v; want config error on %q", err, c.field)
			}
			if errcode.Of(newErr) != errcode.ConfigInvalid {
				t.Fatalf("NewGrid = %v; want a config error", newErr)
			}
		})
	}
}

func TestRegionCountsOfSeedTable(t *testing.T) {
	// 2 km is 62.5 chunks of 32 m, so that row needs 16 m chunks.
	for _, c := range []struct{ chunk, edge, regions int }{{16, 2000, 4096}, {32, 4000, 1024}, {32, 8000, 256}, {32, 16_000, 64}} {
		g := mustGrid(t, cells.GridConfig{World: torus.Config{ChunkEdge: c.chunk}, RegionEdge: c.edge})
		if g.Regions() != c.regions {
			t.Errorf("edge %d: %d regions, want %d", c.edge, g.Regions(), c.regions)
		}
	}
}

func TestRegionOfTable(t *testing.T) {
	g := cells.DefaultGrid()
	cases := []struct {
		p    torus.Pos
		want cells.RegionID
	}{
		{torus.Pos{}, 0},
		{torus.Pos{X: 7999.99, Y: 7999.99}, 0},
		{torus.Pos{X: 8000}, 1},
		{torus.Pos{Y: 8000}, 16},
		{torus.Pos{X: 127_990, Y: 5}, 15},
		{torus.Pos{X: 5, Y: 127_990}, 240},
		{torus.Pos{X: -0.001, Y: -0.001}, 255},
		{torus.Pos{X: -8000, Y: -8000.5}, 14*16 + 15}, // col 15, row 14
		{torus.Pos{X: W + 8000, Y: 2*W + 16_000, Z: -9999}, 2*16 + 1},
	}
	for _, c := range cases {
		if got := g.RegionOf(c.p); got != c.want {
			col, row := g.Coords(got)
			t.Errorf("RegionOf(%+v) = %d (col %d, row %d), want %d", c.p, got, col, row, c.want)
		}
	}
	if g.RegionAt(-1, -1) != 255 || g.RegionAt(16, 17) != 16 || g.RegionAt(3, 2) != 35 {
		t.Errorf("RegionAt wrap: %d %d %d", g.RegionAt(-1, -1), g.RegionAt(16, 17), g.RegionAt(3, 2))
	}
	if !g.Valid(0) || !g.Valid(255) || g.Valid(256) || g.Valid(-1) {
		t.Error("Valid bounds wrong")
	}
	minX, minY, maxX, maxY := g.Bounds(35)
	if minX != 24_000 || minY != 16_000 || maxX != 32_000 || maxY != 24_000 {
		t.Errorf("Bounds(35) = %v %v %v %v", minX, minY, maxX, maxY)
	}
}

// TestRegionOfMatchesBounds checks RegionOf against a brute-force search
// of the region whose bounds contain the normalised position, and against
// RegionOfChunk(ChunkOf(p)).
func TestRegionOfMatchesBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, cfg := range []cells.GridConfig{{}, {RegionEdge: 4000}, {World: torus.Config{Width: 320, Height: 224}, RegionEdge: 32}, {World: torus.Config{Width: 96_000, Height: 64_000}, RegionEdge: 32_000}} {
		g := mustGrid(t, cfg)
		w := g.World()
		for range 20_000 {
			p := torus.Pos{X: dyadic(r, -2*w.Width(), 2*w.Width()), Y: dyadic(r, -2*w.Height(), 2*w.Height())}
			got := g.RegionOf(p)
			if c := g.RegionOfChunk(w.ChunkOf(p)); c != got {
				t.Fatalf("%+v: RegionOf(%+v) = %d, RegionOfChunk = %d", cfg, p, got, c)
			}
			n := w.Normalise(p)
			found := cells.RegionID(-1)
			for id := range g.Regions() {
				minX, minY, maxX, maxY := g.Bounds(cells.RegionID(id))
				if n.X >= minX && n.X < maxX && n.Y >= minY && n.Y < maxY {
					found = cells.RegionID(id)
				}
			}
			if found != got {
				t.Fatalf("%+v: RegionOf(%+v) = %d, bounds say %d", cfg, p, got, found)
			}
		}
	}
}

func dyadic(r *rand.Rand, lo, hi float64) float64 {
	return lo + float64(r.Int64N(int64((hi-lo)*1024)))/1024
}

// TestNeighbourOffsets checks, for every region of several grids, that each
// neighbour's centre plus its offset lies exactly one region step away from
// the centre region's centre in the neighbour's direction: the offsets
// carry positions across the seam.
func TestNeighbourOffsets(t *testing.T) {
	for _, cfg := range []cells.GridConfig{
		{}, {RegionEdge: 128_000}, {RegionEdge: 64_000}, {RegionEdge: 32_000},
		{World: torus.Config{Width: 96_000, Height: 32_000}, RegionEdge: 32_000},
	} {
		g := mustGrid(t, cfg)
		e := g.RegionEdge()
		for id := range g.Regions() {
			r := cells.RegionID(id)
			cx, cy := centre(g, r)
			ns := g.Neighbours(r)
			for _, n := range ns {
				nx, ny := centre(g, n.Region)
				if got, want := nx+n.OffsetX-cx, float64(n.DX)*e; got != want {
					t.Fatalf("%+v: region %d neighbour %+v: x step %v, want %v", cfg, r, n, got, want)
				}
				if got, want := ny+n.OffsetY-cy, float64(n.DY)*e; got != want {
					t.Fatalf("%+v: region %d neighbour %+v: y step %v, want %v", cfg, r, n, got, want)
				}
				if n.Node != "" {
					t.Fatalf("Grid.Neighbours set Node %q", n.Node)
				}
			}
		}
	}
}

func centre(g cells.Grid, r cells.RegionID) (x, y float64) {
	minX, minY, maxX, maxY := g.Bounds(r)
	return (minX + maxX) / 2, (minY + maxY) / 2
}

func TestNeighboursOnTinyGrids(t *testing.T) {
	// One region: it is all eight of its own neighbours, at ±world offsets.
	g := mustGrid(t, cells.GridConfig{RegionEdge: 128_000})
	seen := map[[2]float64]bool{}
	for _, n := range g.Neighbours(0) {
		if n.Region != 0 {
			t.Fatalf("1×1 grid neighbour %+v", n)
		}
		seen[[2]float64{n.OffsetX, n.OffsetY}] = true
	}
	if len(seen) != 8 {
		t.Fatalf("1×1 grid: %d distinct offsets, want 8", len(seen))
	}
	// Two columns: west and east of region 0 are both region 1, at 0 and −W.
	g = mustGrid(t, cells.GridConfig{World: torus.Config{Width: 128_000, Height: 128_000}, RegionEdge: 64_000})
	ns := g.Neighbours(0)
	west, east := ns[3], ns[4]
	if west.Region != 1 || east.Region != 1 || west.OffsetX != -W || east.OffsetX != 0 {
		t.Fatalf("2×2 grid: west %+v east %+v", west, east)
	}
	// Interior region of the default grid: no offsets; corner: seam offsets.
	g = cells.DefaultGrid()
	for _, n := range g.Neighbours(g.RegionAt(5, 5)) {
		if n.OffsetX != 0 || n.OffsetY != 0 {
			t.Fatalf("interior neighbour has offset: %+v", n)
		}
	}
	sw := g.Neighbours(0)[0]
	if sw.Region != 255 || sw.OffsetX != -W || sw.OffsetY != -W || sw.DX != -1 || sw.DY != -1 {
		t.Fatalf("south-west of region 0: %+v", sw)
	}
}

func TestBandShareSeedTable(t *testing.T) {
	const band = 224 // 7 chunks of 32 m
	for _, c := range []struct {
		edge    float64
		percent int
	}{{2000, 40}, {4000, 21}, {8000, 11}, {16_000, 6}} {
		got := cells.BandShare(c.edge, band)
		if p := int(math.Round(got * 100)); p != c.percent {
			t.Errorf("BandShare(%v, %v) = %.4f (%d%%), want %d%%", c.edge, band, got, p, c.percent)
		}
	}
	// The interaction band (one chunk) at 8 km is "about 2 %".
	if got := cells.BandShare(8000, 32); got < 0.015 || got > 0.02 {
		t.Errorf("interaction band share %.4f, want about 2%%", got)
	}
	for _, c := range []struct{ e, b, want float64 }{
		{8000, 0, 0}, {8000, -5, 0}, {8000, 4000, 1}, {8000, 5000, 1}, {8000, 2000, 0.75}, {100, 25, 0.75},
	} {
		if got := cells.BandShare(c.e, c.b); got != c.want {
			t.Errorf("BandShare(%v, %v) = %v, want %v", c.e, c.b, got, c.want)
		}
	}
}
