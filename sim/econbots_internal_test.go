package sim

import (
	"testing"

	"github.com/shardwise/shardwise/game"
)

// A trading bot reads its trade from its purse alone: for each side, the
// purses it may see after its offer and what it makes of them, in order.
func TestTradeWatchReadsThePurse(t *testing.T) {
	purse := func(coins, apples, potions int64) game.Purse {
		return game.Purse{Coins: coins, Goods: [len(game.Goods)]int64{apples, potions, 0}}
	}
	p0 := purse(50, 3, 0)
	cases := []struct {
		name     string
		coinSide bool
		give     game.Offer
		seen     []game.Purse
		want     []tradeState
	}{
		{"coins: nothing yet", true, game.Offer{Coins: 4}, []game.Purse{p0}, []tradeState{tradeOpen}},
		{"coins: reserved, then committed", true, game.Offer{Coins: 4},
			[]game.Purse{purse(46, 3, 0), purse(46, 3, 2)}, []tradeState{tradeOpen, tradeCommitted}},
		{"coins: committed before the reserve was seen", true, game.Offer{Coins: 4},
			[]game.Purse{purse(46, 4, 0)}, []tradeState{tradeCommitted}},
		{"coins: reserved, then returned", true, game.Offer{Coins: 4},
			[]game.Purse{purse(46, 3, 0), p0}, []tradeState{tradeOpen, tradeReturned}},
		{"coins: back where it was without a reserve is nothing", true, game.Offer{Coins: 4},
			[]game.Purse{p0, p0}, []tradeState{tradeOpen, tradeOpen}},
		{"goods: reserved, then committed", false, game.Offer{Good: game.Apple, Count: 2},
			[]game.Purse{purse(50, 1, 0), purse(53, 1, 0)}, []tradeState{tradeOpen, tradeCommitted}},
		{"goods: reserved, the coins not all there yet", false, game.Offer{Good: game.Apple, Count: 2},
			[]game.Purse{purse(50, 1, 0), purse(52, 1, 0)}, []tradeState{tradeOpen, tradeOpen}},
		{"goods: reserved, then returned", false, game.Offer{Good: game.Apple, Count: 2},
			[]game.Purse{purse(50, 1, 0), purse(50, 3, 0)}, []tradeState{tradeOpen, tradeReturned}},
		{"goods: committed at once", false, game.Offer{Good: game.Apple, Count: 2},
			[]game.Purse{purse(53, 1, 0)}, []tradeState{tradeCommitted}},
	}
	for _, c := range cases {
		w := &tradeWatch{p0: p0, give: c.give, get: 3, coinSide: c.coinSide}
		for i, p := range c.seen {
			if got := w.observe(p); got != c.want[i] {
				t.Errorf("%s: purse %d (%+v) reads as %d, want %d", c.name, i, p, got, c.want[i])
			}
		}
	}
}
