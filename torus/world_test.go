package torus_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

const W = 128_000.0 // default width and height

func mustWorld(t testing.TB, cfg torus.Config) torus.World {
	t.Helper()
	w, err := torus.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return w
}

func TestDefaults(t *testing.T) {
	w := torus.Default()
	want := torus.Config{Width: 128_000, Height: 128_000, ChunkEdge: 32, SlabHeight: 256}
	if got := w.Config(); got != want {
		t.Fatalf("Config() = %+v, want %+v", got, want)
	}
	if torus.DefaultConfig() != want {
		t.Fatalf("DefaultConfig() = %+v", torus.DefaultConfig())
	}
	if w.ChunksX() != 4000 || w.ChunksY() != 4000 {
		t.Fatalf("chunks %d×%d, want 4000×4000", w.ChunksX(), w.ChunksY())
	}
	if w.Width() != W || w.Height() != W || w.ChunkEdge() != 32 || w.SlabHeight() != 256 {
		t.Fatalf("accessors %v %v %v %v", w.Width(), w.Height(), w.ChunkEdge(), w.SlabHeight())
	}
	if mustWorld(t, torus.Config{}) != w {
		t.Fatal("New(zero config) differs from Default()")
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		cfg   torus.Config
		field string // "" means valid
	}{
		{"zero is default", torus.Config{}, ""},
		{"explicit default", torus.DefaultConfig(), ""},
		{"small world", torus.Config{Width: 320, Height: 224, ChunkEdge: 32, SlabHeight: 10}, ""},
		{"one chunk", torus.Config{Width: 32, Height: 32}, ""},
		{"max extent", torus.Config{Width: 1 << 32, Height: 1 << 32, ChunkEdge: 1 << 16}, ""},
		{"negative width", torus.Config{Width: -128_000}, "Width"},
		{"negative height", torus.Config{Height: -1}, "Height"},
		{"negative chunk edge", torus.Config{ChunkEdge: -32}, "ChunkEdge"},
		{"negative slab", torus.Config{SlabHeight: -256}, "SlabHeight"},
		{"width not multiple", torus.Config{Width: 128_001}, "Width"},
		{"height not multiple", torus.Config{Height: 100}, "Height"},
		{"width too large", torus.Config{Width: 1<<32 + 32}, "Width"},
		{"too many chunks", torus.Config{Width: 1 << 32, Height: 32, ChunkEdge: 1}, "Width"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			_, newErr := torus.New(c.cfg)
			if c.field == "" {
				if err != nil || newErr != nil {
					t.Fatalf("Validate = %v, New = %v; want valid", err, newErr)
				}
				return
			}
			if !errors.Is(err, errcode.ErrConfigInvalid) || errcode.Of(err) != errcode.ConfigInvalid {
				t.Fatalf("Validate = %v; want a config error", err)
			}
			var ce *errcode.ConfigError
			if !errors.As(err, &ce) || ce.Field != c.field {
				t.Fatalf("Validate = %v; want field %q", err, c.field)
			}
			if !errors.Is(newErr, errcode.ErrConfigInvalid) {
				t.Fatalf("New = %v; want a config error", newErr)
			}
		})
	}
}

