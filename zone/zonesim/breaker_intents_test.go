package zonesim_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// TestBreakerKillIntents sends numbered intents through a kill (the
// harness's Config.Intents does not model a kill: it sends on the dead
// node until its lease ends, and excuses nothing the kill takes) from
// live nodes only, and classes every intent never applied by when it was
// sent: before the kill, between the kill and the lease's end plus 20
// ticks (in the dead node's hands), or after (nothing excuses it). It
// fails on any intent applied twice and any lost after the failover.
// SHARDWISE_BREAKER=N runs seeds 1…N.
func TestBreakerKillIntents(t *testing.T) {
	v := os.Getenv("SHARDWISE_BREAKER")
	if v == "" {
		t.Skip("SHARDWISE_BREAKER=N runs it")
	}
	n, _ := strconv.Atoi(v)
	for seed := uint64(1); seed <= uint64(n); seed++ {
		for _, four := range []bool{false, true} {
			t.Run(fmt.Sprint(seed, four), func(t *testing.T) { breakerKillIntents(t, seed, four) })
		}
	}
}

func breakerKillIntents(t *testing.T, seed uint64, four bool) {
	base := zonesim.Config{Seed: seed, Ticks: 200, Kill: true, FourWays: four}
	first, err := zonesim.Run(base)
	if err != nil {
		t.Skipf("the plain kill run fails already: %v", err)
	}
	dead := -1
	fmt.Sscanf(first.Killed, "sim-%d", &dead)
	lossAt := first.KillTick + 20
	applied := map[int64][]int{}
	sentAt := map[int64]uint64{}
	target := map[int64]ecs.ID{}
	var ids []ecs.ID
	rng := rand.New(rand.NewPCG(seed, 77))
	var next int64
	cfg := base
	cfg.Started = func(i int, r *zone.Runtime) {
		r.OnIntent(func(_ *ecs.World, in zone.Intent) {
			if in.Kind == 7 {
				applied[in.Amount] = append(applied[in.Amount], i)
			}
		})
	}
	cfg.Check = func(tick uint64, rs []*zone.Runtime) error {
		if ids == nil {
			for i := range 48 {
				id, _ := wander.ID(i)
				ids = append(ids, id)
			}
		}
		if tick+60 > uint64(cfg.Ticks) || len(ids) == 0 {
			return nil
		}
		for range 5 {
			id := ids[rng.IntN(len(ids))]
			for _, i := range rng.Perm(len(rs)) {
				r := rs[i]
				if r == nil || i == dead && tick >= first.KillTick {
					continue
				}
				if _, ok := r.ChunkOf(id); ok {
					next++
					sentAt[next], target[next] = tick, id
					r.Send(zone.Intent{Kind: 7, Target: id, Amount: next})
					break
				}
			}
		}
		return nil
	}
	res, err := zonesim.Run(cfg)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	var before, window, after, twice int
	for k := int64(1); k <= next; k++ {
		switch a := applied[k]; {
		case len(a) > 1:
			twice++
			t.Logf("intent %d to %d sent at %d applied on %v", k, target[k], sentAt[k], a)
		case len(a) == 1:
		case sentAt[k] < first.KillTick:
			before++
		case sentAt[k] <= lossAt+20:
			window++
		default:
			after++
			t.Logf("intent %d to entity %d sent at tick %d never applied", k, target[k], sentAt[k])
		}
	}
	t.Logf("seed %d fourways %v: %s killed at %d, lease ends %d; %d intents: lost %d sent before the kill, %d in the window, %d after; %d twice; nodes counted %d dropped",
		seed, four, first.Killed, first.KillTick, lossAt, next, before, window, after, twice, res.IntentsDropped)
	if twice > 0 || after > 0 {
		t.Errorf("seed %d: %d intents applied twice, %d lost after the failover", seed, twice, after)
	}
}
