package game

import (
	"testing"
	"time"

	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/torus"
)

// A player beside a den buys from its keeper: a purchase it cannot pay for
// is refused and changes nothing; one it can moves the coins to the shop
// and the goods to the player in one movement, and its purse shows it.
// Away from any den, nothing is bought.
func TestShopPurchases(t *testing.T) {
	w := startEconWorld(t, 2)
	// Every column is a den's, and no den stocks mobs.
	c, g0, g1 := econNodes(t, w, Config{Seed: 24, DenChance: 1, StockRadius: 1e-3})
	w.fund(501, noGood, 50)
	geo := g0.geo
	ch := geo.ChunkOf(torus.Pos{X: 1000, Y: 1000})
	at, _, ok := g0.denSite(interest.Column{X: ch.X, Y: ch.Y})
	if !ok {
		t.Fatal("no den site")
	}
	m := g0.client(t, 501, geo.Translate(at, torus.Pos{X: 1}))
	stepUntil(t, c, 10*time.Second, "the den and the purse", func() bool {
		_, den := g0.nearest(at, 1, KindDen)
		p, _ := g0.PurseOf(m)
		return den && p.Known && p.Coins == 50
	})
	shop := []string{CoinsAccount(501), GoodsAccount(501, Sword), GoodsAccount(501, Potion), ShopCoinsAccount, ShopGoodsAccount(Sword), ShopGoodsAccount(Potion)}
	before := w.holdings(shop...)

	// Two swords cost 80: refused, nothing moves.
	g0.input(t, m, gateway.Input{Kind: InputBuy, Target: uint64(Sword) | 2<<8})
	stepUntil(t, c, 10*time.Second, "the purchase answered", func() bool { return quiet(g0, g1) && g0.EconomyStats().Submitted == 1 })
	if s := g0.EconomyStats(); s.Refused != 1 || s.Bought != 0 {
		t.Fatalf("stats %+v, want one purchase refused", s)
	}
	if after := w.holdings(shop...); !equal(after, before) {
		t.Fatalf("a refused purchase changed %v to %v", before, after)
	}

	// Three potions cost 15.
	g0.input(t, m, gateway.Input{Kind: InputBuy, Target: uint64(Potion) | 3<<8})
	stepUntil(t, c, 10*time.Second, "the purse showing the potions", func() bool {
		p, _ := g0.PurseOf(m)
		return p.Coins == 35 && p.Goods[Potion-1] == 3
	})

	// Away from every den: nothing.
	away := farFromDens(g0, at)
	g0.input(t, m, gateway.Input{Kind: InputMove, HasPoint: true, Point: away})
	stepUntil(t, c, 10*time.Second, "the walk", func() bool {
		p, _ := g0.c.pos.Get(m)
		return geo.Distance(p.Pos, away) < 0.1
	})
	g0.input(t, m, gateway.Input{Kind: InputBuy, Target: uint64(Apple) | 1<<8})
	c.StepSync(5)
	if s := g0.EconomyStats(); s.Bought != 1 || s.Submitted != 2 {
		t.Fatalf("stats %+v: a purchase away from any den was sent", s)
	}
	bal := w.audit()
	for acct, want := range map[string]int64{
		CoinsAccount(501): 35, GoodsAccount(501, Potion): 3, ShopCoinsAccount: 15, ShopGoodsAccount(Potion): -3, GoodsAccount(501, Sword): 0,
	} {
		if bal[acct] != want {
			t.Errorf("%s: %d, want %d", acct, bal[acct], want)
		}
	}
}

// A player handed over to another node buys there: the node simulating it
// (not the one it logged in on) records the purchase, under the account
// its owner record names.
func TestShopPurchaseAfterAHandoff(t *testing.T) {
	w := startEconWorld(t, 2)
	c, g0, g1 := econNodes(t, w, Config{Seed: 24, DenChance: 1, StockRadius: 1e-3})
	w.fund(511, noGood, 50)
	geo := g0.geo
	ch := geo.ChunkOf(torus.Pos{X: 1000, Y: border + 64})
	at, _, ok := g1.denSite(interest.Column{X: ch.X, Y: ch.Y})
	if !ok {
		t.Fatal("no den site")
	}
	m := g0.client(t, 511, torus.Pos{X: 1000, Y: border - 20})
	c.StepSync(2)
	g0.input(t, m, gateway.Input{Kind: InputMove, HasPoint: true, Point: geo.Translate(at, torus.Pos{X: 1})})
	stepUntil(t, c, 60*time.Second, "the walk to zone-1's den", func() bool {
		p, ok := g1.c.pos.Get(m)
		_, den := g1.nearest(at, 1, KindDen)
		return ok && g1.r.Simulated(m) && den && geo.Distance(p.Pos, geo.Translate(at, torus.Pos{X: 1})) < 0.1
	})
	g1.input(t, m, gateway.Input{Kind: InputBuy, Target: uint64(Apple) | 2<<8})
	stepUntil(t, c, 10*time.Second, "the purchase on zone-1", func() bool { return quiet(g0, g1) && g1.EconomyStats().Bought == 1 })
	bal := w.audit()
	if bal[CoinsAccount(511)] != 46 || bal[GoodsAccount(511, Apple)] != 2 {
		t.Fatalf("coins %d, apples %d: want 46 and 2", bal[CoinsAccount(511)], bal[GoodsAccount(511, Apple)])
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// farFromDens returns a point within 40 m of p that no den site is within
// twice the shop's reach of.
func farFromDens(g *Game, p torus.Pos) torus.Pos {
	reach := 2 * g.cfg.Economy.ShopReach
	for dx := -40.0; dx <= 40; dx += 4 {
		for dy := -40.0; dy <= 40; dy += 4 {
			q := g.geo.Translate(p, torus.Pos{X: dx, Y: dy})
			clear := true
			for c := range g.geo.ChunksWithin(g.geo.ChunkOf(q), 1, 0) {
				if at, _, ok := g.denSite(interest.Column{X: c.X, Y: c.Y}); ok && g.geo.Within(at, q, reach) {
					clear = false
				}
			}
			if clear {
				return q
			}
		}
	}
	panic("every point near the den is near another")
}