func TestNormaliseTable(t *testing.T) {
	w := torus.Default()
	below := math.Nextafter(W, 0)
	cases := []struct{ in, want float64 }{
		{0, 0},
		{5, 5},
		{127_990, 127_990},
		{W, 0},
		{W + 5, 5},
		{2 * W, 0},
		{2*W + 7.25, 7.25},
		{-5, 127_995},
		{-0.5, 127_999.5},
		{-W, 0},
		{-W - 5, 127_995},
		{-2*W + 1, 1},
		{-1e-20, below}, // true value is just below W: stays in the last chunk
		{math.Copysign(0, -1), 0},
		{1e15 + 3, 3},
		{-1e15 - 3, W - 3},
		{-1e15, 0}, // an exact multiple: may be −0, which == 0
	}
	for _, c := range cases {
		if got := w.NormaliseX(c.in); got != c.want {
			t.Errorf("NormaliseX(%v) = %v, want %v", c.in, got, c.want)
		}
		if got := w.NormaliseY(c.in); got != c.want {
			t.Errorf("NormaliseY(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	p := w.Normalise(torus.Pos{X: -5, Y: W + 3, Z: -700})
	if p != (torus.Pos{X: 127_995, Y: 3, Z: -700}) {
		t.Errorf("Normalise = %+v", p)
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if got := w.NormaliseX(bad); !math.IsNaN(got) {
			t.Errorf("NormaliseX(%v) = %v, want NaN", bad, got)
		}
	}
}

func TestNormaliseRectangular(t *testing.T) {
	w := mustWorld(t, torus.Config{Width: 320, Height: 224})
	p := w.Normalise(torus.Pos{X: -1, Y: -1})
	if p.X != 319 || p.Y != 223 {
		t.Fatalf("Normalise(-1,-1) = %+v, want (319, 223)", p)
	}
	if got := w.DeltaX(10, 300); got != -30 {
		t.Errorf("DeltaX = %v, want -30", got)
	}
	if got := w.DeltaY(10, 200); got != -34 {
		t.Errorf("DeltaY = %v, want -34", got)
	}
	if got := w.DeltaX(0, 160); got != 160 {
		t.Errorf("DeltaX tie = %v, want +160", got)
	}
	if got := w.DeltaY(0, 112); got != 112 {
		t.Errorf("DeltaY tie = %v, want +112", got)
	}
}

func TestDeltaTable(t *testing.T) {
	w := torus.Default()
	cases := []struct {
		name    string
		a, b    float64
		want    float64
		wantRev float64
	}{
		{"same", 7, 7, 0, 0},
		{"plain", 100, 250, 150, -150},
		{"across seam east", 127_990, 5, 15, -15},
		{"across seam from 0", 0, 127_999, -1, 1},
		{"just under half", 0, 63_999, 63_999, -63_999},
		{"just over half", 0, 64_001, -63_999, 63_999},
		{"tie gives +W/2", 0, 64_000, 64_000, 64_000},
		{"tie across seam", 100_000, 36_000, 64_000, 64_000},
		{"negative raw", -5, 5, 10, -10},
		{"negative across seam", -10, 127_995, 5, -5},
		{"raw far away", 5, 5 + 3*W, 0, 0},
		{"raw negative far", 5, 5 - 7*W + 20, 20, -20},
		{"fractional across seam", 127_999.75, 0.25, 0.5, -0.5},
	}
	for _, c := range cases {
		if got := w.DeltaX(c.a, c.b); got != c.want {
			t.Errorf("%s: DeltaX(%v, %v) = %v, want %v", c.name, c.a, c.b, got, c.want)
		}
		if got := w.DeltaX(c.b, c.a); got != c.wantRev {
			t.Errorf("%s: DeltaX(%v, %v) = %v, want %v", c.name, c.b, c.a, got, c.wantRev)
		}
		if got := w.DeltaY(c.a, c.b); got != c.want {
			t.Errorf("%s: DeltaY(%v, %v) = %v, want %v", c.name, c.a, c.b, got, c.want)
		}
	}
}

func TestDistanceTable(t *testing.T) {
	w := torus.Default()
	cases := []struct {
		name string
		a, b torus.Pos
		want float64
	}{
		{"same", torus.Pos{X: 1, Y: 2}, torus.Pos{X: 1, Y: 2}, 0},
		{"3-4-5", torus.Pos{}, torus.Pos{X: 3, Y: 4}, 5},
		{"3-4-5 across both seams", torus.Pos{X: 127_999, Y: 127_998}, torus.Pos{X: 2, Y: 2}, 5},
		{"z ignored", torus.Pos{Z: 0}, torus.Pos{X: 3, Y: 4, Z: 1000}, 5},
		{"seam x", torus.Pos{X: 5}, torus.Pos{X: 127_990}, 15},
		{"negative coords", torus.Pos{X: -3, Y: -4}, torus.Pos{}, 5},
		{"antipode", torus.Pos{}, torus.Pos{X: 64_000, Y: 64_000}, 64_000 * math.Sqrt2},
	}
	for _, c := range cases {
		if got := w.Distance(c.a, c.b); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: Distance = %v, want %v", c.name, got, c.want)
		}
		if got := w.Distance(c.b, c.a); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: Distance reversed = %v, want %v", c.name, got, c.want)
		}
		if got := w.DistanceSq(c.a, c.b); math.Abs(got-c.want*c.want) > 1e-6 {
			t.Errorf("%s: DistanceSq = %v, want %v", c.name, got, c.want*c.want)
		}
	}
	if !w.Within(torus.Pos{X: 127_999}, torus.Pos{X: 9}, 10) {
		t.Error("Within: 10 m across the seam should be within 10")
	}
	if w.Within(torus.Pos{X: 127_999}, torus.Pos{X: 9.5}, 10) {
		t.Error("Within: 10.5 m should not be within 10")
	}
	d := w.Delta(torus.Pos{X: 127_990, Y: 3, Z: 10}, torus.Pos{X: 5, Y: 127_999, Z: 4})
	if d != (torus.Pos{X: 15, Y: -4, Z: -6}) {
		t.Errorf("Delta = %+v", d)
	}
	if got := w.Translate(torus.Pos{X: 127_990, Y: 3, Z: 1}, d); got != (torus.Pos{X: 5, Y: 127_999, Z: -5}) {
		t.Errorf("Translate = %+v", got)
	}
}

func TestPosFinite(t *testing.T) {
	if !(torus.Pos{X: -1, Y: 1e300, Z: 0}).Finite() {
		t.Error("finite position reported non-finite")
	}
	for _, p := range []torus.Pos{{X: math.NaN()}, {Y: math.Inf(1)}, {Z: math.Inf(-1)}} {
		if p.Finite() {
			t.Errorf("%+v reported finite", p)
		}
	}
}

// naiveDelta picks, among b−a+kW for a few k, the one of least magnitude,
// preferring the positive one on a tie. It needs |b−a| < 3W.
func naiveDelta(a, b, width float64) float64 {
	best := math.Inf(1)
	for k := -3.0; k <= 3; k++ {
		d := b - a + k*width
		if math.Abs(d) < math.Abs(best) || (math.Abs(d) == math.Abs(best) && d > best) {
			best = d
		}
	}
	return best
}

// dyadic returns a random multiple of 1/1024 in [lo, hi): sums and
// differences of such values stay exact, so properties can demand equality.
func dyadic(r *rand.Rand, lo, hi float64) float64 {
	steps := int64((hi - lo) * 1024)
	return lo + float64(r.Int64N(steps))/1024
}

func TestDeltaMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	w := torus.Default()
	for i := range 200_000 {
		a := dyadic(r, -W, 2*W)
		b := dyadic(r, -W, 2*W)
		if i%4 == 0 { // bias towards seam-straddling pairs
			a = dyadic(r, W-300, W)
			b = dyadic(r, 0, 300)
		}
		got := w.DeltaX(a, b)
		if want := naiveDelta(a, b, W); got != want {
			t.Fatalf("DeltaX(%v, %v) = %v, naive %v", a, b, got, want)
		}
		if got <= -W/2 || got > W/2 {
			t.Fatalf("DeltaX(%v, %v) = %v outside (−W/2, W/2]", a, b, got)
		}
		if back := w.DeltaX(b, a); got != W/2 && back != -got {
			t.Fatalf("DeltaX not antisymmetric: %v vs %v", got, back)
		}
	}
}

