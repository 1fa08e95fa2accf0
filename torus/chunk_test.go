package torus_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/torus"
)

func TestChunkOfTable(t *testing.T) {
	w := torus.Default()
	cases := []struct {
		p    torus.Pos
		want torus.ChunkPos
	}{
		{torus.Pos{}, torus.ChunkPos{}},
		{torus.Pos{X: 31.999, Y: 31.999, Z: 255.999}, torus.ChunkPos{}},
		{torus.Pos{X: 32, Y: 64, Z: 256}, torus.ChunkPos{X: 1, Y: 2, Slab: 1}},
		{torus.Pos{X: 5, Y: 127_990}, torus.ChunkPos{X: 0, Y: 3999}},
		{torus.Pos{X: 127_999.999, Y: 127_968}, torus.ChunkPos{X: 3999, Y: 3999}},
		{torus.Pos{X: W, Y: W + 33}, torus.ChunkPos{X: 0, Y: 1}},
		{torus.Pos{X: -0.5, Y: -32, Z: -0.1}, torus.ChunkPos{X: 3999, Y: 3999, Slab: -1}},
		{torus.Pos{X: -32.0001, Y: -W, Z: -256}, torus.ChunkPos{X: 3998, Y: 0, Slab: -1}},
		{torus.Pos{X: -1e-20, Z: -256.5}, torus.ChunkPos{X: 3999, Slab: -2}},
		{torus.Pos{X: 3*W + 40, Y: -5*W - 40}, torus.ChunkPos{X: 1, Y: 3998}},
		{torus.Pos{Z: 1e300}, torus.ChunkPos{Slab: math.MaxInt32}},
		{torus.Pos{Z: -1e300}, torus.ChunkPos{Slab: math.MinInt32}},
	}
	for _, c := range cases {
		if got := w.ChunkOf(c.p); got != c.want {
			t.Errorf("ChunkOf(%+v) = %+v, want %+v", c.p, got, c.want)
		}
	}
}

func TestChunkOfNonFinite(t *testing.T) {
	// The result is unspecified but must be a normalised chunk, not a panic.
	w := torus.Default()
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		c := w.ChunkOf(torus.Pos{X: v, Y: v, Z: v})
		if c.X < 0 || c.X >= 4000 || c.Y < 0 || c.Y >= 4000 {
			t.Errorf("ChunkOf(%v) = %+v, not normalised", v, c)
		}
	}
	if s := w.SlabOf(math.NaN()); s != 0 {
		t.Errorf("SlabOf(NaN) = %d, want 0", s)
	}
}

// TestChunkOfMatchesFloorDivision checks the documented invariant
// ChunkOf(p) == NormaliseChunk(floor(p / edge)) over random and boundary
// coordinates, negative ones included.
func TestChunkOfMatchesFloorDivision(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for _, cfg := range []torus.Config{{}, {Width: 320, Height: 224, SlabHeight: 10}, {Width: 99_000, Height: 3_000, ChunkEdge: 3, SlabHeight: 7}} {
		w := mustWorld(t, cfg)
		edge := w.ChunkEdge()
		check := func(p torus.Pos) {
			raw := torus.ChunkPos{
				X:    int32(math.Floor(p.X / edge)),
				Y:    int32(math.Floor(p.Y / edge)),
				Slab: int32(math.Floor(p.Z / w.SlabHeight())),
			}
			if got, want := w.ChunkOf(p), w.NormaliseChunk(raw); got != want {
				t.Fatalf("%+v: ChunkOf(%+v) = %+v, floor division gives %+v", cfg, p, got, want)
			}
			if got := w.ChunkOf(p); w.ChunkX(p.X) != got.X || w.ChunkY(p.Y) != got.Y {
				t.Fatalf("%+v: ChunkX/ChunkY(%+v) = %d,%d, ChunkOf %+v", cfg, p, w.ChunkX(p.X), w.ChunkY(p.Y), got)
			}
		}
		for range 100_000 {
			check(torus.Pos{
				X: dyadic(r, -3*w.Width(), 3*w.Width()),
				Y: dyadic(r, -3*w.Height(), 3*w.Height()),
				Z: dyadic(r, -5000, 5000),
			})
		}
		// Every chunk boundary, and a hair either side of it.
		for k := -w.ChunksX() - 2; k <= 2*w.ChunksX()+2; k += max(1, w.ChunksX()/500) {
			x := float64(k) * edge
			for _, v := range []float64{x, math.Nextafter(x, math.Inf(-1)), math.Nextafter(x, math.Inf(1)), x - 1e-6, x + 1e-6} {
				check(torus.Pos{X: v, Y: v, Z: v})
			}
		}
	}
}

