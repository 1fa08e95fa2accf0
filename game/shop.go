package game

import (
	"fmt"
	"strconv"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/gateway/clientinput"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// Good is a kind of goods: fungible, counted in each player's account of
// it (GoodsAccount). Zero is no good (coins, where an asset is meant).
type Good uint8

// The goods of the game.
const (
	noGood Good = iota
	Apple
	Potion
	Sword
)

// Goods lists every good, in the order purses show them.
var Goods = [...]Good{Apple, Potion, Sword}

// Valid reports whether g is one of Goods.
func (g Good) Valid() bool { return g >= Apple && g <= Sword }

// Price is what a shop asks for one g, in coins.
func (g Good) Price() int64 {
	switch g {
	case Apple:
		return 2
	case Potion:
		return 5
	case Sword:
		return 40
	}
	return 0
}

func (g Good) String() string {
	switch g {
	case noGood:
		return "coins"
	case Apple:
		return "apple"
	case Potion:
		return "potion"
	case Sword:
		return "sword"
	}
	return "good(" + strconv.Itoa(int(g)) + ")"
}

// Client input kinds of the economy (docs/protocol.md, Inputs). Each is the
// master's; the pet's are accepted and do nothing.
const (
	// InputBuy buys Target>>8 (1–MaxBuy) of good Target&0xff from the
	// keeper of a den within ShopReach of the master.
	InputBuy uint32 = 5
	// InputTradeOffer offers the master's partner Target (a player's
	// master) a trade, or joins the one the partner offered: the master
	// gives Point.X coins and Point.Y/256 of good Point.Y%256 (both whole,
	// at least 0). One offer per side per trade; it is reserved on the
	// economy cluster when made.
	InputTradeOffer uint32 = 6
	// InputTradeAccept accepts the open trade with Target as both offers
	// stand; it commits once both sides have accepted.
	InputTradeAccept uint32 = 7
	// InputTradeCancel cancels the open trade with Target; every
	// reservation is released.
	InputTradeCancel uint32 = 8
)

// MaxBuy bounds the count of one purchase.
const MaxBuy = 1000

func isEconomyInput(kind uint32) bool { return kind >= InputBuy && kind <= InputTradeCancel }

// checkEconomyInput is checkInput for the economy's kinds.
func checkEconomyInput(in clientinput.Input) error {
	switch in.Kind {
	case InputBuy:
		g, n := Good(in.Target&0xff), in.Target>>8
		if !g.Valid() || n < 1 || n > MaxBuy {
			return fmt.Errorf("%w: buy %d of good %d: want a good of 1–%d and a count of 1–%d", clientinput.ErrBadInput, n, g, len(Goods), MaxBuy)
		}
	case InputTradeOffer:
		if in.Target == 0 || !in.HasPoint {
			return fmt.Errorf("%w: trade offer %d needs a partner and a point", clientinput.ErrBadInput, in.Seq)
		}
		if _, err := offerOf(in.Point.X, in.Point.Y); err != nil {
			return fmt.Errorf("%w: trade offer %d: %v", clientinput.ErrBadInput, in.Seq, err)
		}
	case InputTradeAccept, InputTradeCancel:
		if in.Target == 0 {
			return fmt.Errorf("%w: trade input %d without a partner", clientinput.ErrBadInput, in.Seq)
		}
	}
	return nil
}

// offerOf reads an offer from an input's point: x coins, y = good + 256 ×
// count.
func offerOf(x, y float64) (Offer, error) {
	if x < 0 || y < 0 || x != float64(int64(x)) || y != float64(int64(y)) || x > maxAmount || y > maxAmount {
		return Offer{}, fmt.Errorf("coins %v and goods %v must be whole numbers within [0, %d]", x, y, int64(maxAmount))
	}
	o := Offer{Coins: int64(x), Good: Good(int64(y) % 256), Count: int64(y) / 256}
	switch {
	case o.Count > 0 && !o.Good.Valid():
		return Offer{}, fmt.Errorf("good %d is not one of the %d goods", o.Good, len(Goods))
	case o.Count == 0 && o.Good != noGood:
		return Offer{}, fmt.Errorf("good %d with a count of 0", o.Good)
	}
	return o, nil
}

// economyInput applies an economy input to a master (or ignores it for a
// pet, or when the game has no economy) and reports whether in was one.
func (g *Game) economyInput(id ecs.ID, in clientinput.Input) bool {
	if !isEconomyInput(in.Kind) {
		return false
	}
	if g.econ.pool == nil || !g.c.master.Has(id) {
		return true
	}
	switch in.Kind {
	case InputBuy:
		g.buy(id, Good(in.Target&0xff), int64(in.Target>>8))
	case InputTradeOffer:
		if o, err := offerOf(in.Point.X, in.Point.Y); err == nil {
			g.tradeInput(id, ecs.ID(in.Target), opOffer, o)
		}
	case InputTradeAccept:
		g.tradeInput(id, ecs.ID(in.Target), opAccept, Offer{})
	case InputTradeCancel:
		g.tradeInput(id, ecs.ID(in.Target), opCancel, Offer{})
	}
	return true
}

// buy records a purchase from the keeper of a den within reach of master:
// one movement, the coins to the shop and the goods to the player, or, for
// want of coins, nothing at all.
func (g *Game) buy(master ecs.ID, good Good, count int64) {
	a, ok := g.accountFor(master)
	p, okPos := g.c.pos.Get(master)
	if !ok || !okPos || !good.Valid() || count < 1 || count > MaxBuy {
		return
	}
	if _, ok := g.nearest(p.Pos, g.cfg.Economy.ShopReach, KindDen); !ok {
		return
	}
	id, err := g.r.NewID()
	if err != nil {
		return
	}
	key := "buy:" + strconv.FormatUint(uint64(id), 10)
	g.submit(&econJob{kind: jobBuy, scope: PlayerScope(a), mv: buyMovement(key, a, good, count), master: master, acct: a, good: good, count: count})
}

// buyMovement is a purchase: coins from the player to the shop, goods from
// the shop to the player.
func buyMovement(key string, a account.ID, good Good, count int64) netting.Movement {
	cost := good.Price() * count
	return netting.Movement{Key: key, Legs: []ledger.Leg{
		ledger.Debit(CoinsAccount(a), cost), ledger.Credit(ShopCoinsAccount, cost),
		ledger.Debit(ShopGoodsAccount(good), count), ledger.Credit(GoodsAccount(a, good), count),
	}}
}
