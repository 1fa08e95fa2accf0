package game

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone/zonetest"
)

const border = 4096.0

// pair spawns two client players 3 m apart across the border: a on
// zone-0, b on zone-1, and steps until each sees the other as a
// simulation ghost.
func pair(t *testing.T, c *zonetest.Cluster, g0, g1 *Game, a, b account.ID) (ma, mb ecs.ID) {
	t.Helper()
	ma = g0.client(t, a, torus.Pos{X: 1000, Y: border - 1.5})
	mb = g1.client(t, b, torus.Pos{X: 1000, Y: border + 1.5})
	stepUntil(t, c, 10*time.Second, "the players seeing each other", func() bool {
		return g0.r.Ghosts().Has(mb) && g1.r.Ghosts().Has(ma)
	})
	return ma, mb
}

// gameOf returns the game of the two that simulates master.
func gameOf(master ecs.ID, games ...*Game) *Game {
	for _, g := range games {
		if g.r.Simulated(master) {
			return g
		}
	}
	return nil
}

// Two players on two nodes trade coins for swords across the border: each
// offer is reserved when made (the purses show it gone), the trade commits
// when both accept, each player ends with the other's offer, and every
// trade account is back at zero; the partner's copy of the trade follows
// the decider's and goes when the trade ends.
func TestTradeAcrossTheBorder(t *testing.T) {
	w := startEconWorld(t, 2)
	c, g0, g1 := econNodes(t, w, Config{Seed: 21, DenChance: noDens})
	w.fund(101, noGood, 100)
	w.fund(102, Sword, 5)
	ma, mb := pair(t, c, g0, g1, 101, 102)

	g0.input(t, ma, offerInput(mb, 30, noGood, 0))
	g1.input(t, mb, offerInput(ma, 0, Sword, 2))
	decider, partner := gameOf(min(ma, mb), g0, g1), gameOf(max(ma, mb), g0, g1)
	stepUntil(t, c, 20*time.Second, "both offers reserved", func() bool {
		ts := decider.TradesOf(min(ma, mb))
		return len(ts) == 1 && ts[0].reserved(true) && ts[0].reserved(false)
	})
	stepUntil(t, c, 10*time.Second, "the purses showing the offers gone", func() bool {
		pa, _ := g0.PurseOf(ma)
		pb, _ := g1.PurseOf(mb)
		return pa.Coins == 70 && pb.Goods[Sword-1] == 3
	})
	stepUntil(t, c, 10*time.Second, "the partner's copy", func() bool {
		ts := partner.TradesOf(max(ma, mb))
		return len(ts) == 1 && !ts[0].Decides && ts[0].reserved(true) && ts[0].reserved(false)
	})
	if got := w.holdings(CoinsAccount(102), GoodsAccount(101, Sword)); got[0] != 0 || got[1] != 0 {
		t.Fatalf("goods moved before anyone accepted: %v", got)
	}
	g0.input(t, ma, gateway.Input{Kind: InputTradeAccept, Target: uint64(mb)})
	g1.input(t, mb, gateway.Input{Kind: InputTradeAccept, Target: uint64(ma)})
	stepUntil(t, c, 20*time.Second, "the trade to end", func() bool { return quiet(g0, g1) })
	if s := decider.EconomyStats(); s.Committed != 1 || s.Cancelled != 0 {
		t.Fatalf("decider's stats %+v", s)
	}
	stepUntil(t, c, 10*time.Second, "the purses showing the trade", func() bool {
		pa, _ := g0.PurseOf(ma)
		pb, _ := g1.PurseOf(mb)
		return pa.Coins == 70 && pa.Goods[Sword-1] == 2 && pb.Coins == 30 && pb.Goods[Sword-1] == 3
	})
	// The partner's copy goes when the decider's end reaches its node, a
	// tick or two after the decider's own.
	stepUntil(t, c, 10*time.Second, "no trade left on either master", func() bool {
		return len(g0.TradesOf(ma))+len(g1.TradesOf(mb)) == 0
	})
	bal := w.audit()
	for acct, want := range map[string]int64{
		CoinsAccount(101): 70, GoodsAccount(101, Sword): 2, CoinsAccount(102): 30, GoodsAccount(102, Sword): 3,
	} {
		if bal[acct] != want {
			t.Errorf("%s: %d, want %d", acct, bal[acct], want)
		}
	}
}

