package zone_test

import (
	"errors"
	"testing"

	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// TestKillIntentsBites: the intents property of a kill run
// (zonesim.Config.Intents with Kill: every intent never applied is
// counted by a node) catches each half of intentfate.go planted away:
// "nounconfirmed" (the intents sent to the dead node and never confirmed
// are not counted at its fence) and "noawait" (an intent for a fenced
// node's entity goes into the void instead of waiting for the standby).
// A catch counts only on a seed that passes without the bug.
func TestKillIntentsBites(t *testing.T) {
	t.Parallel()
	// The unplanted run of a seed, once for both variants (both catch at
	// seed 1); the subtests run one after the other.
	bases := map[uint64]error{}
	base := func(cfg zonesim.Config) error {
		err, ok := bases[cfg.Seed]
		if !ok {
			_, err = zonesim.Run(cfg)
			bases[cfg.Seed] = err
		}
		return err
	}
	for _, bug := range []string{"nounconfirmed", "noawait"} {
		t.Run(bug, func(t *testing.T) {
			for seed := uint64(1); seed <= 6; seed++ {
				cfg := zonesim.Config{Seed: seed, Ticks: 200, Kill: true, Intents: 5}
				planted := cfg
				planted.Started = func(_ int, r *zone.Runtime) { r.Plant(bug) }
				_, err := zonesim.Run(planted)
				var pe *zonesim.PropertyError
				if !errors.As(err, &pe) || pe.Property != "intents applied at most once, every one lost counted" {
					continue
				}
				if base := base(cfg); base != nil {
					t.Logf("seed %d fails without the bug too: %v", seed, base)
					continue
				}
				t.Logf("%s caught at seed %d: %v", bug, seed, err)
				return
			}
			t.Errorf("%s: not caught in seeds 1–6", bug)
		})
	}
}