func TestNormaliseChunk(t *testing.T) {
	w := torus.Default()
	cases := []struct{ in, want torus.ChunkPos }{
		{torus.ChunkPos{X: 0, Y: 0, Slab: 3}, torus.ChunkPos{X: 0, Y: 0, Slab: 3}},
		{torus.ChunkPos{X: 3999, Y: 4000, Slab: -1}, torus.ChunkPos{X: 3999, Y: 0, Slab: -1}},
		{torus.ChunkPos{X: -1, Y: -4000}, torus.ChunkPos{X: 3999, Y: 0}},
		{torus.ChunkPos{X: -4001, Y: 8005}, torus.ChunkPos{X: 3999, Y: 5}},
		{torus.ChunkPos{X: math.MinInt32, Y: math.MaxInt32}, torus.ChunkPos{X: int32(floorMod(math.MinInt32, 4000)), Y: int32(floorMod(math.MaxInt32, 4000))}},
	}
	for _, c := range cases {
		if got := w.NormaliseChunk(c.in); got != c.want {
			t.Errorf("NormaliseChunk(%+v) = %+v, want %+v", c.in, got, c.want)
		}
	}
	if got := w.ChunkOrigin(torus.ChunkPos{X: -1, Y: 2, Slab: -1}); got != (torus.Pos{X: 127_968, Y: 64, Z: -256}) {
		t.Errorf("ChunkOrigin = %+v", got)
	}
}

func floorMod(v, n int) int { return ((v % n) + n) % n }

// naiveChunkDelta tries every representative and keeps the smallest, the
// positive one on a tie.
func naiveChunkDelta(a, b, n int) int {
	best := math.MaxInt
	for k := -4; k <= 4; k++ {
		d := b - a + k*n
		if abs(d) < abs(best) || (abs(d) == abs(best) && d > best) {
			best = d
		}
	}
	return best
}

func TestChunkDeltaExhaustiveSmall(t *testing.T) {
	for _, cfg := range []torus.Config{{Width: 320, Height: 224}, {Width: 32, Height: 64}, {Width: 96, Height: 96}} {
		w := mustWorld(t, cfg)
		nx, ny := w.ChunksX(), w.ChunksY()
		for ax := -nx; ax < 2*nx; ax++ {
			for bx := -nx; bx < 2*nx; bx++ {
				ay, by := ax%ny, bx%ny // keep the loop two-dimensional but cover y too
				a := torus.ChunkPos{X: int32(ax), Y: int32(ay), Slab: 1}
				b := torus.ChunkPos{X: int32(bx), Y: int32(by), Slab: -2}
				dx, dy, ds := w.ChunkDelta(a, b)
				if want := naiveChunkDelta(ax, bx, nx); dx != want {
					t.Fatalf("%+v: dx(%d→%d) = %d, want %d", cfg, ax, bx, dx, want)
				}
				if want := naiveChunkDelta(ay, by, ny); dy != want {
					t.Fatalf("%+v: dy(%d→%d) = %d, want %d", cfg, ay, by, dy, want)
				}
				if ds != -3 {
					t.Fatalf("dslab = %d, want -3", ds)
				}
				if got, want := w.ChunkDistance(a, b), max(abs(dx), abs(dy)); got != want {
					t.Fatalf("ChunkDistance = %d, want %d", got, want)
				}
			}
		}
	}
}

func TestChunkDeltaSeam(t *testing.T) {
	w := torus.Default()
	cases := []struct {
		a, b          torus.ChunkPos
		dx, dy, dslab int
		chebyshev     int
	}{
		{torus.ChunkPos{X: 0}, torus.ChunkPos{X: 3999}, -1, 0, 0, 1},
		{torus.ChunkPos{X: 3999, Y: 3998}, torus.ChunkPos{X: 2, Y: 1}, 3, 3, 0, 3},
		{torus.ChunkPos{X: 0, Y: 0}, torus.ChunkPos{X: 2000, Y: 1999}, 2000, 1999, 0, 2000},
		{torus.ChunkPos{X: 2000}, torus.ChunkPos{X: 0}, 2000, 0, 0, 2000},
		{torus.ChunkPos{X: -1, Slab: 2}, torus.ChunkPos{X: 4000, Slab: -1}, 1, 0, -3, 1},
	}
	for _, c := range cases {
		dx, dy, ds := w.ChunkDelta(c.a, c.b)
		if dx != c.dx || dy != c.dy || ds != c.dslab {
			t.Errorf("ChunkDelta(%+v, %+v) = %d,%d,%d, want %d,%d,%d", c.a, c.b, dx, dy, ds, c.dx, c.dy, c.dslab)
		}
		if got := w.ChunkDistance(c.a, c.b); got != c.chebyshev {
			t.Errorf("ChunkDistance(%+v, %+v) = %d, want %d", c.a, c.b, got, c.chebyshev)
		}
	}
}

