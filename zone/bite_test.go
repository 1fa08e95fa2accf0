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
// the end and counts; "trace changed" counts the seeds whose planted run
// sent or showed anything the unplanted run did not, so the variant's
// scene happened there):
//
//	variant          first catch   catches in seeds 1–50      trace changed
//	nofreeze         seed 1        50 (invariant 5 or 8)      50
//	noheldvanish     seed 4        1 (a blink after a swap)   8
//	nounlistedhold   seed 98       0 (3 in seeds 1–200)       —
//	noepochguard     none          0                          0
//	parkasdrop       none          0                          1
//	adoptionvanish   none          0                          0
//
// The last three are not caught yet (notCaughtYet): in 49 or 50 of 50
// seeds the planted run is byte for byte the unplanted one, so no check
// can see them; the wanderers do not make their scenes. The stale-epoch
// guard needs a transfer that arrives after a newer epoch of its entity,
// which the link's exactly-once ordered control stream (link invariant
// 3) allows only if the source gave the handoff up while the transfer
// was in flight, and it does so only on the target's answer or its
// fence. With FourWays, Config.SlowControl 6 and 160 wanderers of 24
// accounts, parkasdrop changes the trace in 14 of seeds 1–20 and
// adoptionvanish in 1, but 6 of those 20 seeds fail without any bug
// (the blinks and zombies after a region swap that Config.FourWays's
// doc names), so a catch there proves nothing yet (docs/decisions.md).
// They run and are logged with their count of changed traces; one that
// starts being caught fails the test, so that this list is kept true.
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
	// The unplanted runs of the seeds every variant runs, once: a catch
	// counts only where the seed passes without the bug, and a planted
	// run whose trace equals the unplanted one's changed nothing any
	// check could see (the variant's scene did not happen in that seed).
	type baseRun struct {
		trace uint64
		err   error
	}
	base := make(map[uint64]baseRun, len(seeds))
	for _, seed := range seeds {
		res, err := zonesim.Run(zonesim.Config{Seed: seed, Ticks: 150})
		base[seed] = baseRun{res.Trace, err}
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
			first, fails, changed := uint64(0), 0, 0
			for _, seed := range run {
				if _, known := zonesim.KnownFailure(seed); known {
					continue
				}
				res, err := zonesim.Run(zonesim.Config{Seed: seed, Ticks: 150,
					Started: func(_ int, r *zone.Runtime) { r.Plant(bug) }})
				b, ok := base[seed]
				if !ok && err != nil {
					_, b.err = zonesim.Run(zonesim.Config{Seed: seed, Ticks: 150})
				}
				if ok && b.err == nil && res.Trace != b.trace {
					changed++
				}
				if err == nil {
					continue
				}
				if b.err != nil {
					t.Logf("seed %d fails without the bug too: %v", seed, b.err)
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
				t.Logf("%s: first catch at seed %d; %d catches in seeds 1–%d; trace changed in %d", bug, first, fails, count, changed)
			}
			switch {
			case fails == 0 && !notCaughtYet[bug]:
				t.Errorf("%s: not caught in %d seeds", bug, len(run))
			case fails == 0:
				t.Logf("%s: not caught yet, as known, in %d seeds; the bug changed the trace in %d of them", bug, len(run), changed)
			case notCaughtYet[bug]:
				t.Errorf("%s: caught now (seed %d): take it out of notCaughtYet and record its count", bug, first)
			}
		})
	}
}
