package zone_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// TestSimulationBites runs the simulation's short mode (zonesim.Seeds,
// 150 ticks a seed) over each deliberately broken variant of the
// protocol (export_test.go's Plant), and the scenario scripts
// (testdata/scenarios) that make the scenes the random wanderers do not:
// a simulator that catches nothing planted proves nothing. A seed counts
// as a catch only if the same seed passes without the bug (the known
// failures, zonesim.KnownFailure, are left out; without counting, it
// passes through the tick where the planted run broke); a script, if a step
// prints something else than it does without the bug. Each variant must
// be caught by its seeds or by every script listed for it.
//
// Seeds each needed, measured when the test was written
// (SHARDWISE_BITE_COUNT=50 runs the first 50 seeds of each variant,
// script-caught ones too, to the end and counts; "trace changed" counts
// the seeds whose planted run sent or showed anything the unplanted run
// did not, so the variant's scene happened there):
//
//	variant          first catch   catches in seeds 1–50      trace changed   scripts
//	nofreeze         seed 1        50 (invariant 5 or 8)      50              —
//	noheldvanish     seed 4        1 (a blink after a swap)   8               held_vanish
//	nounlistedhold   seed 98       0 (3 in seeds 1–200)       —               —
//	noepochguard     none          0                          0               stale_transfer
//	parkasdrop       none          0                          1               parked_chunk
//	adoptionvanish   none          0                          0               adoption_vanish
//
// The last three are caught by their scripts only: in 49 or 50 of 50
// seeds their planted run is byte for byte the unplanted one, so no
// check can see them; the wanderers do not make their scenes. The
// stale-epoch guard needs a transfer that arrives after a newer epoch of
// its entity, which the link's exactly-once ordered control stream
// (link invariant 3) never delivers: stale_transfer delivers a transfer
// twice (one superseded copy arriving late, as a resend after a
// reconnect would), and with the guard off the target takes it and the
// entity has two simulators. parked_chunk holds the unsubscribe while
// the entity moves on into a chunk still received (the client misses it
// for 2 ticks with dropChunk); adoption_vanish makes a region move whose
// third node lags the table (the client sees a blink 2 chunks from its
// viewer). docs/decisions.md has the numbers of the scenes tried in the
// random simulation.
func TestSimulationBites(t *testing.T) {
	t.Parallel()
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
	// scripted are the scenario scripts that make each variant's scene;
	// for the variants the random seeds do not catch (not in seedsCatch),
	// they are the catch, and the seeds run for those only when counting.
	scripted := map[string][]string{
		"noheldvanish":   {"held_vanish"},
		"noepochguard":   {"stale_transfer"},
		"parkasdrop":     {"parked_chunk"},
		"adoptionvanish": {"adoption_vanish"},
	}
	// seedsCatch are the variants the random seeds catch, with the seed
	// of the first catch (the table above).
	seedsCatch := map[string]uint64{"nofreeze": 1, "noheldvanish": 4, "nounlistedhold": 98}
	if count == 0 {
		// Not counting: the unplanted run of a seed is made only where a
		// planted run fails, to tell a catch from a known failure.
		seeds = nil
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
			for _, name := range scripted[bug] {
				if !scriptBites(t, filepath.Join("testdata", "scenarios", name+".txt"), bug) {
					t.Errorf("%s: script %s prints what it expects with the bug planted", bug, name)
				}
			}
			var run []uint64
			switch {
			case count > 0:
				run = seeds
			case seedsCatch[bug] > 0:
				// From the seed of the first catch recorded, then the
				// rest: the count of seeds a variant needs is measured
				// with SHARDWISE_BITE_COUNT, and 97 seeds under -race that
				// catch nothing would cost two minutes a run.
				all, _, _ := zonesim.Seeds()
				k := min(int(seedsCatch[bug])-1, len(all))
				run = append(all[k:len(all):len(all)], all[:k]...)
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
					// Without the bug, through the tick where the
					// planted run broke (brokeAt).
					_, b.err = zonesim.Run(zonesim.Config{Seed: seed, Ticks: 150, Until: brokeAt(err)})
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
			case fails == 0 && seedsCatch[bug] > 0 && count == 0:
				t.Errorf("%s: not caught in %d seeds", bug, len(run))
			case fails > 0 && seedsCatch[bug] == 0:
				t.Logf("%s: the seeds catch it now (seed %d): record its count in the table", bug, first)
			}
		})
	}
}

// scriptBites reports whether the scenario script at path prints
// something else than it expects with bug planted.
func scriptBites(t *testing.T, path, bug string) bool {
	t.Helper()
	steps, got, _ := runScenario(t, path, bug)
	for i, st := range steps {
		if got[i] != st.Expected {
			t.Logf("%s caught by %s: %s\nexpected:\n%s\ngot:\n%s", bug, st.Pos, st.Command, st.Expected, got[i])
			return true
		}
	}
	return false
}
