package dashboard_test

import (
	"testing"
	"time"

	"github.com/shardwise/shardwise/dashboard"
)

// BenchmarkZone is the collector's cost on a node's tick: a report every
// 50 ms with an entity sample every 250 ms (one call in five walks the
// node's entities), on one node of the 2-node game cluster.
func BenchmarkZone(b *testing.B) {
	r := startRig(b, dashboard.CollectorConfig{})
	r.step(40)
	n := r.c.Nodes[0]
	rep := n.Runtime.Step()
	hr := report(n, rep, time.Millisecond)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r.col.Zone(hr)
		r.clk.Advance(tick)
	}
	b.StopTimer()
	b.ReportMetric(float64(r.col.Snapshot().Nodes[0].Entities), "entities")
}

// BenchmarkSnapshot is one snapshot of the 2-node cluster (what each
// stream sends at most every 250 ms), encoded.
func BenchmarkSnapshot(b *testing.B) {
	r := startRig(b, dashboard.CollectorConfig{})
	r.step(40)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = r.col.Snapshot()
	}
}
