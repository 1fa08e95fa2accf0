package game

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// Trades whose deciding zone node dies (issue 30). The node's death is
// what its standby sees: the deciding master comes back with its Trades
// component as of a checkpoint, which may predate the trade (it is gone)
// or hold an older state of it. The economy's time is moved by hand: its
// escrow sweep is run at the store's now plus what the test says.

// sweepEscrows runs every economy node's escrow sweep at the store's
// clock plus after, and sums what they did.
func (w *econWorld) sweepEscrows(after time.Duration) econ.EscrowSweepSummary {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now, err := w.store.Now(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	var all econ.EscrowSweepSummary
	for _, n := range w.nodes {
		sum, err := n.SweepEscrows(ctx, econ.EscrowSweepOptions{Now: now.Add(after)})
		if err != nil {
			w.t.Fatalf("escrow sweep of %s: %v", n.Name(), err)
		}
		for _, f := range sum.Failed {
			w.t.Errorf("escrow sweep of %s: escrow %d: %v", n.Name(), f.ID, f.Err)
		}
		all.Expired = append(all.Expired, sum.Expired...)
		all.Overruled = append(all.Overruled, sum.Overruled...)
		all.Claimed += sum.Claimed
		all.Looked += sum.Looked
		all.Waiting += sum.Waiting
		w.t.Logf("escrow sweep of %s: %+v", n.Name(), sum)
	}
	return all
}

// reservedTrade opens a trade between a (100 coins, on zone-0) and b (5
// swords, on zone-1): a offers 30 coins, b 2 swords, both reserved. It
// returns the deciding game and master, the partner's, and the trade.
func reservedTrade(t *testing.T, w *econWorld, c *zonetest.Cluster, g0, g1 *Game, a, b account.ID) (dg *Game, dm ecs.ID, pg *Game, pm ecs.ID, tr Trade) {
	t.Helper()
	w.fund(a, noGood, 100)
	w.fund(b, Sword, 5)
	ma, mb := pair(t, c, g0, g1, a, b)
	g0.input(t, ma, offerInput(mb, 30, noGood, 0))
	g1.input(t, mb, offerInput(ma, 0, Sword, 2))
	dm, pm = min(ma, mb), max(ma, mb)
	dg, pg = gameOf(dm, g0, g1), gameOf(pm, g0, g1)
	stepUntil(t, c, 20*time.Second, "both offers reserved", func() bool {
		ts := dg.TradesOf(dm)
		return len(ts) == 1 && ts[0].reserved(true) && ts[0].reserved(false)
	})
	tr = dg.TradesOf(dm)[0]
	if tr.Phase != TradeOpen {
		t.Fatalf("the trade is %+v, want still open", tr)
	}
	return dg, dm, pg, pm, tr
}

// restoreTrades sets a master's Trades to list, as a standby adopting the
// master from a checkpoint would (its node has no call of them in flight).
func restoreTrades(c *zonetest.Cluster, g *Game, master ecs.ID, list []Trade) {
	g.r.Post(func() {
		tr, ok := g.econ.trades.Get(master)
		if !ok {
			return
		}
		tr.List = append([]Trade(nil), list...)
		for i := range tr.List {
			for s := range numSteps {
				delete(g.econ.inflight, stepKey(tr.List[i].ID, s))
			}
		}
	})
	c.StepSync(1)
}

// checkpoint is a master's Trades through their handoff codec, as a
// checkpoint carries them.
func checkpoint(t *testing.T, g *Game, master ecs.ID) []Trade {
	t.Helper()
	b := tradesCodec.Append(nil, &Trades{List: g.TradesOf(master)})
	tr, err := tradesCodec.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return tr.List
}

// A trade whose deciding node stops after both offers were reserved, and
// whose standby's checkpoint predates the trade, is cancelled by the
// economy once its bound has passed, not before: each side holds what it
// held, the partner's copy goes, and the money is sound.
func TestATradeWhoseDeciderStopsIsCancelledByTheEconomy(t *testing.T) {
	w := startEconWorld(t, 2)
	eco := w.economy()
	// Short enough for the partner's copy to go within the test (after
	// twice this in ticks), long enough for the trade to be reserved
	// before its decider would cancel it (ticks run as fast as they step).
	eco.TradeTimeout = 10 * time.Second
	c, g0, g1 := econNodes(t, w, Config{Seed: 31, DenChance: noDens, Economy: eco})
	dg, dm, pg, pm, tr := reservedTrade(t, w, c, g0, g1, 301, 302)
	restoreTrades(c, dg, dm, nil) // the decider's node dies; its standby never saw the trade

	if sum := w.sweepEscrows(econ.DefaultEscrowBound - 10*time.Second); len(sum.Expired) != 0 || sum.Claimed != 0 || sum.Waiting == 0 {
		t.Fatalf("the economy decided before its bound: %+v", sum)
	}
	if got := w.holdings(CoinsAccount(301), GoodsAccount(302, Sword)); !slices.Equal(got, []int64{70, 3}) {
		t.Fatalf("before the bound the offers are still held: %v, want [70 3]", got)
	}
	sum := w.sweepEscrows(econ.DefaultEscrowBound)
	if !slices.Equal(sum.Expired, []uint64{tr.ID}) || sum.Claimed != 2 {
		t.Fatalf("at the bound: %+v, want trade %d cancelled and both sides paid back", sum, tr.ID)
	}
	if got := w.holdings(CoinsAccount(301), GoodsAccount(301, Sword), CoinsAccount(302), GoodsAccount(302, Sword)); !slices.Equal(got, []int64{100, 0, 0, 5}) {
		t.Fatalf("after the economy's cancel: %v, want [100 0 0 5]", got)
	}
	stepUntil(t, c, 20*time.Second, "the partner's copy to go", func() bool { return len(pg.TradesOf(pm)) == 0 })
	bal := w.audit()
	if bal[CoinsAccount(301)] != 100 || bal[GoodsAccount(302, Sword)] != 5 {
		t.Fatalf("settled balances %d coins, %d swords; want 100 and 5", bal[CoinsAccount(301)], bal[GoodsAccount(302, Sword)])
	}
}

// A trade resumed on a standby from a checkpoint taken before the
// economy cancelled it commits, is told ESCROW.DECIDED, and ends as the
// economy decided: cancelled, each side paid back once, the partner told.
func TestATradeResumedAfterTheEconomysCancelLearnsIt(t *testing.T) {
	w := startEconWorld(t, 2)
	c, g0, g1 := econNodes(t, w, Config{Seed: 32, DenChance: noDens})
	dg, dm, pg, pm, tr := reservedTrade(t, w, c, g0, g1, 311, 312)
	ckpt := checkpoint(t, dg, dm)
	restoreTrades(c, dg, dm, nil) // the decider's node dies
	if sum := w.sweepEscrows(econ.DefaultEscrowBound); !slices.Equal(sum.Expired, []uint64{tr.ID}) {
		t.Fatalf("economy's sweep: %+v, want trade %d cancelled", sum, tr.ID)
	}
	var ended []Trade
	dg.econ.onTradeEnd = func(t Trade) { ended = append(ended, t) }
	restoreTrades(c, dg, dm, ckpt) // its standby resumes it from the checkpoint
	dg.input(t, dm, gateway.Input{Kind: InputTradeAccept, Target: uint64(pm)})
	pg.input(t, pm, gateway.Input{Kind: InputTradeAccept, Target: uint64(dm)})
	stepUntil(t, c, 20*time.Second, "the resumed trade to end", func() bool { return quiet(g0, g1) && len(ended) == 1 })
	if e := ended[0]; e.Commit || !e.Overruled || e.Reason != CancelExpired {
		t.Fatalf("the resumed trade ended %+v, want cancelled, overruled, for expiry", e)
	}
	if s := dg.EconomyStats(); s.Cancelled != 1 || s.Committed != 0 {
		t.Fatalf("decider's stats %+v", s)
	}
	stepUntil(t, c, 10*time.Second, "the partner's copy to go", func() bool { return len(pg.TradesOf(pm)) == 0 })
	if got := w.holdings(CoinsAccount(311), GoodsAccount(311, Sword), CoinsAccount(312), GoodsAccount(312, Sword)); !slices.Equal(got, []int64{100, 0, 0, 5}) {
		t.Fatalf("after the resumed trade: %v, want everything back [100 0 0 5]", got)
	}
	w.audit()
}

// A trade resumed from a checkpoint before the economy's bound finishes
// as its players decide (its steps are idempotent by key), and the
// economy's later sweep finds nothing to do.
func TestATradeResumedInTimeFinishes(t *testing.T) {
	w := startEconWorld(t, 2)
	c, g0, g1 := econNodes(t, w, Config{Seed: 33, DenChance: noDens})
	dg, dm, pg, pm, _ := reservedTrade(t, w, c, g0, g1, 321, 322)
	ckpt := checkpoint(t, dg, dm)
	restoreTrades(c, dg, dm, nil)
	c.StepSync(3)
	restoreTrades(c, dg, dm, ckpt)
	dg.input(t, dm, gateway.Input{Kind: InputTradeAccept, Target: uint64(pm)})
	pg.input(t, pm, gateway.Input{Kind: InputTradeAccept, Target: uint64(dm)})
	stepUntil(t, c, 20*time.Second, "the trade to commit", func() bool { return quiet(g0, g1) && dg.EconomyStats().Committed == 1 })
	if sum := w.sweepEscrows(2 * econ.DefaultEscrowBound); len(sum.Expired)+len(sum.Overruled)+sum.Claimed != 0 {
		t.Fatalf("the economy touched a finished trade: %+v", sum)
	}
	if got := w.holdings(CoinsAccount(321), GoodsAccount(321, Sword), CoinsAccount(322), GoodsAccount(322, Sword)); !slices.Equal(got, []int64{70, 2, 30, 3}) {
		t.Fatalf("after the commit: %v, want [70 2 30 3]", got)
	}
	w.audit()
}

// dyingEconomy records the first movement through the economy and then
// never answers, as the zone node does that dies with the call out: the
// answer is lost with the node.
type dyingEconomy struct {
	Economy
	recorded chan netting.Outcome
}

func (*dyingEconomy) holdsCalls() {}

func (d *dyingEconomy) Record(ctx context.Context, scope string, m netting.Movement) (netting.Outcome, error) {
	out, err := d.Economy.Record(ctx, scope, m)
	if err == nil {
		select {
		case d.recorded <- out:
		default:
		}
	}
	<-ctx.Done()
	return netting.Outcome{}, errors.Join(errors.New("the node died"), ctx.Err())
}

// A purchase is one movement under one key: the node that dies with it
// out leaves it recorded whole (or not at all), never half, and nothing
// is left for the economy to decide.
func TestAPurchaseWhoseNodeDiesIsWhole(t *testing.T) {
	w := startEconWorld(t, 2)
	dying := &dyingEconomy{Economy: w.router, recorded: make(chan netting.Outcome, 1)}
	eco := w.economy()
	eco.Ledger = dying
	c, g0, g1 := econNodes(t, w, Config{Seed: 24, DenChance: 1, StockRadius: 1e-3, Economy: eco})
	w.fund(331, noGood, 50)
	ch := g0.geo.ChunkOf(torus.Pos{X: 1000, Y: 1000})
	at, _, ok := g0.denSite(interest.Column{X: ch.X, Y: ch.Y})
	if !ok {
		t.Fatal("no den site")
	}
	m := g0.client(t, 331, g0.geo.Translate(at, torus.Pos{X: 1}))
	stepUntil(t, c, 10*time.Second, "the den", func() bool { _, den := g0.nearest(at, 1, KindDen); return den })
	g0.input(t, m, gateway.Input{Kind: InputBuy, Target: uint64(Potion) | 3<<8})
	var out netting.Outcome
	stepUntil(t, c, 10*time.Second, "the purchase recorded", func() bool {
		select {
		case out = <-dying.recorded:
			return true
		default:
			return false
		}
	})
	if out.Status != netting.Accepted {
		t.Fatalf("purchase: %+v", out)
	}
	_ = g0.Close() // the node dies with the answer out
	_ = g1.Close()
	if sum := w.sweepEscrows(2 * econ.DefaultEscrowBound); len(sum.Expired)+sum.Claimed != 0 {
		t.Fatalf("the economy found a purchase to decide: %+v", sum)
	}
	bal := w.audit()
	if bal[CoinsAccount(331)] != 35 || bal[GoodsAccount(331, Potion)] != 3 || bal[ShopCoinsAccount] != 15 {
		t.Fatalf("after the purchase: %d coins, %d potions, shop %d; want 35, 3, 15 (once, whole)",
			bal[CoinsAccount(331)], bal[GoodsAccount(331, Potion)], bal[ShopCoinsAccount])
	}
}

// A trade left open past TradeTimeout is cancelled by its deciding node,
// before the economy's bound, with every reservation returned.
func TestATradeOpenPastItsTimeoutIsCancelledByItsNode(t *testing.T) {
	w := startEconWorld(t, 2)
	eco := w.economy()
	eco.TradeTimeout = 10 * time.Second
	c, g0, g1 := econNodes(t, w, Config{Seed: 34, DenChance: noDens, Economy: eco})
	var ended []Trade
	for _, g := range []*Game{g0, g1} {
		g.econ.onTradeEnd = func(t Trade) { ended = append(ended, t) }
	}
	reservedTrade(t, w, c, g0, g1, 341, 342)
	stepUntil(t, c, 30*time.Second, "the trade to end", func() bool { return quiet(g0, g1) && len(ended) == 1 })
	if e := ended[0]; e.Commit || e.Reason != CancelExpired || e.Overruled {
		t.Fatalf("ended %+v, want cancelled by its node for expiry", e)
	}
	if sum := w.sweepEscrows(2 * econ.DefaultEscrowBound); len(sum.Expired)+sum.Claimed != 0 {
		t.Fatalf("the economy had something left to decide: %+v", sum)
	}
	if got := w.holdings(CoinsAccount(341), GoodsAccount(342, Sword)); !slices.Equal(got, []int64{100, 5}) {
		t.Fatalf("after the timeout: %v, want [100 5]", got)
	}
	w.audit()
}

// A trade that learns of a commit for a side it never heard from (its
// checkpoint predates the side's first request) claims nothing for that
// side: it does not know the wallet; the economy's sweep pays it from the
// end's owed account.
func TestNoClaimForASideOfUnknownAccount(t *testing.T) {
	tr := Trade{ID: 5, Decides: true, Phase: TradeClaiming, Commit: true,
		A: TradeSide{Account: 401, Offer: Offer{Coins: 10}, Offered: true}, B: TradeSide{}}
	tr.Steps[stepOfferA].Status = StepDone
	if _, m, ok := tr.movement(stepClaimB); ok {
		t.Fatalf("a claim for an unknown account: %+v", m)
	}
}

// A decider resumed from a checkpoint taken before its commit decides to
// cancel; the economy answers its end ESCROW.DECIDED, and the trade ends
// committed, claiming what the commit owes each side.
func TestAnEndToldDecidedTakesTheOtherDecision(t *testing.T) {
	tr := Trade{ID: 6, Decides: true, Phase: TradeCancelling, Cancel: true, Reason: CancelRange,
		A: TradeSide{Account: 501, Offer: Offer{Coins: 10}, Offered: true, Accepted: true},
		B: TradeSide{Account: 502, Offer: Offer{Good: Sword, Count: 1}, Offered: true, Accepted: true}}
	tr.Steps[stepOfferA].Status, tr.Steps[stepOfferB].Status = StepDone, StepDone
	tr.Steps[stepEnd] = Step{Status: StepPending, Attempt: 1}
	if !tr.answer(stepEnd, 1, answerDecided) {
		t.Fatal("answer not applied")
	}
	if !tr.Commit || !tr.Overruled || tr.Cancel || tr.Steps[stepEnd].Status != StepDone {
		t.Fatalf("after ESCROW.DECIDED: %+v", tr)
	}
	_, m, ok := tr.movement(stepClaimA)
	if !ok || len(m.Legs) != 2 || m.Legs[1] != ledger.Credit(GoodsAccount(501, Sword), 1) {
		t.Fatalf("claim a %+v, want the sword B offered", m)
	}
}
