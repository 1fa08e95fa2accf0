package zonesim_test

import (
	"testing"

	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// benchConfig is the speed scene: 4 nodes, 2,000 wanderers
// roaming the whole world with 100 clients, 1,000 ticks, the default
// faults and schedule but the lease loss. One seed for every op, so that
// every op does the same work (seed 2 of this scene finds a blink at
// tick 212, and an op that stops there would drag the mean down).
func benchConfig() zonesim.Config {
	return zonesim.Config{Seed: 1, Ticks: 1000, NoLeaseLoss: true,
		Wander: wander.Config{Entities: 2000, Accounts: 100, Roam: 200, Speed: 20}}
}

// BenchmarkSimulation4Nodes2000Entities is the speed goal (under
// 2 s of CPU without -race), every property checked at every tick.
func BenchmarkSimulation4Nodes2000Entities(b *testing.B) {
	benchSimulation(b, benchConfig())
}

// BenchmarkSimulationRuntime4Nodes2000Entities is the same scene with
// the checks off (Config.NoChecks): the runtimes and the network alone.
// The difference between the two is what the checks cost.
func BenchmarkSimulationRuntime4Nodes2000Entities(b *testing.B) {
	cfg := benchConfig()
	cfg.NoChecks = true
	benchSimulation(b, cfg)
}

func benchSimulation(b *testing.B, cfg zonesim.Config) {
	b.ReportAllocs()
	for b.Loop() {
		res, err := zonesim.Run(cfg)
		if err != nil {
			b.Logf("seed %d: %v", cfg.Seed, err)
		}
		b.ReportMetric(float64(res.Ticks), "ticks/op")
		b.ReportMetric(float64(res.Handoffs), "handoffs/op")
	}
}
