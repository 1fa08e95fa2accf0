package game

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/torus"
)

// Bots roam back and forth over the border between two nodes, handed over
// as they cross, and kill mobs stocked beside them on either side: every
// mob that died paid its loot exactly once, to a player, whichever node
// simulated the mob, the killer, or the killer mid-handoff.
func TestLootOncePerKillAcrossHandoffs(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	w := startEconWorld(t, 2)
	c, g0, g1 := econNodes(t, w, Config{Seed: seed, DenChance: noDens, Roam: 70})
	games := []*Game{g0, g1}
	var masters []ecs.ID
	for i := range 4 {
		home := torus.Pos{X: 1000 + 30*float64(i), Y: border - 2 + 4*float64(i%2)}
		g := games[i%2]
		masters = append(masters, g.player(t, account.ID(601+i), home))
	}
	var mobs []ecs.ID
	for tick := range 1600 {
		if tick < 1400 && tick%25 == 0 {
			for _, m := range masters {
				g := gameOf(m, g0, g1)
				if g == nil {
					continue // frozen in a handoff
				}
				p, _ := g.c.pos.Get(m)
				a := rng.Float64() * 2 * math.Pi
				at := g.geo.Translate(p.Pos, torus.Pos{X: 1.5 * math.Cos(a), Y: 1.5 * math.Sin(a)})
				owner := g0
				if g0.r.Table().OwnerOf(at) != g0.r.Name() {
					owner = g1
				}
				if id, ok := owner.spawnMob(owner.w, 0, at); ok {
					h, _ := owner.c.health.Get(id)
					h.HP = playerDamage // one blow
					mobs = append(mobs, id)
				}
			}
		}
		c.StepSync(1)
	}
	stepUntil(t, c, 30*time.Second, "every loot answered", func() bool { return quiet(g0, g1) })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dead := 0
	for _, id := range mobs {
		alive := false
		for _, g := range games {
			alive = alive || (g.w.Alive(id) && !g.r.Ghosts().Has(id))
		}
		_, paid, err := w.store.LookupKey(ctx, "loot:"+strconv.FormatUint(uint64(id), 10))
		if err != nil {
			t.Fatal(err)
		}
		if alive == paid {
			t.Errorf("mob %d: alive %v, loot journaled %v", id, alive, paid)
		}
		if !alive {
			dead++
		}
	}
	s0, s1 := g0.EconomyStats(), g1.EconomyStats()
	if dead == 0 || s0.Kills+s1.Kills != dead {
		t.Fatalf("%d mobs dead, %d kills counted (%+v, %+v)", dead, s0.Kills+s1.Kills, s0, s1)
	}
	hs := g0.r.HandoffStats().Plus(g1.r.HandoffStats())
	if hs.Acked == 0 {
		t.Fatal("no handoff: the bots never crossed")
	}
	bal := w.audit()
	coins := int64(0)
	for i := range masters {
		coins += bal[CoinsAccount(account.ID(601+i))]
	}
	want := int64(dead) * g0.cfg.Economy.LootCoins
	if coins != want || bal[LootAccount] != -want {
		t.Fatalf("players hold %d coins, the loot account %d; %d kills pay %d", coins, bal[LootAccount], dead, want)
	}
	t.Logf("%d kills over %d handoffs; kills on zone-0/zone-1 %d/%d, loot paid on zone-0/zone-1 %d/%d",
		dead, hs.Acked, s0.Kills, s1.Kills, s0.Loot, s1.Loot)
}
