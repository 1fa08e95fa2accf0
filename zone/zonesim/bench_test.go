package zonesim_test

import (
	"testing"

	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// BenchmarkSimulation4Nodes2000Entities is the speed goal: 4
// nodes, 2,000 wanderers roaming the whole world with 100 clients, 1,000
// ticks, every property checked at every tick, the default faults and
// schedule (goal: under 2 s of CPU without -race).
func BenchmarkSimulation4Nodes2000Entities(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		res, err := zonesim.Run(zonesim.Config{Seed: uint64(i + 1), Ticks: 1000, NoLeaseLoss: true,
			Wander: wander.Config{Entities: 2000, Accounts: 100, Roam: 200, Speed: 20}})
		if err != nil {
			b.Logf("seed %d: %v", i+1, err)
		}
		b.ReportMetric(float64(res.Handoffs), "handoffs/op")
	}
}
