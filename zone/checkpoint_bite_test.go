package zone_test

import (
	"os"
	"testing"

	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// TestKillSimulationBites runs the kill simulation (zonesim.Config.Kill,
// the seeds of TestKillNode) over each planted bug of the checkpoint
// protocol (checkpoint_export_test.go's PlantCheckpoint) and requires it
// to be caught: a seed counts only if it passes without the bug. Each
// variant stops at its first catch.
//
// Seeds each needed, measured when the test was written
// (SHARDWISE_BITE_COUNT=1 runs all 40 seeds of each and counts):
//
//	variant   first catch   catches in 40 seeds   caught by
//	noquery   seed 4        3                    one simulator (an entity a live node holds adopted too)
//	noraise   seed 1        18                   epoch raised (restored at the dead node's epoch)
//	nofence   seed 4        7                    invariant 9 (a stream started from a node the table does not name)
func TestKillSimulationBites(t *testing.T) {
	seeds, _, err := zonesim.Seeds()
	if err != nil {
		t.Fatal(err)
	}
	seeds = seeds[:min(len(seeds), 40)]
	count := os.Getenv("SHARDWISE_BITE_COUNT") != "" // run every seed and count the catches
	for _, bug := range []string{"noquery", "noraise", "nofence"} {
		t.Run(bug, func(t *testing.T) {
			t.Parallel()
			first, catches := uint64(0), 0
			for _, seed := range seeds {
				if _, known := zonesim.KnownKillFailure(seed); known {
					continue
				}
				_, err := zonesim.Run(zonesim.Config{Seed: seed, Ticks: 150, Kill: true,
					Started: func(_ int, r *zone.Runtime) { r.PlantCheckpoint(bug) }})
				if err == nil {
					continue
				}
				if _, base := zonesim.Run(zonesim.Config{Seed: seed, Ticks: 150, Kill: true}); base != nil {
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
		})
	}
}

// TestCheckpointEncodesTheHandoffSnapshot: the checkpoint builds each
// entity's snapshot in buffers it reuses, not by the handoff's own
// function; over a kill simulation's run (players, pets, dens, mobs,
// handoffs and an adoption) every one it encodes is, byte for byte, the
// snapshot a handoff would carry of it.
func TestCheckpointEncodesTheHandoffSnapshot(t *testing.T) {
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