// TestTranslatedScene is the central property: the wrap-aware answer for
// two points equals the plain Euclidean answer for the same scene shifted
// so that no seam lies between them (a moved to the middle of the world).
func TestTranslatedScene(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, cfg := range []torus.Config{{}, {Width: 320, Height: 224}, {Width: 96_000, Height: 64_000, ChunkEdge: 16}} {
		w := mustWorld(t, cfg)
		width, height := w.Width(), w.Height()
		for range 50_000 {
			a := torus.Pos{X: dyadic(r, -width, 2*width), Y: dyadic(r, -height, 2*height), Z: dyadic(r, -1000, 1000)}
			// b within a quarter world of a, often across a seam.
			b := torus.Pos{
				X: a.X + dyadic(r, -width/4, width/4),
				Y: a.Y + dyadic(r, -height/4, height/4),
				Z: dyadic(r, -1000, 1000),
			}
			shift := torus.Pos{X: width/2 - w.NormaliseX(a.X), Y: height/2 - w.NormaliseY(a.Y)}
			a2 := w.Translate(a, shift)
			b2 := w.Translate(b, shift)
			// No seam between a2 (at the centre) and b2 (within a quarter).
			plainDX, plainDY := b2.X-a2.X, b2.Y-a2.Y
			if dx := w.DeltaX(a.X, b.X); dx != plainDX {
				t.Fatalf("%+v: DeltaX(%v, %v) = %v, translated %v", cfg, a.X, b.X, dx, plainDX)
			}
			if dy := w.DeltaY(a.Y, b.Y); dy != plainDY {
				t.Fatalf("%+v: DeltaY(%v, %v) = %v, translated %v", cfg, a.Y, b.Y, dy, plainDY)
			}
			if got, want := w.DistanceSq(a, b), plainDX*plainDX+plainDY*plainDY; got != want {
				t.Fatalf("%+v: DistanceSq = %v, translated %v", cfg, got, want)
			}
			if got, want := w.Distance(a, b), math.Hypot(plainDX, plainDY); math.Abs(got-want) > 1e-9*want {
				t.Fatalf("%+v: Distance = %v, translated %v", cfg, got, want)
			}
			// Chunks follow the scene when the shift is whole chunks: the
			// wrap-aware chunk offset equals the plain one after the shift.
			edge := w.ChunkEdge()
			cshift := torus.Pos{X: math.Floor(shift.X/edge) * edge, Y: math.Floor(shift.Y/edge) * edge}
			ca, cb := w.ChunkOf(a), w.ChunkOf(b)
			ca2, cb2 := w.ChunkOf(w.Translate(a, cshift)), w.ChunkOf(w.Translate(b, cshift))
			dx, dy, _ := w.ChunkDelta(ca, cb)
			if px, py := int(cb2.X)-int(ca2.X), int(cb2.Y)-int(ca2.Y); dx != px || dy != py {
				t.Fatalf("%+v: ChunkDelta %d,%d, translated plain %d,%d", cfg, dx, dy, px, py)
			}
			if d, want := w.ChunkDistance(ca, cb), max(abs(int(cb2.X)-int(ca2.X)), abs(int(cb2.Y)-int(ca2.Y))); d != want {
				t.Fatalf("%+v: ChunkDistance %d, translated %d", cfg, d, want)
			}
		}
	}
}

func TestDeltaPrecisionNearby(t *testing.T) {
	// Without a seam the delta is exactly b−a, however small.
	w := torus.Default()
	for _, c := range []struct{ a, b float64 }{
		{1e-9, 2e-9}, {63_999.999_999, 64_000}, {0.1, 0.3}, {127_999.9, 127_999.95},
	} {
		if got := w.DeltaX(c.a, c.b); got != c.b-c.a {
			t.Errorf("DeltaX(%v, %v) = %v, want exactly %v", c.a, c.b, got, c.b-c.a)
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
