package sim_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
	"github.com/shardwise/shardwise/proto/clientpb"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// economy is a real economy cluster for a sim test: an embedded etcd (the
// zone nodes use it too), a SQLite ledger and two economy nodes.
type economy struct {
	etcd   *coord.Embedded
	store  *sqlstore.Store
	nodes  []*econ.Node
	router *game.NodeRouter
}

func startEconomy(t *testing.T) *economy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{DataDir: t.TempDir(), Heartbeat: 50 * time.Millisecond, Election: 500 * time.Millisecond, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "econ.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	eco := &economy{etcd: e, store: st}
	for i := range 2 {
		cl, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: e.Endpoints(), Prefix: "/sim-econ/", DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.Close() })
		n, err := econ.Start(ctx, econ.Config{Name: fmt.Sprintf("econ-%d", i), Coord: cl, Store: st, TTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		eco.nodes = append(eco.nodes, n)
	}
	if !zonetest.Poll(20*time.Second, func() bool {
		for _, n := range eco.nodes {
			if st := n.Status(); !st.Ready || len(st.View) != 2 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the economy nodes never formed")
	}
	eco.router = game.NewNodeRouter(eco.nodes...)
	return eco
}

// grant gives account a n of an asset (coins for good 0) in its scope.
func (e *economy) grant(t *testing.T, a account.ID, good game.Good, n int64) {
	t.Helper()
	from, to := "platform:test:grant", game.CoinsAccount(a)
	if good != 0 {
		from, to = game.ShopGoodsAccount(good), game.GoodsAccount(a, good)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := netting.Movement{Key: fmt.Sprintf("grant:%s", to), Legs: []ledger.Leg{ledger.Debit(from, n), ledger.Credit(to, n)}}
	if out, err := e.router.Record(ctx, game.PlayerScope(a), m); err != nil || out.Status != netting.Accepted {
		t.Fatalf("grant %v: %+v %v", m, out, err)
	}
}

// Two players log in on two gateways, stand on either side of the border
// between two zone nodes and trade through the client protocol: each
// client sees its own purse, and only its own, change as the offers are
// reserved and when the trade commits; the ledger agrees.
func TestTradeOverTheClientProtocol(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := newWorld(t)
	eco := startEconomy(t)
	gc := game.Config{Seed: 31, NoBots: true, DenChance: 1e-12, Economy: game.EconomyConfig{Ledger: eco.router}}
	c := w.cluster(2, gc, func(cfg *zonetest.Config) { cfg.Etcd = eco.etcd })
	for _, n := range c.Nodes {
		g := n.Module.(*game.Game)
		t.Cleanup(func() { _ = g.Close() })
	}
	table := c.Node("zone-0").Runtime.Table()
	var border float64
	for y := 0.0; ; y += 2048 {
		if table.OwnerOf(torus.Pos{X: 1000, Y: y - 1}) == "zone-0" && table.OwnerOf(torus.Pos{X: 1000, Y: y + 1}) == "zone-1" {
			border = y
			break
		}
	}
	w.save(4101, torus.Pos{X: 1000, Y: border - 1.5})
	w.save(4102, torus.Pos{X: 1000, Y: border + 1.5})
	eco.grant(t, 4101, 0, 50)
	eco.grant(t, 4102, game.Potion, 4)
	url0 := w.serve(c.Node("zone-0").Runtime, directory.NodeID(c.Node("zone-0").Number))
	url1 := w.serve(c.Node("zone-1").Runtime, directory.NodeID(c.Node("zone-1").Number))
	runSteps(t, c.Step)

	ca := login(t, ctx, url0, w.token(4101))
	cb := login(t, ctx, url1, w.token(4102))
	ma, _ := you(ca)
	mb, _ := you(cb)
	wantPurse := func(cl *sim.Client, want game.Purse, what string) {
		t.Helper()
		if err := cl.Wait(ctx, func(v *sim.View) bool {
			p, ok := v.Purse()
			p.Known = false
			return ok && p == want
		}); err != nil {
			var p game.Purse
			cl.Look(func(v *sim.View) { p, _ = v.Purse() })
			t.Fatalf("%s: purse %+v, want %+v: %v", what, p, want, err)
		}
	}
	potions := func(coins, n int64) game.Purse {
		p := game.Purse{Coins: coins}
		p.Goods[game.Potion-1] = n
		return p
	}
	wantPurse(ca, potions(50, 0), "a's purse at login")
	wantPurse(cb, potions(0, 4), "b's purse at login")
	if err := cb.Wait(ctx, func(v *sim.View) bool { _, ok := v.Position(ma); return ok }); err != nil {
		t.Fatal(err)
	}
	// A trade needs each node to hold the other's master as a simulation
	// ghost (perception by area): an offer made before that finds its
	// partner out of range. Read on each node's world goroutine.
	seesGhost := func(n *zonetest.Node, id uint64) bool {
		got := make(chan bool, 1)
		n.Runtime.Post(func() { got <- n.Runtime.Ghosts().Has(ecs.ID(id)) })
		select {
		case v := <-got:
			return v
		case <-ctx.Done():
			return false
		}
	}
	if !zonetest.Poll(20*time.Second, func() bool {
		return seesGhost(c.Node("zone-0"), mb) && seesGhost(c.Node("zone-1"), ma)
	}) {
		t.Fatal("the nodes never held each other's player as a simulation ghost")
	}

	// a gives 20 coins, b three potions.
	if _, err := ca.Input(ctx, &clientpb.Input{Entity: ma, Kind: game.InputTradeOffer, Target: mb, Point: &clientpb.Point{X: 20}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.Input(ctx, &clientpb.Input{Entity: mb, Kind: game.InputTradeOffer, Target: ma, Point: &clientpb.Point{Y: float64(game.Potion) + 256*3}}); err != nil {
		t.Fatal(err)
	}
	wantPurse(ca, potions(30, 0), "a's offer reserved")
	wantPurse(cb, potions(0, 1), "b's offer reserved")
	for _, x := range []struct {
		cl         *sim.Client
		me, target uint64
	}{{ca, ma, mb}, {cb, mb, ma}} {
		if _, err := x.cl.Input(ctx, &clientpb.Input{Entity: x.me, Kind: game.InputTradeAccept, Target: x.target}); err != nil {
			t.Fatal(err)
		}
	}
	wantPurse(ca, potions(30, 3), "a after the commit")
	wantPurse(cb, potions(20, 1), "b after the commit")
	ca.Look(func(v *sim.View) {
		if e, ok := v.Entity(mb); ok && e.Components[game.WirePurse] != nil {
			t.Error("a was sent b's purse")
		}
	})
	cb.Look(func(v *sim.View) {
		if e, ok := v.Entity(ma); ok && e.Components[game.WirePurse] != nil {
			t.Error("b was sent a's purse")
		}
		for _, e := range v.Errors() {
			t.Errorf("b's error %v", e)
		}
	})

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
