package zone_test

import (
	"errors"
	"testing"

	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// cornerCrowd is the simulation's crowd at a four-way corner with no
// kill: 192 wanderers of 48 accounts where four nodes meet
// (Config.FourWays), 400 ticks, no lease lost (the configuration of
// issue 28's invariant-10 sweep whose seeds 4, 10, 18, 20, 23 and 30
// showed clients a blink or a missing entity), run until tick until.
func cornerCrowd(seed uint64, until int) zonesim.Config {
	return zonesim.Config{Seed: seed, Ticks: 400, Until: until, FourWays: true, NoLeaseLoss: true,
		Wander: wander.Config{Entities: 192, Accounts: 48, Area: 300, Roam: 200, Speed: 20}}
}

// TestCornerCrowdGapHoldBites replays the first 150 ticks of the corner
// crowd's seed 18, whose tick 137 showed a client a blink: the batch in
// which a ghost's source moved it into the next chunk was lost, and the
// source's snapshot of the chunk it left (asked for alone, because the
// chunk's owner left the ghost out) came in the batch that showed the
// gap; the ghost was removed two chunks from the viewer, and the next
// chunk's snapshot, asked for by the gap's resync, brought it back a
// tick later. A ghost its source's snapshot leaves out now stays while a
// gap in that source's batches is resynced (resyncNear); nogaphold
// plants the old removal back, and the seed must catch it.
func TestCornerCrowdGapHoldBites(t *testing.T) {
	t.Parallel()
	cfg := cornerCrowd(18, 150)
	if res, err := zonesim.Run(cfg); err != nil {
		t.Fatalf("the corner crowd's seed 18 breaks (trace %016x): %v", res.Trace, err)
	}
	cfg.Started = func(_ int, r *zone.Runtime) { r.Plant("nogaphold") }
	_, err := zonesim.Run(cfg)
	var pe *zonesim.PropertyError
	if !errors.As(err, &pe) || pe.Property != "clients" {
		t.Fatalf("with nogaphold planted, seed 18 does not show a client a blink: %v", err)
	}
	t.Logf("planted: %v", err)
}