// TestChunksWithinExhaustive compares the iterator with a brute-force scan
// of every chunk of small worlds, for every centre and many radii, including
// windows wider than the world (which must not repeat a chunk).
func TestChunksWithinExhaustive(t *testing.T) {
	for _, cfg := range []torus.Config{{Width: 320, Height: 224}, {Width: 32, Height: 96}, {Width: 128, Height: 128}} {
		w := mustWorld(t, cfg)
		nx, ny := w.ChunksX(), w.ChunksY()
		for cx := -1; cx <= nx; cx++ {
			for cy := -1; cy <= ny; cy++ {
				for r := -1; r <= max(nx, ny)+1; r++ {
					for slabs := 0; slabs <= 1; slabs++ {
						center := torus.ChunkPos{X: int32(cx), Y: int32(cy), Slab: 5}
						seen := map[torus.ChunkPos]int{}
						for c := range w.ChunksWithin(center, r, slabs) {
							seen[c]++
						}
						want := 0
						for x := range nx {
							for y := range ny {
								for s := 5 - slabs; s <= 5+slabs; s++ {
									c := torus.ChunkPos{X: int32(x), Y: int32(y), Slab: int32(s)}
									if r < 0 || w.ChunkDistance(center, c) > r {
										if seen[c] != 0 {
											t.Fatalf("%+v: %+v r=%d yielded %+v at distance %d", cfg, center, r, c, w.ChunkDistance(center, c))
										}
										continue
									}
									want++
									if seen[c] != 1 {
										t.Fatalf("%+v: %+v r=%d yielded %+v %d times", cfg, center, r, c, seen[c])
									}
								}
							}
						}
						if len(seen) != want || w.ChunkCount(r, slabs) != want {
							t.Fatalf("%+v: %+v r=%d: %d chunks, ChunkCount %d, want %d", cfg, center, r, len(seen), w.ChunkCount(r, slabs), want)
						}
					}
				}
			}
		}
	}
}

func TestChunksWithinDefaultView(t *testing.T) {
	w := torus.Default()
	// A client at the corner of the world holds 11 × 11 columns × 3 slabs,
	// wrapping through both seams.
	center := w.ChunkOf(torus.Pos{X: 5, Y: 127_990, Z: 10})
	n := 0
	for c := range w.ChunksWithin(center, 5, 1) {
		if d := w.ChunkDistance(center, c); d > 5 {
			t.Fatalf("chunk %+v at distance %d", c, d)
		}
		if c.Slab < -1 || c.Slab > 1 {
			t.Fatalf("chunk %+v outside ±1 slab", c)
		}
		n++
	}
	if n != 11*11*3 || w.ChunkCount(5, 1) != n {
		t.Fatalf("%d chunks, ChunkCount %d, want 363", n, w.ChunkCount(5, 1))
	}
	// Stopping early is honoured.
	n = 0
	for range w.ChunksWithin(center, 5, 1) {
		n++
		if n == 7 {
			break
		}
	}
	if n != 7 {
		t.Fatalf("break after 7 yielded %d", n)
	}
	// Slab saturation: a window at the top of the int32 range is cut, not wrapped.
	n = 0
	for c := range w.ChunksWithin(torus.ChunkPos{Slab: math.MaxInt32}, 0, 2) {
		if c.Slab < math.MaxInt32-2 {
			t.Fatalf("slab %d wrapped", c.Slab)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("saturated window yielded %d, want 3", n)
	}
	for range w.ChunksWithin(center, -1, 0) {
		t.Fatal("negative radius yielded a chunk")
	}
	for range w.ChunksWithin(center, 0, -1) {
		t.Fatal("negative slab radius yielded a chunk")
	}
}
