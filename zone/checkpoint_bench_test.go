//go:build unix

package zone_test

import (
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// BenchmarkCheckpoint is the cost of the checkpoint stream at the
// benchmark world (BenchmarkDistribution's: 20,000 wanderers, 2,000 of
// them viewers, four nodes in quadrants), with the stream off
// (Config.NoCheckpoint) and on (the default: every 20 ticks, 1 s). The
// nodes run on zonesim's in-memory network with no faults, stepped on
// this goroutine, so the CPU is the protocol's alone (no TLS, no link
// goroutines) and the same scene runs twice. One op is one cluster tick.
// Reported per tick: the process CPU; and per second (20 ticks) the
// checkpoint payload bytes sent and received by the standbys, and those
// bytes per entity.
func BenchmarkCheckpoint(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("checkpoint=%v", on), func(b *testing.B) {
			skipShort(b)
			cfg := distributionWorld()
			rts, net := startSimCluster(b, distributionGrid(), cfg, !on)
			tick := uint64(0)
			step := func() {
				tick++
				net.Deliver(tick)
				for _, r := range rts {
					r.Step()
				}
			}
			for range benchWarmTicks {
				step()
			}
			runtime.GC()
			var s0 zone.CheckpointStats
			for _, r := range rts {
				s0 = addCkpt(s0, r.CheckpointStats())
			}
			cpu0, ticks := cpuNow(), 0
			for b.Loop() {
				step()
				ticks++
			}
			cpu := cpuNow() - cpu0
			var s zone.CheckpointStats
			for _, r := range rts {
				s = addCkpt(s, r.CheckpointStats())
			}
			n := float64(ticks)
			perSec := float64(time.Second / (50 * time.Millisecond))
			bytes := float64(s.Bytes - s0.Bytes)
			b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/tick")
			b.ReportMetric(bytes/n*perSec, "ckpt-B/s")
			b.ReportMetric(bytes/n*perSec/float64(cfg.Entities), "ckpt-B/entity/s")
			b.ReportMetric(float64(s.Entities-s0.Entities)/n*perSec, "states/s")
			b.ReportMetric(float64(s.Records), "records")
			if on && (s.Received == s0.Received || s.Records < cfg.Entities*9/10) {
				b.Fatalf("the standbys hold %d records of %d entities (%d messages applied): the scene measures nothing", s.Records, cfg.Entities, s.Received-s0.Received)
			}
		})
	}
}

func addCkpt(a, b zone.CheckpointStats) zone.CheckpointStats {
	a.Bytes += b.Bytes
	a.Entities += b.Entities
	a.Received += b.Received
	a.Records += b.Records
	return a
}

// startSimCluster runs four nodes of the wander world cfg on zonesim's
// in-memory network, the grid in quadrants, each with a sink per account
// whose viewer it holds.
func startSimCluster(b *testing.B, gc cells.GridConfig, cfg wander.Config, noCheckpoint bool) ([]*zone.Runtime, *zonesim.Network) {
	b.Helper()
	grid, err := cells.NewGrid(gc)
	if err != nil {
		b.Fatal(err)
	}
	names := []string{"zone-0", "zone-1", "zone-2", "zone-3"}
	table, err := quadrants(grid, names)
	if err != nil {
		b.Fatal(err)
	}
	net := zonesim.NewNetwork(1, zonesim.Faults{})
	leases := zonesim.NewLeases(names)
	rts := make([]*zone.Runtime, len(names))
	for i, name := range names {
		m, err := wander.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		rt, err := zone.New(zone.Config{
			Name: name, Node: i + 1, Grid: gc, Territory: leases.Territory(name, table), Transport: net.Endpoint(name),
			Clock: clock.NewFake(benchBoot), Logger: slog.New(slog.DiscardHandler),
			Accept: leases.Accept, LivePeers: leases.LivePeers(name), NoCheckpoint: noCheckpoint,
		}, m)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = rt.Close() })
		rts[i] = rt
	}
	for a := 1; a <= cfg.Accounts; a++ {
		for _, rt := range rts {
			if _, ok := rt.Viewer(account.ID(a)); ok {
				rt.Attach(account.ID(a), outbox.SinkFunc(func(uint64, [][]byte) {}))
				break
			}
		}
	}
	return rts, net
}
