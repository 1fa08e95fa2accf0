package zonesim_test

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shardwise/shardwise/zone/zonesim"
)

// TestKillSoakFound replays the seeds TestKillSoak found holes with, one
// per hole, in the variant that found it: each failed before its fix
// (the commit that fixed it names it).
func TestKillSoakFound(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  zonesim.Config
	}{
		// An entity past the border of a region a new table moved away
		// streamed as the first of a stream its standby ignored
		// (homeRegion).
		{"home region", zonesim.Config{Seed: 1386, Ticks: shortTicks, Kill: true}},
		// A standby still on the old table ignored the snapshot of a
		// region the sender was just given (held back now).
		{"held back", zonesim.Config{Seed: 1594, Ticks: shortTicks, Kill: true}},
		{"held back, four ways", zonesim.Config{Seed: 98, Ticks: shortTicks, Kill: true, FourWays: true}},
		{"held back, four ways 2", zonesim.Config{Seed: 734, Ticks: shortTicks, Kill: true, FourWays: true}},
		// A dead node's parked render ghost counted as a live holder in
		// a round with no peer to ask.
		{"dead ghost, two nodes", zonesim.Config{Seed: 15, Ticks: shortTicks, Kill: true, Nodes: 2}},
		// A standby took an entity by handoff from the dying node while
		// its adoption round (held up by a cut peer) held the dead node's
		// older record of it, and handed it on before the round ended: the
		// round restored the stale record (zone's superseded).
		{"handed on during a round, ttl2 slow5", zonesim.Config{Seed: 31, Ticks: shortTicks, Kill: true, KillTTL: 2, SlowControl: 5}},
		// A ghost held at the fence whose adopted entity walked off
		// unseen stayed a zombie for Timers.FenceHold (zone's notThere).
		{"zombie held at the fence", zonesim.Config{Seed: 37, Ticks: shortTicks, Kill: true, FourWays: true}},
		// A held ghost ended by the snapshot of a region's new owner
		// before the dead old owner's standby adopted the entity and
		// handed it on (a table older than the fence's; an asker that
		// is no simulator of the chunk): a blink.
		{"held ghost, move in flight", zonesim.Config{Seed: 4, Ticks: shortTicks, Kill: true, FourWays: true}},
		{"held ghost, move in flight, slow", zonesim.Config{Seed: 5, Ticks: shortTicks, Kill: true, FourWays: true, SlowControl: 3}},
		{"held ghost, adopter not a simulator", zonesim.Config{Seed: 55, Ticks: shortTicks, Kill: true, FourWays: true, SlowControl: 3}},
		// The recovery bound did not count the control stream's extra
		// delay: an adoption round's query and answer each took 6–8
		// ticks (recoverSpan).
		{"recovered, ttl2 slow5", zonesim.Config{Seed: 6, Ticks: shortTicks, Kill: true, KillTTL: 2, SlowControl: 5}},
		{"recovered, ttl2 slow5 2", zonesim.Config{Seed: 32, Ticks: shortTicks, Kill: true, KillTTL: 2, SlowControl: 5}},
		{"recovered, ttl2 slow5 3", zonesim.Config{Seed: 99, Ticks: shortTicks, Kill: true, KillTTL: 2, SlowControl: 5}},
		// The state-loss bound counted ticks, not the dead node's own
		// steps: it made up skipped steps two a tick before it died
		// (lostSteps).
		{"lagging dead node, slow3", zonesim.Config{Seed: 1, Ticks: shortTicks, Kill: true, SlowControl: 3}},
		{"lagging dead node, cut from its standby", zonesim.Config{Seed: 53, Ticks: shortTicks, Kill: true, Nodes: 2}},
		{"lagging dead node, cut from its standby 2", zonesim.Config{Seed: 59, Ticks: shortTicks, Kill: true, Nodes: 2}},
		// ... nor the control stream's drawn delay: the last checkpoint
		// (t79) was on the wire when the node was cut (t85) under
		// MaxDelay 6 (the breaker's).
		{"last checkpoint in flight, heavy", zonesim.Config{Seed: 1, Ticks: shortTicks, Kill: true,
			Faults: &zonesim.Faults{Drop: 0.4, Duplicate: 0.2, Reorder: 0.3, MaxDelay: 6}}},
		// ... nor the lease ending before the kill's cut, nor a standby
		// that skipped steps across the lease's end (it refuses at the
		// fence what it reads after).
		{"lease ends before the cut", zonesim.Config{Seed: 84, Ticks: shortTicks, Kill: true, KillTTL: 2, SlowControl: 5}},
		{"standby lagging across the lease's end", zonesim.Config{Seed: 53, Ticks: shortTicks, Kill: true, KillTTL: 2, SlowControl: 5}},
		// An entity the dead node took 3 ticks after its last checkpoint
		// was no loss of the runtime's: the take's checkpoint went to the
		// region's standby, which skipped steps across the lease's end
		// and refused it at the fence (the recovered property now
		// excuses what lostSteps counts as held or refused: unheld).
		{"take's checkpoint read after the lease's end, ttl5", zonesim.Config{Seed: 109, Ticks: shortTicks, Kill: true, KillTTL: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each ends once its scene is over (Config.UntilCalm): every
			// hole was found within the failover or the calm window after.
			// SHARDWISE_LONG=1 runs each its 150 ticks.
			cfg := tc.cfg
			cfg.UntilCalm = os.Getenv("SHARDWISE_LONG") != "1"
			res, err := zonesim.Run(cfg)
			if err != nil {
				for _, e := range res.Events {
					t.Log(e)
				}
				t.Fatal(err)
			}
			if res.Restored == 0 {
				t.Fatalf("seed %d restored nothing: it no longer exercises the failover", tc.cfg.Seed)
			}
		})
	}
}

