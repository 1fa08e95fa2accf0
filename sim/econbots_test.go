package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// Bots that shop and trade on two nodes with a real economy (two economy
// nodes over one SQLite ledger), in two crowds at once: one around a
// corner of four regions inside zone-0, one around the origin, where the
// line y = 0 is the border between the nodes. They buy from the dens'
// keepers; the pairs meet on the lines through their centre and trade,
// each side reading the outcome from its own purse; a trade commits
// across the nodes' border; no input is refused; the books balance.
func TestBotsShopAndTradeAcrossTheBorder(t *testing.T) {
	t.Parallel()
	seed := testseed.Seed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	eco := startEconomy(t)
	// Homes within 20 m of the origin; a den in one column of ten, each
	// keeping one mob.
	gc := game.Config{Seed: seed, NoBots: true, Players: 12, Area: 40, DenChance: 0.1, DenCapacity: 1,
		Economy: game.EconomyConfig{Ledger: eco.router}}
	pc := startPlayClusterWith(t, 2, gc, func(cfg *zonetest.Config) { cfg.Etcd = eco.etcd })
	games := make([]*game.Game, len(pc.Nodes))
	for i, n := range pc.Nodes {
		games[i] = n.Module.(*game.Game)
		t.Cleanup(func() { _ = games[i].Close() })
	}
	table := pc.Node("zone-0").Runtime.Table()
	inland := torus.Pos{Y: 2048}
	for _, d := range []torus.Pos{{X: 300, Y: 300}, {X: -300, Y: -300}, {X: 300, Y: -300}, {X: -300, Y: 300}} {
		if table.OwnerOf(inland) != table.OwnerOf(torus.Pos{X: inland.X + d.X, Y: inland.Y + d.Y}) {
			t.Fatalf("the table splits the rows around %v", inland)
		}
	}
	if table.OwnerOf(torus.Pos{X: 1, Y: -1}) == table.OwnerOf(torus.Pos{X: 1, Y: 1}) {
		t.Fatal("y = 0 is not the nodes' border")
	}

	// The inland crowd (accounts 1–4) starts there: a player comes back
	// where it left. The border crowd (5–10) starts around the origin;
	// its pairs 0 and 2 meet on y = 0 first, pair 1 on x = 0 (BotPlan).
	type crowd struct {
		name        string
		first       account.ID
		count, legs int
		centre      torus.Pos
	}
	crowds := []crowd{{"inland", 1, 4, 1, inland}, {"border", 5, 6, 1, torus.Pos{}}}
	for i := range crowds[0].count {
		pc.w.save(account.ID(1+i), torus.Pos{X: float64(i%2)*20 - 10, Y: inland.Y + float64(i/2)*20 - 10})
	}
	var cfgs []sim.BotsConfig
	for _, c := range crowds {
		for a := c.first; a < c.first+account.ID(c.count); a++ {
			eco.grant(t, a, 0, 200) // enough for three swords and a trade: no bot skips one
			eco.grant(t, a, game.Apple, 3)
		}
		cfgs = append(cfgs, sim.BotsConfig{
			Gateways: pc.URLs, Token: pc.Token, Count: c.count, FirstAccount: c.first, Seed: seed, Legs: c.legs,
			Centre: c.centre, Reach: 40, RelogChance: -1, LegTimeout: 20 * time.Second,
			ShopChance: 1, ShopWait: 2 * time.Second, TradeChance: 1, TradeWait: 15 * time.Second,
		})
	}
	stats, errs := make([]sim.BotStats, len(cfgs)), make([]error, len(cfgs))
	done := make(chan struct{}, len(cfgs))
	start := time.Now()
	for i, cfg := range cfgs {
		go func() {
			defer func() { done <- struct{}{} }()
			stats[i], errs[i] = sim.RunBots(ctx, cfg)
		}()
	}
	for range cfgs {
		<-done
	}
	t.Logf("the crowds played in %v", time.Since(start).Round(time.Millisecond))
	for i, c := range crowds {
		if errs[i] != nil {
			t.Fatalf("%s crowd: %v", c.name, errs[i])
		}
		st := stats[i]
		t.Logf("%s crowd: %+v", c.name, st)
		if st.ErrorCount() != 0 || st.Purses != c.count {
			t.Errorf("%s crowd: errors %v; %d purses seen, want %d", c.name, st.Errors, st.Purses, c.count)
		}
	}
	// The inland crowd never leaves the node that logged it in. (A
	// master handed over to another node cannot buy yet: the game's buy
	// looks its account up in an index only the login node keeps.)
	if st := stats[0]; st.Purchases == 0 {
		t.Errorf("inland: no purchase: %d refused, %d trips missed", st.PurchasesRefused, st.ShopMisses)
	}
	across := 0
	st := stats[1]
	for _, m := range st.TradeLog {
		if table.OwnerOf(m.At) != table.OwnerOf(m.PartnerAt) {
			across++
		}
	}
	if across == 0 {
		t.Errorf("border: %d trades committed, %d across the border (log %+v); cancelled %d, timed out %d, skipped %d",
			st.TradesCommitted, across, st.TradeLog, st.TradesCancelled, st.TradeTimeouts, st.TradeSkips)
	}
	var committed int
	for i, n := range pc.Nodes {
		ch := make(chan game.EconomyStats, 1)
		n.Runtime.Post(func() { ch <- games[i].EconomyStats() })
		es := <-ch
		t.Logf("%s: economy %+v", n.Name, es)
		committed += es.Committed
		if es.Failed != 0 {
			t.Errorf("%s: %d movements refused as malformed", n.Name, es.Failed)
		}
	}
	if committed == 0 {
		t.Error("the nodes committed no trade")
	}

	for _, n := range eco.nodes {
		if _, err := n.SettleAll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := econ.Audit(ctx, eco.store)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems(true) {
		t.Errorf("audit: %s", p)
	}
}
