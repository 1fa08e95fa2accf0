package zone_test

import (
	"errors"
	"testing"

	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// TestFailoverViews replays the clients' breaches that the breaker and
// the kill soak found (zonesim's TestBreakerKnown and TestKillSoak, 150
// ticks each), one per cause, each with its fix planted back
// (export_test.go's Plant): with the plant it breaks the clients property
// at the scene, and without it the run passes through the scene and 20
// ticks on.
func TestFailoverViews(t *testing.T) {
	const sightAfter = 20
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cfg   zonesim.Config
		base  []string // planted in both runs: the scene as the breaker found it
		plant string
	}{
		// sim-5 unfroze entity 24 at its dead target's fence and kept it
		// HandoffRetry ticks in a region the failover table gave sim-3:
		// observers subscribe to a chunk's simulators by the table, and
		// sim-0's client never saw it (unseen 5 chunks away).
		{"unfrozen at a dead target's fence, 6 nodes", zonesim.Config{Seed: 16, Ticks: 150, Kill: true, Nodes: 6}, nil, "fenceretry"},
		// A move in flight took entity 13's region from sim-1 as it
		// died; the chunk's new simulator left the held ghost out, and
		// sim-0 ended the hold before the query of sim-2 (the moved
		// region's standby, which adopted 13 and handed it on) arrived:
		// a blink across the failover. (The source resync below changes
		// the deliveries of this seed, and the query then comes in
		// time: planted in both runs, it keeps the scene.)
		{"moved region's standby, 6 nodes", zonesim.Config{Seed: 31, Ticks: 150, Kill: true, Nodes: 6}, []string{"nosourceresync"}, "nomoverwait"},
		// sim-0, cut from sim-3 while sim-1 handed entity 19 to sim-3 in
		// a region move, kept sim-1's ghost of it: sim-3's snapshot did
		// not list it (it had walked on), and sim-1, kept subscribed by
		// the grace, was never asked again: a zombie.
		{"grace-only source, four ways", zonesim.Config{Seed: 40, Ticks: 150, Kill: true, FourWays: true, Faults: &zonesim.Faults{}}, nil, "nosourceresync"},
		{"grace-only source, four ways 42", zonesim.Config{Seed: 42, Ticks: 150, Kill: true, FourWays: true}, nil, "nosourceresync"},
		// The same with no kill (FourWays seeds 31, 37, 40, 42 and 164
		// failed so; 164's source is a simulator of the chunk past the
		// border, not a grace-only one).
		{"old owner's ghost, four ways, no kill", zonesim.Config{Seed: 164, Ticks: 150, FourWays: true}, nil, "nosourceresync"},
		// sim-2 adopted entity 22 in a region a move in flight took from
		// dead sim-1 and handed it on to sim-3, the owner; its vanish
		// out of sight, into a chunk sim-0 receives from sim-3 only,
		// went through before sim-3's epoch came: a blink.
		{"adopter hands on, heavy loss, four ways", zonesim.Config{Seed: 46, Ticks: 150, Kill: true, FourWays: true,
			Faults: &zonesim.Faults{Drop: 0.4, Duplicate: 0.2, Reorder: 0.3, MaxDelay: 6}}, nil, "nohandonhold"},
		// Before the kill, in a region swap under heavy loss: sim-3's
		// snapshot of entity 15's chunk, taken before sim-3 took 15 from
		// sim-0, arrived 6 ticks late, after the ack had made sim-0's
		// copy a ghost of sim-3's, and removed it (sim-3's later
		// snapshots and the appear were lost): a blink 2 chunks from the
		// viewer.
		{"taker's snapshot older than the take, heavy loss", zonesim.Config{Seed: 18, Ticks: 150, Kill: true,
			Faults: &zonesim.Faults{Drop: 0.4, Duplicate: 0.2, Reorder: 0.3, MaxDelay: 6}}, nil, "notakerecheck"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plant := func(bugs ...string) zonesim.Config {
				cfg := tc.cfg
				cfg.Started = func(_ int, r *zone.Runtime) {
					for _, b := range bugs {
						r.Plant(b)
					}
				}
				return cfg
			}
			_, err := zonesim.Run(plant(append(tc.base, tc.plant)...))
			var pe *zonesim.PropertyError
			if !errors.As(err, &pe) || pe.Property != "clients" {
				t.Fatalf("with %s planted: %v, want a clients breach", tc.plant, err)
			}
			t.Logf("with %s planted: %v", tc.plant, err)
			// The fixed run passes through the scene and sightAfter
			// ticks past it, not to the end: a fix that only put the
			// breach off by the clients' 6 ticks of grace would break
			// there, and the rest of the run is random wandering that
			// zonesim's seeds cover (its breaker and kill soak).
			fixed := plant(tc.base...)
			fixed.Until = int(pe.Tick) + sightAfter
			if _, err := zonesim.Run(fixed); err != nil {
				t.Fatalf("fixed run breaks (replay: zone's TestFailoverViews): %v", err)
			}
		})
	}
}