// A player with 100 coins offers 60 to one partner and 60 to another, on
// the other node: the second offer is refused by the shared reservations,
// its trade cancelled with nothing moved; the first commits.
func TestTwoTradesCannotPromiseTheSameCoins(t *testing.T) {
	w := startEconWorld(t, 2)
	c, g0, g1 := econNodes(t, w, Config{Seed: 22, DenChance: noDens})
	w.fund(201, noGood, 100)
	w.fund(202, Apple, 10)
	w.fund(203, Apple, 10)
	ma := g0.client(t, 201, torus.Pos{X: 1000, Y: border - 1.5})
	mb := g1.client(t, 202, torus.Pos{X: 1000, Y: border + 1.5})
	mc := g1.client(t, 203, torus.Pos{X: 1002, Y: border + 1.5})
	stepUntil(t, c, 10*time.Second, "the players seeing each other", func() bool {
		return g0.r.Ghosts().Has(mb) && g0.r.Ghosts().Has(mc) && g1.r.Ghosts().Has(ma)
	})
	var ended []Trade
	for _, g := range []*Game{g0, g1} {
		g.econ.onTradeEnd = func(t Trade) { ended = append(ended, t) }
	}
	for _, p := range []ecs.ID{mb, mc} {
		g0.input(t, ma, offerInput(p, 60, noGood, 0))
		gameOf(p, g0, g1).input(t, p, offerInput(ma, 0, Apple, 5))
	}
	// One offer of 60 is refused; its trade is cancelled, the other waits
	// with both offers reserved.
	stepUntil(t, c, 20*time.Second, "one trade refused and cancelled", func() bool {
		return len(ended) == 1 && !ended[0].Commit && g0.OpenTrades()+g1.OpenTrades() == 1
	})
	if ended[0].Reason != CancelRefused {
		t.Fatalf("cancelled for %d, want a refused offer", ended[0].Reason)
	}
	for _, p := range []ecs.ID{mb, mc} {
		g0.input(t, ma, gateway.Input{Kind: InputTradeAccept, Target: uint64(p)})
		gameOf(p, g0, g1).input(t, p, gateway.Input{Kind: InputTradeAccept, Target: uint64(ma)})
	}
	stepUntil(t, c, 20*time.Second, "the other trade to commit", func() bool { return quiet(g0, g1) && len(ended) == 2 })
	if !ended[1].Commit {
		t.Fatalf("the second trade ended %+v, want committed", ended[1])
	}
	winner := ended[1].A.Master
	if winner == ma {
		winner = ended[1].B.Master
	}
	bal := w.audit()
	if bal[CoinsAccount(201)] != 40 || bal[GoodsAccount(201, Apple)] != 5 {
		t.Errorf("the buyer holds %d coins and %d apples, want 40 and 5", bal[CoinsAccount(201)], bal[GoodsAccount(201, Apple)])
	}
	for p, a := range map[ecs.ID]account.ID{mb: 202, mc: 203} {
		coins, apples := int64(0), int64(10)
		if p == winner {
			coins, apples = 60, 5
		}
		if bal[CoinsAccount(a)] != coins || bal[GoodsAccount(a, Apple)] != apples {
			t.Errorf("account %d holds %d coins and %d apples, want %d and %d", a, bal[CoinsAccount(a)], bal[GoodsAccount(a, Apple)], coins, apples)
		}
	}
}

// A partner who walks out of range cancels the trade, and a deciding
// master that logs out does too; everything reserved comes back.
func TestTradesCancelOutOfRangeAndAtLogout(t *testing.T) {
	w := startEconWorld(t, 2)
	c, g0, g1 := econNodes(t, w, Config{Seed: 23, DenChance: noDens})
	w.fund(301, noGood, 50)
	w.fund(302, Potion, 4)
	w.fund(303, noGood, 50)
	w.fund(304, Potion, 4)
	var ended []Trade
	for _, g := range []*Game{g0, g1} {
		g.econ.onTradeEnd = func(t Trade) { ended = append(ended, t) }
	}

	// Out of range: b walks 40 m north, away from the border.
	ma, mb := pair(t, c, g0, g1, 301, 302)
	g0.input(t, ma, offerInput(mb, 20, noGood, 0))
	g1.input(t, mb, offerInput(ma, 0, Potion, 3))
	decider := gameOf(min(ma, mb), g0, g1)
	stepUntil(t, c, 20*time.Second, "both offers reserved", func() bool {
		ts := decider.TradesOf(min(ma, mb))
		return len(ts) == 1 && ts[0].reserved(true) && ts[0].reserved(false)
	})
	g1.input(t, mb, gateway.Input{Kind: InputMove, HasPoint: true, Point: torus.Pos{X: 1000, Y: border + 40}})
	stepUntil(t, c, 20*time.Second, "the trade cancelled", func() bool { return len(ended) == 1 && quiet(g0, g1) })
	if ended[0].Commit || ended[0].Reason != CancelRange {
		t.Fatalf("ended %+v, want cancelled for range", ended[0])
	}
	if got := w.holdings(CoinsAccount(301), GoodsAccount(302, Potion)); got[0] != 50 || got[1] != 4 {
		t.Fatalf("after the cancel: coins %d, potions %d; want 50 and 4 back", got[0], got[1])
	}

	// At logout, while the offers stand.
	mc, md := pair(t, c, g0, g1, 303, 304)
	g0.input(t, mc, offerInput(md, 25, noGood, 0))
	g1.input(t, md, offerInput(mc, 0, Potion, 2))
	decider = gameOf(min(mc, md), g0, g1)
	stepUntil(t, c, 20*time.Second, "both offers reserved", func() bool {
		ts := decider.TradesOf(min(mc, md))
		return len(ts) == 1 && ts[0].reserved(true) && ts[0].reserved(false)
	})
	// The deciding master logs out: its node runs the cancel without it.
	gone := min(mc, md)
	decider.r.Post(func() { decider.removePlayer(gone) })
	stepUntil(t, c, 20*time.Second, "the trade cancelled", func() bool { return len(ended) == 2 && quiet(g0, g1) })
	if ended[1].Commit || ended[1].Reason != CancelGone {
		t.Fatalf("ended %+v, want cancelled by the logout", ended[1])
	}
	bal := w.audit()
	for acct, want := range map[string]int64{
		CoinsAccount(301): 50, GoodsAccount(302, Potion): 4, CoinsAccount(303): 50, GoodsAccount(304, Potion): 4,
	} {
		if bal[acct] != want {
			t.Errorf("%s: %d, want %d", acct, bal[acct], want)
		}
	}
}

