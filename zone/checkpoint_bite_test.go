package zone_test

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// TestKillSimulationBites runs the kill simulation (zonesim.Config.Kill,
// the seeds of TestKillNode) over each planted bug of the checkpoint
// protocol (checkpoint_export_test.go's PlantCheckpoint) and requires it
// to be caught: a seed counts only if it passes without the bug. Each
// variant starts at the seed of its first catch below (then the rest)
// and stops at its first catch.
//
// Seeds each needed, measured when the test was written
// (SHARDWISE_BITE_COUNT=1 runs all 40 seeds of each and counts):
//
//	variant   first catch   catches in 40 seeds   caught by
//	noquery   seed 1        4                    one simulator (an entity a live node holds adopted too)
//	noraise   seed 1        18                   epoch raised (restored at the dead node's epoch)
//	nofence   seed 4        7                    invariant 9 (a stream started from a node the table does not name)
//	notake    seed 4        3                    recovered (an entity the dead node took after its last checkpoint is nowhere)
//
// "nomoved" (a checkpoint arriving in part loses an entity that walked
// between two regions' streams) needs the kill to fall between the two
// messages' arrivals, which no seed here draws: the scenario script
// testdata/scenarios/ckpt_partial_arrival.txt catches it (and
// ckpt_partial_arrival_full.txt, where the checkpoint that moves the
// entity is a snapshot).
func TestKillSimulationBites(t *testing.T) {
	t.Parallel()
	seeds, _, err := zonesim.Seeds()
	if err != nil {
		t.Fatal(err)
	}
	seeds = seeds[:min(len(seeds), 40)]
	for _, tc := range []struct {
		bug   string
		first uint64 // the first catch, in the table above
	}{{"noquery", 1}, {"noraise", 1}, {"nofence", 4}, {"notake", 4}} {
		t.Run(tc.bug, func(t *testing.T) {
			t.Parallel()
			requireKillCatch(t, seeds, tc.first, tc.bug, func(r *zone.Runtime) { r.PlantCheckpoint(tc.bug) })
		})
	}
}

// requireKillCatch runs the kill simulation over seeds with plant applied
// to every node and fails unless some seed that passes without it fails
// with it. It starts at seed from (the first catch recorded; the seeds
// before it run last) and stops at the first catch, unless
// SHARDWISE_BITE_COUNT is set, which runs every seed in order and logs
// how many caught the bug. A seed passes without the bug if its
// unplanted run passes through the tick where the planted run broke.
func requireKillCatch(t *testing.T, seeds []uint64, from uint64, bug string, plant func(*zone.Runtime)) {
	t.Helper()
	count := os.Getenv("SHARDWISE_BITE_COUNT") != ""
	if k := slices.Index(seeds, from); k > 0 && !count {
		seeds = append(seeds[k:len(seeds):len(seeds)], seeds[:k]...)
	}
	first, catches := uint64(0), 0
	for _, seed := range seeds {
		if _, known := zonesim.KnownKillFailure(seed); known {
			continue
		}
		_, err := zonesim.Run(zonesim.Config{Seed: seed, Ticks: 150, Kill: true,
			Started: func(_ int, r *zone.Runtime) { plant(r) }})
		if err == nil {
			continue
		}
		if _, base := zonesim.Run(zonesim.Config{Seed: seed, Ticks: 150, Until: brokeAt(err), Kill: true}); base != nil {
			t.Logf("seed %d fails without the bug too: %v", seed, base)
			continue
		}
		catches++
		if first == 0 {
			first = seed
			t.Logf("%s caught at seed %d: %v", bug, seed, err)
		}
		if !count {
			return
		}
	}
	if count {
		t.Logf("%s: first catch at seed %d, %d catches in %d seeds", bug, first, catches, len(seeds))
	}
	if catches == 0 {
		t.Errorf("%s: not caught in %d seeds", bug, len(seeds))
	}
}

// TestKillLaterClaimBites: a peer asked by an early adopter (one that
// adopts the regions a move in flight gave away from the dead node) whose
// own table does not yet give the dead node's regions away answers from
// the records it will adopt then (claims). Planted "nolaterclaim" (it
// answers from its rounds only), the early adopter restores an entity
// that walked between the two regions' streams from its older record:
// the kill run with a 5-tick lease TTL, seed 1, catches it (state loss),
// and passes without it.
func TestKillLaterClaimBites(t *testing.T) {
	t.Parallel()
	cfg := zonesim.Config{Seed: 1, Ticks: 150, Kill: true, KillTTL: 5}
	if res, err := zonesim.Run(cfg); err != nil || res.Restored == 0 {
		t.Fatalf("without the bug: %v (%d restored)", err, res.Restored)
	}
	cfg.Started = func(_ int, r *zone.Runtime) { r.PlantCheckpoint("nolaterclaim") }
	if _, err := zonesim.Run(cfg); err == nil {
		t.Fatal("nolaterclaim: not caught")
	} else {
		t.Logf("nolaterclaim caught: %v", err)
	}
}

