package game_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/game"
)

// BenchmarkWorld is the world benchmark: one node, 2,000 players
// (a master and a pet each, so 2,000 subscribers with 11 × 11 × 3 views)
// and about 16,000 restless mobs, so about 20,000 moving entities. The
// world is warmed up until it is stocked; then each op is one tick.
// Reported per tick: wall and CPU time p50/p99 (CPU is this process's
// user+system time from getrusage, GC included: the machine is shared, so
// wall time mostly measures the neighbours), allocations (allocs/op), and
// what the outbox encoded: bytes once per audience (encoded-B/tick) next to
// the bytes that encoding each message per recipient would produce — every
// delivered frame encoded for its recipient alone, so exactly the bytes
// delivered (delivered-B/tick) — and the same for frame counts
// (frames-encoded/tick vs frames/tick).
func BenchmarkWorld(b *testing.B) {
	cfg := game.Config{
		Seed:              1,
		Players:           2000,
		Area:              4000,
		DenChance:         0.11,
		DenCapacity:       8,
		WanderChance:      1,
		MaterialiseBudget: 100_000,
	}
	g, err := game.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for a := account.ID(1); a <= account.ID(cfg.Players); a++ {
		g.Attach(a, discardSink{})
	}
	var r game.Report
	for warm := 0; warm < 1200; warm++ {
		r = g.Step()
		if r.Entities >= 22_000 { // 20k movers + the dens
			break
		}
	}
	b.Logf("warm: tick %d, %d entities", r.Tick, r.Entities)
	durs := make([]time.Duration, 0, 1024)
	cpus := make([]time.Duration, 0, 1024)
	var encoded, delivered, frames, framesEncoded, batches, entities float64
	runtime.GC() // the warm-up's garbage is not the measured ticks' cost
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start, cpu0 := time.Now(), processCPU()
		r := g.Step()
		durs = append(durs, time.Since(start))
		cpus = append(cpus, time.Duration(processCPU()-cpu0))
		encoded += float64(r.Outbox.BytesEncoded)
		delivered += float64(r.Outbox.BytesDelivered)
		frames += float64(r.Outbox.FramesDelivered)
		framesEncoded += float64(r.Outbox.FramesEncoded)
		batches += float64(r.Outbox.Batches)
		entities += float64(r.Entities)
	}
	n := float64(len(durs))
	b.ReportMetric(float64(game.Percentile(durs, 50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(game.Percentile(durs, 99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(game.Percentile(cpus, 50).Microseconds())/1000, "cpu-p50-ms")
	b.ReportMetric(float64(game.Percentile(cpus, 99).Microseconds())/1000, "cpu-p99-ms")
	b.ReportMetric(encoded/n, "encoded-B/tick")
	b.ReportMetric(delivered/n, "delivered-B/tick")
	b.ReportMetric(frames/n, "frames/tick")
	b.ReportMetric(framesEncoded/n, "frames-encoded/tick")
	b.ReportMetric(batches/n, "batches/tick")
	b.ReportMetric(entities/n, "entities")
}

type discardSink struct{}

func (discardSink) Deliver(uint64, [][]byte) {}
