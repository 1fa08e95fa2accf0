package terrain

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/torus"
)

func mustWorld(tb testing.TB, cfg torus.Config) torus.World {
	tb.Helper()
	w, err := torus.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

func mustGenerator(tb testing.TB, seed uint64, w torus.World) *Generator {
	tb.Helper()
	g, err := New(seed, w)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

func TestNewRefusesTheZeroWorld(t *testing.T) {
	_, err := New(1, torus.World{})
	var ce *errcode.ConfigError
	if !errors.As(err, &ce) || ce.Field != "World" {
		t.Fatalf("New(zero World) = %v, want a ConfigError naming World", err)
	}
}

// heightsDigest is the SHA-256 of h's samples, 2 bytes little-endian each.
func heightsDigest(h *Heights) string {
	b := make([]byte, 0, 2*len(h))
	for _, v := range h {
		b = binary.LittleEndian.AppendUint16(b, uint16(v))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestBaseGolden pins the generator (invariant 4): these values are the
// terrain of every deployed world with these seeds. If this test fails,
// the change alters every world; it must be a deliberate new algorithm,
// not an accident.
func TestBaseGolden(t *testing.T) {
	cases := []struct {
		seed   uint64
		c      torus.ChunkPos
		first  [4]int16
		digest string
	}{
		{1, torus.ChunkPos{}, [4]int16{-1268, -1267, -1266, -1266},
			"add5a58982e0ce4a1facca172eaa147516a7408a4ba92e699b29524ba806be99"},
		{1, torus.ChunkPos{X: 3999, Y: 1234}, [4]int16{718, 717, 717, 718},
			"ed7f478ae3c7fe1edd9e6ab8589c0e80defeba98f1c53bf152b21cd461834463"},
	}
	for _, c := range cases {
		g := mustGenerator(t, c.seed, torus.Default())
		h := g.Base(c.c)
		if got := [4]int16(h[:4]); got != c.first {
			t.Errorf("seed %d chunk %v: first samples %v, want %v", c.seed, c.c, got, c.first)
		}
		if got := heightsDigest(&h); got != c.digest {
			t.Errorf("seed %d chunk %v: digest %s, want %s", c.seed, c.c, got, c.digest)
		}
	}
}

// randomWorld returns a world of random shape: chunk edges from 1 m to
// 4 km, from one chunk to the largest counts torus allows.
func randomWorld(tb testing.TB, r *rand.Rand) torus.World {
	edge := []int{1, 2, 3, 32, 100, 4096}[r.IntN(6)]
	maxChunks := int(min(torus.MaxExtent/int64(edge), 1<<31-1))
	count := func() int {
		switch r.IntN(4) {
		case 0:
			return 1 + r.IntN(4) // tiny worlds: lattices clamp to one cell
		case 1:
			return maxChunks - r.IntN(3) // the largest: products pass 2⁶⁴
		default:
			return 1 + r.IntN(min(maxChunks, 10_000))
		}
	}
	return mustWorld(tb, torus.Config{Width: count() * edge, Height: count() * edge, ChunkEdge: edge})
}

func randomChunk(r *rand.Rand, w torus.World) torus.ChunkPos {
	pick := func(n int) int32 {
		switch r.IntN(4) {
		case 0:
			return int32(n - 1) // on the seam
		case 1:
			return 0
		default:
			return int32(r.IntN(n))
		}
	}
	return torus.ChunkPos{X: pick(w.ChunksX()), Y: pick(w.ChunksY()), Slab: r.Int32() - 1<<30}
}

// naiveHeight computes sample (i, j) of chunk c the slow way: every
// sample on its own, the lattice coordinate in arbitrary precision, the
// four lattice points straight from the hash. Base must agree with it.
func naiveHeight(g *Generator, c torus.ChunkPos, i, j int) int16 {
	locate := func(a axis, chunk int32, k int) (cell, next uint64, w int64) {
		gs := new(big.Int).SetUint64(uint64(chunk)*Cells + uint64(k))
		t := new(big.Int).Mul(gs, new(big.Int).SetUint64(a.n))
		q, m := new(big.Int).DivMod(t, new(big.Int).SetUint64(a.p), new(big.Int))
		cell = new(big.Int).Mod(q, new(big.Int).SetUint64(a.n)).Uint64()
		f := new(big.Int).Lsh(m, 16)
		f.Div(f, new(big.Int).SetUint64(a.p))
		return cell, (cell + 1) % a.n, smoothstep(f.Int64())
	}
	var sum int32
	for _, l := range g.layers {
		x0, x1, wx := locate(l.x, c.X, i)
		y0, y1, wy := locate(l.y, c.Y, j)
		s := lerp(latticeValue(l.key, x0, y0), latticeValue(l.key, x1, y0), wx)
		n := lerp(latticeValue(l.key, x0, y1), latticeValue(l.key, x1, y1), wx)
		sum += int32(int64(l.amplitude) * lerp(s, n, wy) >> 15)
	}
	return int16(sum)
}

func TestBaseMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 1))
	for range 200 {
		w := randomWorld(t, r)
		g := mustGenerator(t, r.Uint64(), w)
		c := randomChunk(r, w)
		h := g.Base(c)
		n := w.NormaliseChunk(c)
		for j := range Side {
			for i := range Side {
				if got, want := h.At(i, j), naiveHeight(g, n, i, j); got != want {
					t.Fatalf("world %+v seed %d chunk %v sample (%d, %d): %d, naive %d",
						w.Config(), g.Seed(), c, i, j, got, want)
				}
			}
		}
	}
}

// TestBaseTiles checks invariant 2: a chunk's last column and row are its
// east and north neighbours' first, across the seam too, and a chunk's
// heights depend only on its normalised column.
func TestBaseTiles(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 2))
	for range 500 {
		w := randomWorld(t, r)
		g := mustGenerator(t, r.Uint64(), w)
		c := randomChunk(r, w)
		h := g.Base(c)
		east := g.Base(torus.ChunkPos{X: c.X + 1, Y: c.Y})
		north := g.Base(torus.ChunkPos{X: c.X, Y: c.Y + 1})
		for k := range Side {
			if h.At(Cells, k) != east.At(0, k) {
				t.Fatalf("world %+v seed %d chunk %v: east edge sample %d is %d, the east neighbour's %d",
					w.Config(), g.Seed(), c, k, h.At(Cells, k), east.At(0, k))
			}
			if h.At(k, Cells) != north.At(k, 0) {
				t.Fatalf("world %+v seed %d chunk %v: north edge sample %d is %d, the north neighbour's %d",
					w.Config(), g.Seed(), c, k, h.At(k, Cells), north.At(k, 0))
			}
		}
		wrapped := torus.ChunkPos{
			X:    c.X - int32(w.ChunksX())*int32(r.IntN(3)-1),
			Y:    c.Y - int32(w.ChunksY())*int32(r.IntN(3)-1),
			Slab: r.Int32(),
		}
		if w.ChunksX() < 1<<29 && w.ChunksY() < 1<<29 && g.Base(wrapped) != h {
			t.Fatalf("world %+v seed %d: chunk %v and %v (the same column) differ", w.Config(), g.Seed(), c, wrapped)
		}
	}
}

