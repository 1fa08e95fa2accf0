package interest

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/shardwise/shardwise/torus"
)

// benchWorld is the load on one node: 2,000 subscribers holding
// 11 × 11 × 3 views and 20,000 walking entities, all in a 200 × 200 chunk
// (6.4 km) square that straddles the seam.
type benchWorld struct {
	world torus.World
	subs  *Subscriptions[uint64]
	vis   *Visibility[uint64, eid]
	pos   []torus.Pos
	vel   []torus.Pos
}

func newBenchWorld(b *testing.B, subscribers, entities int) *benchWorld {
	b.Helper()
	w := torus.Default()
	rng := rand.New(rand.NewPCG(1, 2))
	bw := &benchWorld{world: w, subs: NewSubscriptions[uint64](w)}
	bw.vis = NewVisibility[uint64, eid](bw.subs)
	edge := w.ChunkEdge()
	span := 200 * edge
	var m Manifest
	for s := range subscribers {
		anchor := w.ChunkOf(torus.Pos{X: rng.Float64()*span - span/2, Y: rng.Float64()*span - span/2, Z: 100})
		bw.subs.ViewManifest(uint64(s), anchor, DefaultView(), &m)
		bw.subs.Apply(uint64(s), m)
		for _, c := range m.Added {
			bw.subs.MarkSent(uint64(s), c)
		}
	}
	for range entities {
		bw.pos = append(bw.pos, torus.Pos{X: rng.Float64()*span - span/2, Y: rng.Float64()*span - span/2, Z: 100})
		// 5 m/s in a random direction: 0.25 m per 50 ms tick.
		a := rng.Float64() * 6.283185307179586
		bw.vel = append(bw.vel, torus.Pos{X: 0.25 * math.Cos(a), Y: 0.25 * math.Sin(a)})
	}
	bw.step()
	bw.vis.Drain()
	return bw
}

func (bw *benchWorld) step() {
	for i := range bw.pos {
		p := &bw.pos[i]
		p.X += bw.vel[i].X
		p.Y += bw.vel[i].Y
		bw.vis.Reindex(eid(i+1), bw.world.ChunkOf(*p))
	}
}

// BenchmarkVisibilityTick is one 20 Hz tick of the load: reindex
// 20,000 walking entities, then drain. One op = one tick.
func BenchmarkVisibilityTick(b *testing.B) {
	bw := newBenchWorld(b, 2000, 20000)
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		bw.step()
		bw.vis.Drain()
	}
	cpu.report(b)
}

// BenchmarkReindexSameChunk is the common case: an entity moved but stayed
// in its chunk. One op = one Reindex.
func BenchmarkReindexSameChunk(b *testing.B) {
	bw := newBenchWorld(b, 2000, 20000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		bw.vis.Reindex(eid(i%20000+1), bw.world.ChunkOf(bw.pos[i%20000]))
		i++
	}
}

// BenchmarkReindexCrossChunk moves one entity back and forth between two
// adjacent chunks of the bench world (each held by a few subscribers, most
// holding both), then drains every 64 moves. One op = one crossing.
func BenchmarkReindexCrossChunk(b *testing.B) {
	bw := newBenchWorld(b, 2000, 20000)
	a, c := ChunkPos{X: 10, Y: 10, Slab: 0}, ChunkPos{X: 11, Y: 10, Slab: 0}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i&1 == 0 {
			bw.vis.Reindex(1, a)
		} else {
			bw.vis.Reindex(1, c)
		}
		if i&63 == 63 {
			bw.vis.Drain()
		}
		i++
	}
}

// BenchmarkDrainChunkResend unsends and resends one populated chunk to a
// subscriber on alternate ticks and drains: 50 residents vanish, then
// appear. One op = one tick (events + drain).
func BenchmarkDrainChunkResend(b *testing.B) {
	w := torus.Default()
	subs := NewSubscriptions[uint64](w)
	vis := NewVisibility[uint64, eid](subs)
	c := ChunkPos{X: 1, Y: 1}
	for e := range eid(50) {
		vis.Reindex(e+1, c)
	}
	subs.Announce(1, c)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i&1 == 0 {
			subs.MarkSent(1, c)
		} else {
			subs.Unsend(1, c)
		}
		if n := len(vis.Drain()); n != 1 {
			b.Fatalf("deliveries = %d", n)
		}
		i++
	}
}

// BenchmarkViewStep walks one subscriber's anchor one column per op: the
// manifest diff, Apply and MarkSent of 33 new chunks, release of 33 old.
func BenchmarkViewStep(b *testing.B) {
	w := torus.Default()
	subs := NewSubscriptions[uint64](w)
	var m Manifest
	anchor := ChunkPos{X: 0, Y: 0}
	b.ReportAllocs()
	for b.Loop() {
		anchor.X++
		subs.ViewManifest(1, anchor, DefaultView(), &m)
		subs.Apply(1, m)
		for _, c := range m.Added {
			subs.MarkSent(1, c)
		}
	}
}

type cpuClock struct {
	start int64
	ok    bool
}

// startCPU collects the setup's garbage first, so that the GC work charged
// to the measured loop is the loop's own.
func startCPU() cpuClock {
	runtime.GC()
	n, ok := processCPU()
	return cpuClock{start: n, ok: ok}
}

// report adds cpu-ns/op: process CPU time per op (GC included). The bench
// machine is shared, so wall time swings with other people's load.
func (c cpuClock) report(b *testing.B) {
	if n, ok := processCPU(); ok && c.ok && b.N > 0 {
		b.ReportMetric(float64(n-c.start)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkAppendObserversOf is the outbox's per-message question: who sees
// this entity? One op = one entity (~6 observers in the bench world).
func BenchmarkAppendObserversOf(b *testing.B) {
	bw := newBenchWorld(b, 2000, 20000)
	var dst []uint64
	b.ReportAllocs()
	cpu := startCPU()
	i := 0
	for b.Loop() {
		dst = bw.vis.AppendObserversOf(dst[:0], eid(i%20000+1))
		i += 7919 // stride through entities like a dirty log would
	}
	cpu.report(b)
}
