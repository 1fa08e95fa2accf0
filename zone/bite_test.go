package zone_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// TestSimulationBites runs the simulation's short mode (zonesim.Seeds,
// 150 ticks a seed) over each deliberately broken variant of the
// protocol (export_test.go's Plant): a simulator that catches nothing
// planted proves nothing. A seed counts as a catch only if the same seed
// passes without the bug (the known failures, zonesim.KnownFailure, are
// left out). Each variant stops at its first catch.
//
// Seeds each needed, measured when the test was written
// (SHARDWISE_BITE_COUNT=50 runs the first 50 seeds of each variant to
// the end and counts):
//
//	variant          first catch   catches in seeds 1–50
//	nofreeze         seed 1        50 (invariant 5 or 8 at once)
//	noheldvanish     seed 4        1 (a blink after a region swap)
//	nounlistedhold   seed 98       0 (3 in seeds 1–200: a blink after a region swap)
//	noepochguard     none          0
//	parkasdrop       none          0
//	adoptionvanish   none          0
//
// The last three are not caught yet (notCaughtYet). Over seeds 1–20 the
// stale-epoch guard refused no transfer and the adoption tick filtered
// no vanish: the wanderers never make those scenes. parkChunk parked 29
// ghosts, and no client check saw them dropped instead.
// They run and are logged; one that starts being caught fails the test,
// so that this list is kept true.
func TestSimulationBites(t *testing.T) {
	seeds, _, err := zonesim.Seeds()
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	if v := os.Getenv("SHARDWISE_BITE_COUNT"); v != "" {
		if count, err = strconv.Atoi(v); err != nil {
			t.Fatalf("SHARDWISE_BITE_COUNT=%q: %v", v, err)
		}
		seeds = seeds[:0]
		for s := range count {
			seeds = append(seeds, uint64(s+1))
		}
	}
	notCaughtYet := map[string]bool{"noepochguard": true, "parkasdrop": true, "adoptionvanish": true}
	if testing.Short() || count == 0 {
		// The variants not caught would run every seed for nothing: a
		// tenth of them is enough to notice one starting to be caught.
		seeds = seeds[:max(len(seeds)/10, 1)]
	}
	for _, bug := range []string{"nofreeze", "noheldvanish", "nounlistedhold", "noepochguard", "parkasdrop", "adoptionvanish"} {
		t.Run(bug, func(t *testing.T) {
			t.Parallel()
			run := seeds
			if !notCaughtYet[bug] {
				run, _, _ = zonesim.Seeds()
				if count > 0 {
					run = seeds
				}
			}
			first, fails := uint64(0), 0
			for _, seed := range run {
				if _, known := zonesim.KnownFailure(seed); known {
					continue
				}
				_, err := zonesim.Run(zonesim.Config{Seed: seed, Ticks: 150,
					Started: func(_ int, r *zone.Runtime) { r.Plant(bug) }})
				if err == nil {
					continue
				}
				if _, base := zonesim.Run(zonesim.Config{Seed: seed, Ticks: 150}); base != nil {
					t.Logf("seed %d fails without the bug too: %v", seed, base)
					continue
				}
				fails++
				if first == 0 {
					first = seed
					t.Logf("%s caught at seed %d: %v", bug, seed, err)
				}
				if count == 0 {
					break
				}
			}
			if count > 0 {
				t.Logf("%s: first catch at seed %d; %d catches in seeds 1–%d", bug, first, fails, count)
			}
			switch {
			case fails == 0 && !notCaughtYet[bug]:
				t.Errorf("%s: not caught in %d seeds", bug, len(run))
			case fails == 0:
				t.Logf("%s: not caught yet, as known, in %d seeds", bug, len(run))
			case notCaughtYet[bug]:
				t.Errorf("%s: caught now (seed %d): take it out of notCaughtYet and record its count", bug, first)
			}
		})
	}
}
