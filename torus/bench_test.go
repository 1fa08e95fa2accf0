package torus_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/torus"
)

// benchPositions are spread over the whole world and a bit beyond, so the
// benchmarks exercise the seam and negative paths, not one cached branch.
func benchPositions(n int) []torus.Pos {
	r := rand.New(rand.NewPCG(1, 1))
	ps := make([]torus.Pos, n)
	for i := range ps {
		ps[i] = torus.Pos{X: r.Float64()*1.1*W - 0.05*W, Y: r.Float64()*1.1*W - 0.05*W, Z: r.Float64()*2000 - 1000}
	}
	return ps
}

var (
	sinkF float64
	sinkC torus.ChunkPos
	sinkP torus.Pos
	sinkI int
)

func BenchmarkDistance(b *testing.B) {
	w := torus.Default()
	ps := benchPositions(1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sinkF = w.Distance(ps[i&1023], ps[(i+1)&1023])
		i++
	}
}

func BenchmarkDistanceSq(b *testing.B) {
	w := torus.Default()
	ps := benchPositions(1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sinkF = w.DistanceSq(ps[i&1023], ps[(i+1)&1023])
		i++
	}
}

// BenchmarkDistancePlain is the baseline the wrap-aware distance is
// measured against: plain Euclid on raw coordinates (what the seed's
// gameplay layer did, wrongly).
func BenchmarkDistancePlain(b *testing.B) {
	ps := benchPositions(1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p, q := ps[i&1023], ps[(i+1)&1023]
		dx, dy := q.X-p.X, q.Y-p.Y
		sinkF = dx*dx + dy*dy
		i++
	}
}

func BenchmarkNormalise(b *testing.B) {
	w := torus.Default()
	ps := benchPositions(1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sinkP = w.Normalise(ps[i&1023])
		i++
	}
}

func BenchmarkChunkOf(b *testing.B) {
	w := torus.Default()
	ps := benchPositions(1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sinkC = w.ChunkOf(ps[i&1023])
		i++
	}
}

func BenchmarkChunkDistance(b *testing.B) {
	w := torus.Default()
	ps := benchPositions(1024)
	cs := make([]torus.ChunkPos, len(ps))
	for i, p := range ps {
		cs[i] = w.ChunkOf(p)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sinkI = w.ChunkDistance(cs[i&1023], cs[(i+1)&1023])
		i++
	}
}

// BenchmarkChunksWithinView walks one client's view volume (11 × 11 × 3).
func BenchmarkChunksWithinView(b *testing.B) {
	w := torus.Default()
	center := w.ChunkOf(torus.Pos{X: 5, Y: 127_990})
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for c := range w.ChunksWithin(center, 5, 1) {
			n += int(c.X)
		}
		sinkI = n
	}
}

// BenchmarkChunkOfPlain is the baseline for ChunkOf: floor division on raw
// coordinates with no wrap (the seed's unwrapped gameplay keys).
func BenchmarkChunkOfPlain(b *testing.B) {
	ps := benchPositions(1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := ps[i&1023]
		sinkC = torus.ChunkPos{X: int32(math.Floor(p.X / 32)), Y: int32(math.Floor(p.Y / 32)), Slab: int32(math.Floor(p.Z / 256))}
		i++
	}
}