// gatedEconomy holds every trade offer until open is closed: a slow
// economy cluster, in front of the real one.
type gatedEconomy struct {
	Economy
	open chan struct{}
}

func (gatedEconomy) holdsCalls() {}

func (e gatedEconomy) Record(ctx context.Context, scope string, m netting.Movement) (netting.Outcome, error) {
	if strings.Contains(m.Key, ":offer:") {
		select {
		case <-e.open:
		case <-ctx.Done():
			return netting.Outcome{}, ctx.Err()
		}
	}
	return e.Economy.Record(ctx, scope, m)
}

// The deciding master is handed over to the other node while its offers
// are still being recorded: the answers, which come back to the node that
// sent them, follow the master to its new node, and the trade commits
// there.
func TestTradeAnswersFollowAHandedOverMaster(t *testing.T) {
	w := startEconWorld(t, 2)
	gate := gatedEconomy{Economy: w.router, open: make(chan struct{})}
	eco := w.economy()
	eco.Ledger, eco.AttemptTimeout, eco.CallDeadline, eco.ResubmitAfter = gate, 30*time.Second, 40*time.Second, 90*time.Second
	c, g0, g1 := econNodes(t, w, Config{Seed: 25, DenChance: noDens, Economy: eco})
	w.fund(901, noGood, 40)
	w.fund(902, Apple, 4)
	ma, mb := pair(t, c, g0, g1, 901, 902)
	if ma > mb {
		t.Fatalf("zone-0's master %d has the higher id than zone-1's %d: the test wants it deciding", ma, mb)
	}
	g0.input(t, ma, offerInput(mb, 15, noGood, 0))
	g1.input(t, mb, offerInput(ma, 0, Apple, 4))
	stepUntil(t, c, 10*time.Second, "both offers sent", func() bool {
		ts := g0.TradesOf(ma)
		return len(ts) == 1 && ts[0].Steps[stepOfferA].Status == StepPending && ts[0].Steps[stepOfferB].Status == StepPending
	})
	// Both walk north, ma past zone-0's handoff margin (32 m), mb to stop
	// just inside the band where zone-0 still sees it, 8 m behind: in
	// range all the way, for the node that decides.
	g0.input(t, ma, gateway.Input{Kind: InputMove, HasPoint: true, Point: torus.Pos{X: 1000, Y: border + 37}})
	g1.input(t, mb, gateway.Input{Kind: InputMove, HasPoint: true, Point: torus.Pos{X: 1000, Y: border + 29}})
	stepUntil(t, c, 20*time.Second, "the decider handed over to zone-1", func() bool {
		return g1.r.Simulated(ma) && len(g1.TradesOf(ma)) == 1
	})
	close(gate.open)
	g1.input(t, ma, gateway.Input{Kind: InputTradeAccept, Target: uint64(mb)})
	g1.input(t, mb, gateway.Input{Kind: InputTradeAccept, Target: uint64(ma)})
	stepUntil(t, c, 20*time.Second, "the offers reserved on zone-1", func() bool {
		ts := g1.TradesOf(ma)
		return len(ts) == 1 && ts[0].reserved(true) && ts[0].reserved(false)
	})
	g1.input(t, ma, gateway.Input{Kind: InputTradeAccept, Target: uint64(mb)})
	g1.input(t, mb, gateway.Input{Kind: InputTradeAccept, Target: uint64(ma)})
	stepUntil(t, c, 20*time.Second, "the trade to commit", func() bool { return quiet(g0, g1) })
	if s0, s1 := g0.EconomyStats(), g1.EconomyStats(); s0.Forwarded < 2 || s1.Committed != 1 || s1.Resubmitted != 0 {
		t.Fatalf("zone-0 %+v, zone-1 %+v: want both answers forwarded and the trade committed on zone-1", s0, s1)
	}
	bal := w.audit()
	for acct, want := range map[string]int64{
		CoinsAccount(901): 25, GoodsAccount(901, Apple): 4, CoinsAccount(902): 15, GoodsAccount(902, Apple): 0,
	} {
		if bal[acct] != want {
			t.Errorf("%s: %d, want %d", acct, bal[acct], want)
		}
	}
}
