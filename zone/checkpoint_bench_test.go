//go:build linux

package zone_test

import (
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
// them viewers, four nodes in quadrants): two clusters of that world, one
// with the stream off (Config.NoCheckpoint), one with it on (the default:
// every 20 ticks, 1 s), stepped in turn, a tick of one then a tick of the
// other, so that both meet the same machine (it is shared: a run of each
// after the other measured the neighbours' load more than the stream).
// The nodes run on zonesim's in-memory network with no faults, stepped on
// this goroutine, so the CPU is the protocol's alone (no TLS, no link
// goroutines). One op is one cluster tick of each. Reported per tick,
// for each: the CPU time of the stepping thread (threadCPU, of
// handoff_bench_test.go: the mutator; the garbage collector works on other threads) and the bytes
// allocated (what the collector will have to do); and per second (20
// ticks) the checkpoint payload bytes sent, and per entity. The goal is
// on the average tick; the peak it hides is reported too: a node's step
// on the ticks it sends its checkpoint against its other steps, with the
// stream on.
func BenchmarkCheckpoint(b *testing.B) {
	skipShort(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cfg := distributionWorld()
	type side struct {
		rts   []*zone.Runtime
		net   *zonesim.Network
		cpu   time.Duration
		alloc uint64
		// A node's steps that sent its checkpoint, and its others:
		// their count and CPU (the peak the average hides).
		ckptSteps, steps int
		ckptCPU, stepCPU time.Duration
	}
	sides := [2]*side{}
	for i, off := range []bool{true, false} {
		rts, net := startSimCluster(b, distributionGrid(), cfg, off)
		sides[i] = &side{rts: rts, net: net}
	}
	tick := uint64(0)
	var ms runtime.MemStats
	step := func(s *side, measure bool) {
		var c0 time.Duration
		var a0 uint64
		if measure {
			runtime.ReadMemStats(&ms)
			a0, c0 = ms.TotalAlloc, threadCPU()
		}
		s.net.Deliver(tick)
		for _, r := range s.rts {
			if !measure {
				r.Step()
				continue
			}
			last, c := r.LastCheckpoint(), threadCPU()
			r.Step()
			if d := threadCPU() - c; r.LastCheckpoint() != last {
				s.ckptSteps++
				s.ckptCPU += d
			} else {
				s.steps++
				s.stepCPU += d
			}
		}
		if measure {
			s.cpu += threadCPU() - c0
			runtime.ReadMemStats(&ms)
			s.alloc += ms.TotalAlloc - a0
		}
	}
	for range benchWarmTicks {
		tick++
		step(sides[0], false)
		step(sides[1], false)
	}
	runtime.GC()
	var s0 zone.CheckpointStats
	for _, r := range sides[1].rts {
		s0 = addCkpt(s0, r.CheckpointStats())
	}
	ticks := 0
	for b.Loop() {
		tick++
		step(sides[0], true)
		step(sides[1], true)
		ticks++
	}
	var s zone.CheckpointStats
	for _, r := range sides[1].rts {
		s = addCkpt(s, r.CheckpointStats())
	}
	n := float64(ticks)
	perSec := float64(time.Second / (50 * time.Millisecond))
	bytes := float64(s.Bytes - s0.Bytes)
	off, on := sides[0], sides[1]
	b.ReportMetric(float64(off.cpu.Microseconds())/1000/n, "off-cpu-ms/tick")
	b.ReportMetric(float64(on.cpu.Microseconds())/1000/n, "on-cpu-ms/tick")
	b.ReportMetric(float64(off.alloc)/n/1e6, "off-MB-alloc/tick")
	b.ReportMetric(float64(on.alloc)/n/1e6, "on-MB-alloc/tick")
	b.ReportMetric(bytes/n*perSec, "ckpt-B/s")
	b.ReportMetric(bytes/n*perSec/float64(cfg.Entities), "ckpt-B/entity/s")
	b.ReportMetric(float64(s.Entities-s0.Entities)/n*perSec, "states/s")
	b.ReportMetric(float64(s.Records), "records")
	if on.ckptSteps > 0 && on.steps > 0 {
		b.ReportMetric(float64(on.ckptCPU.Microseconds())/1000/float64(on.ckptSteps), "ckpt-node-tick-ms")
		b.ReportMetric(float64(on.stepCPU.Microseconds())/1000/float64(on.steps), "other-node-tick-ms")
	}
	if s.Received == s0.Received || s.Records < cfg.Entities*9/10 {
		b.Fatalf("the standbys hold %d records of %d entities (%d messages applied): the scene measures nothing", s.Records, cfg.Entities, s.Received-s0.Received)
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
