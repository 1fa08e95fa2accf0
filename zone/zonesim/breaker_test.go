package zonesim_test

import (
	"errors"
	"os"
	"testing"

	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// wanderCrowd is four times the default crowd, in the same square.
func wanderCrowd() wander.Config {
	return wander.Config{Entities: 192, Accounts: 48, Area: 300, Roam: 200, Speed: 20}
}

// TestBreakerSoak runs kill configurations TestKillSoak does not
// (intents across a failover, heavy lossy replication, very short
// TTLs, more nodes, longer runs, bigger crowds). SHARDWISE_BREAKER=N
// runs seeds 1…N of each variant (SHARDWISE_BREAKER_VARIANT=a,b picks
// some; SHARDWISE_BREAKER_LIST=s1,s2 picks seeds).
func TestBreakerSoak(t *testing.T) {
	heavy := &zonesim.Faults{Drop: 0.4, Duplicate: 0.2, Reorder: 0.3, MaxDelay: 6}
	runSoak(t, "SHARDWISE_BREAKER", []soakVariant{
		{"intents", zonesim.Config{Ticks: 200, Kill: true, Intents: 5}},
		{"intents-fourways", zonesim.Config{Ticks: 200, Kill: true, Intents: 5, FourWays: true}},
		{"heavy", zonesim.Config{Ticks: shortTicks, Kill: true, Faults: heavy}},
		{"heavy-fourways", zonesim.Config{Ticks: shortTicks, Kill: true, Faults: heavy, FourWays: true}},
		{"ttl1", zonesim.Config{Ticks: shortTicks, Kill: true, KillTTL: 1}},
		{"ttl2-slow5", zonesim.Config{Ticks: shortTicks, Kill: true, KillTTL: 2, SlowControl: 5}},
		{"nodes6", zonesim.Config{Ticks: shortTicks, Kill: true, Nodes: 6}},
		{"nodes2-heavy", zonesim.Config{Ticks: shortTicks, Kill: true, Nodes: 2, Faults: heavy}},
		{"long", zonesim.Config{Ticks: 400, Kill: true}},
		{"noschedule", zonesim.Config{Ticks: shortTicks, Kill: true, NoSchedule: true}},
		{"crowd", zonesim.Config{Ticks: shortTicks, Kill: true, Wander: wanderCrowd()}},
		{"nofaults-fourways", zonesim.Config{Ticks: shortTicks, Kill: true, FourWays: true, Faults: &zonesim.Faults{}}},
	})
}

// TestBreakerFixed replays breaks the breaker found that are fixed, each
// one that failed before its fix.
func TestBreakerFixed(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  zonesim.Config
	}{
		// The dead node's entity crossed from region 12 into region 15
		// (both its own) and a table then moved region 12 away. At the
		// lease's end the standby adopted region 12's stream (a move in
		// flight) in one round, from the record the move left there, and
		// region 15's (waiting for the failover table) in the next: the
		// older record won, 25–26 m lost. A round now adopts the newest
		// record its node holds of each entity (zone's TestKillNewestRecordBites).
		{"stale record, plain 200 ticks", zonesim.Config{Seed: 4, Ticks: 200, Kill: true}},
		{"stale record, crowd", zonesim.Config{Seed: 4, Ticks: shortTicks, Kill: true, Wander: wanderCrowd()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if res, err := zonesim.Run(tc.cfg); err != nil {
				t.Errorf("breaks again (trace %016x): %v", res.Trace, err)
			}
		})
	}
}

// TestBreakerKnown replays the breaks the breaker found on main (each
// failed when committed). Those fixed since are replayed, always, by
// zone's TestFailoverViews (the clients' breaches: six nodes, four
// ways, heavy loss), TestKillSoakFound (the bounds: recovery with slow
// control, the last checkpoint in flight) and TestBreakerFixed (the
// stale record). None is left; a new one goes in the table below.
// SHARDWISE_BREAKER_KNOWN=1 runs them.
func TestBreakerKnown(t *testing.T) {
	if os.Getenv("SHARDWISE_BREAKER_KNOWN") == "" {
		t.Skip("breaker: known failures (none left); SHARDWISE_BREAKER_KNOWN=1 runs them")
	}
	for _, tc := range []struct {
		name string
		cfg  zonesim.Config
		prop string
	}{} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := zonesim.Run(tc.cfg)
			var pe *zonesim.PropertyError
			if errors.As(err, &pe) && pe.Property == tc.prop {
				t.Errorf("still breaks (%s, trace %016x): %v", tc.name, res.Trace, err)
				return
			}
			if err != nil {
				t.Errorf("breaks differently: %v", err)
			}
		})
	}
}
