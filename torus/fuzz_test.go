package torus_test

import (
	"math"
	"testing"

	"github.com/shardwise/shardwise/torus"
)

// FuzzGeometry checks the range invariants of every function for arbitrary
// float64 input, including NaN, infinities, −0 and huge values: nothing
// panics, finite input gives in-range output, and ChunkOf always returns a
// normalised chunk.
func FuzzGeometry(f *testing.F) {
	f.Add(5.0, 127_990.0, -0.5, 64_000.0, 0.0, 1e300)
	f.Add(-1e-20, -128_000.0, math.Copysign(0, -1), 1e15+3, -62272.00000000001, 255.999)
	f.Add(math.NaN(), math.Inf(1), math.Inf(-1), 0.0, 0.0, 0.0)
	w := torus.Default()
	f.Fuzz(func(t *testing.T, ax, ay, bx, by, az, bz float64) {
		a, b := torus.Pos{X: ax, Y: ay, Z: az}, torus.Pos{X: bx, Y: by, Z: bz}
		for _, c := range []torus.ChunkPos{w.ChunkOf(a), w.ChunkOf(b)} {
			if c.X < 0 || int(c.X) >= w.ChunksX() || c.Y < 0 || int(c.Y) >= w.ChunksY() {
				t.Fatalf("ChunkOf gave an unnormalised chunk %+v", c)
			}
		}
		n := w.Normalise(a)
		d := w.Delta(a, b)
		dist := w.Distance(a, b)
		if !a.Finite() || !b.Finite() {
			return
		}
		if n.X < 0 || n.X >= w.Width() || n.Y < 0 || n.Y >= w.Height() {
			t.Fatalf("Normalise(%+v) = %+v out of range", a, n)
		}
		if !(d.X > -w.Width()/2 && d.X <= w.Width()/2) || !(d.Y > -w.Height()/2 && d.Y <= w.Height()/2) {
			// b − a itself can overflow to ±Inf for huge finite inputs.
			if !math.IsInf(bx-ax, 0) && !math.IsInf(by-ay, 0) {
				t.Fatalf("Delta(%+v, %+v) = %+v out of range", a, b, d)
			}
		}
		if !math.IsNaN(dist) && (dist < 0 || dist > math.Hypot(w.Width(), w.Height())/2) {
			t.Fatalf("Distance = %v out of range", dist)
		}
		ca, cb := w.ChunkOf(a), w.ChunkOf(b)
		dx, dy, _ := w.ChunkDelta(ca, cb)
		if dx <= -w.ChunksX()/2-1 || dx > w.ChunksX()/2 || dy <= -w.ChunksY()/2-1 || dy > w.ChunksY()/2 {
			t.Fatalf("ChunkDelta(%+v, %+v) = %d,%d out of range", ca, cb, dx, dy)
		}
	})
}