// slopeBound is the largest step between neighbouring samples that smooth
// noise can make on world w: per octave, the smoothstep's steepest slope
// (1.5) times its full range over a lattice cell, plus the fixed point's
// rounding. A lattice whose period did not divide the world would break
// it at the seam by up to twice an amplitude.
func slopeBound(g *Generator) (bx, by int) {
	for _, l := range g.layers {
		amp := float64(l.amplitude)
		bx += int(3*amp*float64(l.x.n)/float64(l.x.p)) + 3
		by += int(3*amp*float64(l.y.n)/float64(l.y.p)) + 3
	}
	return bx, by
}

// TestBaseIsSmoothAcrossTheSeam checks invariant 3 where it can break:
// the step from the last chunk of a row or column to the first (across the
// seam) is no steeper than smooth noise allows anywhere.
func TestBaseIsSmoothAcrossTheSeam(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 3))
	for range 300 {
		w := randomWorld(t, r)
		g := mustGenerator(t, r.Uint64(), w)
		bx, by := slopeBound(g)
		y := int32(r.IntN(w.ChunksY()))
		x := int32(r.IntN(w.ChunksX()))
		last, first := int32(w.ChunksX()-1), int32(0)
		// Across the x seam: the last chunk of a row, then the first.
		west, east := g.Base(torus.ChunkPos{X: last, Y: y}), g.Base(torus.ChunkPos{X: first, Y: y})
		// Across the y seam: the last chunk of a column, then the first.
		south, north := g.Base(torus.ChunkPos{X: x, Y: int32(w.ChunksY() - 1)}), g.Base(torus.ChunkPos{X: x, Y: 0})
		for k := range Side {
			for i := range Cells {
				if d := abs(int(west.At(i+1, k)) - int(west.At(i, k))); d > bx {
					t.Fatalf("world %+v seed %d: step %d dm in chunk %v row %d, bound %d", w.Config(), g.Seed(), d, last, k, bx)
				}
				if d := abs(int(south.At(k, i+1)) - int(south.At(k, i))); d > by {
					t.Fatalf("world %+v seed %d: step %d dm in column %d, bound %d", w.Config(), g.Seed(), d, k, by)
				}
			}
			if d := abs(int(east.At(1, k)) - int(west.At(Cells, k))); d > bx {
				t.Fatalf("world %+v seed %d: step %d dm across the x seam at row %d of chunk row %d, bound %d",
					w.Config(), g.Seed(), d, k, y, bx)
			}
			if d := abs(int(north.At(k, 1)) - int(south.At(k, Cells))); d > by {
				t.Fatalf("world %+v seed %d: step %d dm across the y seam at column %d of chunk column %d, bound %d",
					w.Config(), g.Seed(), d, k, x, by)
			}
		}
	}
}

func abs(v int) int { return max(v, -v) }

func TestBaseRange(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 4))
	var limit int16
	for _, o := range octaves {
		limit += int16(o.amplitude)
	}
	g := mustGenerator(t, r.Uint64(), torus.Default())
	lo, hi := int16(0), int16(0)
	for range 2000 {
		h := g.Base(randomChunk(r, g.World()))
		for _, v := range h {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if lo < -limit || hi >= limit {
		t.Fatalf("heights span [%d, %d] dm, outside [%d, %d)", lo, hi, -limit, limit)
	}
	// Not flat: the default world's terrain spans tens of metres.
	if hi-lo < 200 {
		t.Fatalf("heights span only [%d, %d] dm over 2000 chunks", lo, hi)
	}
}

func TestBaseDoesNotAllocate(t *testing.T) {
	g := mustGenerator(t, 7, torus.Default())
	c := torus.ChunkPos{X: 12, Y: 3999}
	if n := testing.AllocsPerRun(100, func() { _ = g.Base(c) }); n != 0 {
		t.Fatalf("Base allocates %.0f times", n)
	}
}

func TestSeedsDiffer(t *testing.T) {
	w := torus.Default()
	a := mustGenerator(t, 1, w).Base(torus.ChunkPos{X: 5, Y: 5})
	b := mustGenerator(t, 2, w).Base(torus.ChunkPos{X: 5, Y: 5})
	if a == b {
		t.Fatal("seeds 1 and 2 give the same chunk")
	}
}
