package game

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/torus"
)

// Randomized trades between players on two zone nodes, standing together
// across the border, with offers that promise more than the players hold,
// accepts, cancels, players walking out of range and back, and one of the
// three economy nodes halted (as a crash would) halfway through. In the
// end: every asset conserved, no account of a player below zero, nothing
// refused at settle, every trade account empty, and each player holding
// exactly its funding plus what the trades that committed gave it and
// less what they took: nothing promised twice was spent twice.
func TestRandomTradesAcrossTheBorderWithAnEconomyNodeKill(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	w := startEconWorld(t, 3)
	c, g0, g1 := econNodes(t, w, Config{Seed: seed, DenChance: noDens})
	games := []*Game{g0, g1}

	const players, coins, goods = 8, 100, 6
	type player struct {
		a      account.ID
		master ecs.ID
		home   torus.Pos
		away   int // ticks until it walks back
	}
	ps := make([]*player, players)
	want := map[string]int64{}
	for i := range ps {
		side := i % 2
		home := torus.Pos{X: 1000 + 2*float64(i/2), Y: border - 1.5 + 3*float64(side)}
		p := &player{a: account.ID(801 + i), home: home}
		p.master = games[side].client(t, p.a, home)
		ps[i] = p
		w.fund(p.a, noGood, coins)
		want[CoinsAccount(p.a)] = coins
		for _, g := range Goods {
			w.fund(p.a, g, goods)
			want[GoodsAccount(p.a, g)] = goods
		}
	}
	stepUntil(t, c, 10*time.Second, "the players seeing each other", func() bool {
		for _, p := range ps {
			for _, g := range games {
				if !g.r.Simulated(p.master) && !g.r.Ghosts().Has(p.master) {
					return false
				}
			}
		}
		return true
	})
	var ended []Trade
	for _, g := range games {
		g.econ.onTradeEnd = func(t Trade) { ended = append(ended, t) }
	}
	in := func(p *player, x gateway.Input) {
		if g := gameOf(p.master, g0, g1); g != nil {
			g.input(t, p.master, x)
		}
	}
	randomOffer := func() (int64, Good, int64) {
		var o Offer
		if rng.IntN(3) > 0 {
			o.Coins = rng.Int64N(80)
		}
		if rng.IntN(2) == 0 {
			o.Good, o.Count = Goods[rng.IntN(len(Goods))], 1+rng.Int64N(goods)
		}
		return o.Coins, o.Good, o.Count
	}

	const rounds = 400
	halted := ""
	for round := range rounds {
		if round == rounds/2 {
			victim := w.nodes[rng.IntN(len(w.nodes))]
			victim.Halt()
			halted = victim.Name()
		}
		for _, p := range ps {
			if p.away > 0 {
				if p.away--; p.away == 0 {
					in(p, gateway.Input{Kind: InputMove, HasPoint: true, Point: p.home})
				}
			}
		}
		p, q := ps[rng.IntN(players)], ps[rng.IntN(players)]
		if p == q {
			continue
		}
		switch r := rng.IntN(100); {
		case r < 45:
			coins, good, count := randomOffer()
			in(p, offerInput(q.master, coins, good, count))
		case r < 80:
			// Both sides of an open trade accept, if there is one.
			var open []Trade
			for _, g := range games {
				for _, x := range ps {
					if g.r.Simulated(x.master) {
						for _, tr := range g.TradesOf(x.master) {
							if tr.Decides && tr.Phase == TradeOpen {
								open = append(open, tr)
							}
						}
					}
				}
			}
			if len(open) > 0 {
				tr := open[rng.IntN(len(open))]
				for _, x := range ps {
					if x.master == tr.A.Master {
						in(x, gateway.Input{Kind: InputTradeAccept, Target: uint64(tr.B.Master)})
					}
					if x.master == tr.B.Master {
						in(x, gateway.Input{Kind: InputTradeAccept, Target: uint64(tr.A.Master)})
					}
				}
			}
		case r < 92:
			in(p, gateway.Input{Kind: InputTradeCancel, Target: uint64(q.master)})
		case p.away == 0:
			// Out of range on its own side, or over the border and past
			// the handoff margin, handed over with its trades.
			dy := 25.0
			if rng.IntN(2) == 0 {
				dy = -45
			}
			if p.home.Y < border {
				dy = -dy
			}
			in(p, gateway.Input{Kind: InputMove, HasPoint: true, Point: torus.Pos{X: p.home.X, Y: p.home.Y + dy}})
			p.away = 10 + rng.IntN(30)
		}
		stepPaced(t, c, 1+rng.IntN(3))
	}
	// Everyone home; every open trade cancelled.
	for _, p := range ps {
		in(p, gateway.Input{Kind: InputMove, HasPoint: true, Point: p.home})
		for _, q := range ps {
			if p != q {
				in(p, gateway.Input{Kind: InputTradeCancel, Target: uint64(q.master)})
			}
		}
	}
	stepUntil(t, c, 90*time.Second, "every trade to end", func() bool { return quiet(g0, g1) })

	committed, refused := 0, 0
	for _, tr := range ended {
		if tr.Reason == CancelRefused {
			refused++
		}
		if !tr.Commit {
			continue
		}
		committed++
		for _, x := range []struct {
			from, to account.ID
			o        Offer
		}{{tr.A.Account, tr.B.Account, tr.A.Offer}, {tr.B.Account, tr.A.Account, tr.B.Offer}} {
			for _, aa := range x.o.assets(nil) {
				want[walletAccount(x.from, aa.asset)] -= aa.amount
				want[walletAccount(x.to, aa.asset)] += aa.amount
			}
		}
	}
	bal := w.audit()
	for acct, n := range want {
		if bal[acct] != n {
			t.Errorf("%s holds %d; its funding and the committed trades say %d", acct, bal[acct], n)
		}
	}
	s0, s1 := g0.EconomyStats(), g1.EconomyStats()
	t.Logf("%d trades ended: %d committed, %d cancelled for a refused offer; economy node %s halted; zone-0 %+v; zone-1 %+v",
		len(ended), committed, refused, halted, s0, s1)
	if committed == 0 || refused == 0 {
		t.Fatalf("the run tested too little: %d commits, %d refused offers", committed, refused)
	}
	if s0.Committed+s1.Committed != committed || s0.Committed+s0.Cancelled+s1.Committed+s1.Cancelled != len(ended) {
		t.Fatalf("stats disagree with the trades seen ending: %+v %+v", s0, s1)
	}
}