// TestKillNewestRecordBites: an entity of the dead node walked from
// region 12 into region 15 (both its own), and a table then moved region
// 12 away; the standby of both holds a record of it in each stream, the
// one left in region 12's older. It adopts region 12's stream in one
// round (a move in flight) and region 15's in a later one (once the
// failover table comes), and must restore the newer record in the first.
// Planted "nonewest" (a round restores its own streams' record), the kill
// run of seed 4 catches it (state loss, 25 m), and passes without it.
func TestKillNewestRecordBites(t *testing.T) {
	t.Parallel()
	cfg := zonesim.Config{Seed: 4, Ticks: 200, Kill: true}
	if res, err := zonesim.Run(cfg); err != nil || res.Restored == 0 {
		t.Fatalf("without the bug: %v (%d restored)", err, res.Restored)
	}
	cfg.Started = func(_ int, r *zone.Runtime) { r.PlantCheckpoint("nonewest") }
	if _, err := zonesim.Run(cfg); err == nil {
		t.Fatal("nonewest: not caught")
	} else {
		t.Logf("nonewest caught: %v", err)
	}
}

// TestCheckpointEncodesTheHandoffSnapshot: the checkpoint builds each
// entity's snapshot in buffers it reuses, not by the handoff's own
// function; over a kill simulation's run (players, pets, dens, mobs,
// handoffs and an adoption) every one it encodes is, byte for byte, the
// snapshot a handoff would carry of it.
func TestCheckpointEncodesTheHandoffSnapshot(t *testing.T) {
	t.Parallel()
	var verified []func() (int, string)
	if _, err := zonesim.Run(zonesim.Config{Seed: 3, Ticks: 300, Kill: true,
		Started: func(_ int, r *zone.Runtime) { verified = append(verified, r.VerifyCheckpointEncoding()) }}); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, v := range verified {
		n, diff := v()
		if diff != "" {
			t.Fatal(diff)
		}
		total += n
	}
	if total < 100 {
		t.Fatalf("%d snapshots checked: the run checkpointed next to nothing", total)
	}
	t.Logf("%d checkpointed snapshots are the handoff's", total)
}

// TestSecondDeathAfterAdoptionBites: zone-1 dies and its standbys adopt
// its entities; 4 ticks later zone-2, one of them, dies too, having
// checkpointed what it adopted to its own standby, zone-0. zone-0 still
// holds ghosts of some of those entities from zone-1, at zone-1's fence;
// when the second failover's round ends, a ghost from a node it refuses
// is no sign of a live holder, whichever failover fenced it, and zone-0
// adopts them. Planted "rounddeadonly" (only the round's own dead owners
// count), it counts them held elsewhere and 4 wanderers are lost
// (zonetest TestBreakerStandbyDiesDuringAdoption, gap 4).
func TestSecondDeathAfterAdoptionBites(t *testing.T) {
	t.Parallel()
	const entities = 160
	run := func(plant bool) int {
		g := cells.GridConfig{RegionEdge: 512}
		g.World.Width, g.World.Height = 2048, 2048
		c := zonetest.Start(t, zonetest.Config{
			Nodes: 4, Grid: g, Memory: true,
			Module: func(int, string) (zone.Module, error) {
				return wander.New(wander.Config{Seed: 11, Entities: entities, Accounts: 20, Area: 1600, Roam: 300, Speed: 10})
			},
		})
		if plant {
			for _, n := range c.Nodes {
				n.Runtime.PlantCheckpoint("rounddeadonly")
			}
		}
		dead := map[string]bool{}
		kill := func(name string) {
			c.Kill(name)
			dead[name] = true
			var live, gone []string
			for _, n := range c.Nodes {
				if dead[n.Name] {
					gone = append(gone, n.Name)
				} else {
					live = append(live, n.Name)
				}
			}
			next, _, err := zone.PlanFailover(c.Nodes[0].Runtime.Table(), live, gone)
			if err != nil {
				t.Fatal(err)
			}
			if next != nil {
				c.Apply(next)
			}
		}
		for range 60 {
			c.Step()
		}
		kill("zone-1")
		for range 4 {
			c.Step()
		}
		kill("zone-2")
		for range 120 {
			c.Step()
		}
		held := 0
		for i := range entities {
			id, _ := wander.ID(i)
			for _, n := range c.Nodes {
				if !dead[n.Name] && n.Runtime.Simulated(id) {
					held++
					break
				}
			}
		}
		return held
	}
	if held := run(false); held != entities {
		t.Fatalf("without the bug: %d of %d wanderers held", held, entities)
	}
	if held := run(true); held == entities {
		t.Fatal("rounddeadonly: not caught")
	} else {
		t.Logf("rounddeadonly caught: %d of %d wanderers held", held, entities)
	}
}

// brokeAt is the tick at which a run broke a property (err a
// zonesim.PropertyError), or 0 (the whole run) for any other error.
func brokeAt(err error) int {
	var pe *zonesim.PropertyError
	if errors.As(err, &pe) {
		return int(pe.Tick)
	}
	return 0
}