// TestKillSoak is the kill run combined with the simulation's other
// faults, over many seeds, for a reviewer trying to break the failover:
// SHARDWISE_KILLSOAK=N runs seeds 1…N in each variant and lists every
// failure by variant and property (it does not stop at the first). Off
// unless asked: the short mode's TestKillNode is the gate.
func TestKillSoak(t *testing.T) {
	runSoak(t, "SHARDWISE_KILLSOAK", []soakVariant{
		{"plain", zonesim.Config{Ticks: shortTicks, Kill: true}},
		{"fourways", zonesim.Config{Ticks: shortTicks, Kill: true, FourWays: true}},
		{"slow3", zonesim.Config{Ticks: shortTicks, Kill: true, SlowControl: 3}},
		{"fourways-slow3", zonesim.Config{Ticks: shortTicks, Kill: true, FourWays: true, SlowControl: 3}},
		{"ttl40", zonesim.Config{Ticks: 200, Kill: true, KillTTL: 40}},
		{"ttl5", zonesim.Config{Ticks: shortTicks, Kill: true, KillTTL: 5}},
		{"nodes2", zonesim.Config{Ticks: shortTicks, Kill: true, Nodes: 2}},
		{"nodes3", zonesim.Config{Ticks: shortTicks, Kill: true, Nodes: 3}},
	})
}

// soakVariant is one configuration a soak runs over its seeds.
type soakVariant struct {
	name string
	cfg  zonesim.Config
}

// runSoak is a soak over seeds, skipped unless env is set: env=N runs
// seeds 1…N in each variant (env_VARIANT=a,b picks some, env_LIST=s1,s2
// picks seeds, env_EVENTS logs a failing run's events) and lists every
// failure by variant and property (it does not stop at the first).
func runSoak(t *testing.T, env string, variants []soakVariant) {
	v := os.Getenv(env)
	if v == "" {
		t.Skip(env + "=N runs it")
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", env, v, err)
	}
	if only := os.Getenv(env + "_VARIANT"); only != "" {
		keep := variants[:0]
		for _, vr := range variants {
			if strings.Contains(","+only+",", ","+vr.name+",") {
				keep = append(keep, vr)
			}
		}
		variants = keep
	}
	seeds := make([]uint64, 0, n)
	for s := range n {
		seeds = append(seeds, uint64(s+1))
	}
	if l := os.Getenv(env + "_LIST"); l != "" {
		seeds = seeds[:0]
		for f := range strings.SplitSeq(l, ",") {
			s, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				t.Fatalf("%s_LIST=%q: %v", env, l, err)
			}
			seeds = append(seeds, s)
		}
	}
	events := os.Getenv(env+"_EVENTS") != ""
	var mu sync.Mutex
	fails := map[string][]uint64{}
	for _, vr := range variants {
		t.Run(vr.name, func(t *testing.T) {
			for _, seed := range seeds {
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					t.Parallel()
					cfg := vr.cfg
					cfg.Seed = seed
					res, err := zonesim.Run(cfg)
					if err == nil {
						return
					}
					kind := "error"
					var pe *zonesim.PropertyError
					if errors.As(err, &pe) {
						kind = pe.Property
					}
					mu.Lock()
					fails[vr.name+" "+kind] = append(fails[vr.name+" "+kind], seed)
					mu.Unlock()
					t.Logf("%s seed %d: %v", vr.name, seed, err)
					if events {
						for _, e := range res.Events {
							t.Log(e)
						}
					}
				})
			}
		})
	}
	if len(fails) > 0 {
		t.Errorf("%d kinds of failure (listed below)", len(fails))
	}
	keys := make([]string, 0, len(fails))
	for k := range fails {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := fails[k]
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		t.Logf("FAIL %s: %d seeds %v", k, len(s), s)
	}
}
