package game

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
	"github.com/shardwise/shardwise/netting/sqlstore/sqlitetest"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// econWorld is the real economy of a test: an embedded etcd (which the
// zone nodes share, under their own prefix), one SQLite store, economy
// nodes registered in etcd, and a NodeRouter over them. Everything is
// closed at cleanup.
type econWorld struct {
	t      *testing.T
	etcd   *coord.Embedded
	store  *sqlstore.Store
	nodes  []*econ.Node
	router *NodeRouter
	funded int
}

func testLog() *slog.Logger {
	if os.Getenv("SHARDWISE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}

func startEconWorld(t *testing.T, nodes int) *econWorld {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{
		DataDir: t.TempDir(), Heartbeat: 50 * time.Millisecond, Election: 500 * time.Millisecond, UnsafeNoFsync: true,
	})
	if err != nil {
		t.Fatalf("embedded etcd: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	st, _ := sqlitetest.Open(t, "econ.db")
	w := &econWorld{t: t, etcd: e, store: st}
	prefix := fmt.Sprintf("/game-econ/%s/", strings.ReplaceAll(t.Name(), "/", "_"))
	names := make([]string, nodes)
	for i := range nodes {
		names[i] = fmt.Sprintf("econ-%d", i)
		cl, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: e.Endpoints(), Prefix: prefix, Logger: testLog(), DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("coord: %v", err)
		}
		t.Cleanup(func() { _ = cl.Close() })
		n, err := econ.Start(ctx, econ.Config{Name: names[i], Coord: cl, Store: st, TTL: 2 * time.Second, Logger: testLog(),
			EpochMaxAge: 10 * time.Minute, ReadyWait: time.Second})
		if err != nil {
			t.Fatalf("econ.Start: %v", err)
		}
		t.Cleanup(func() { _ = n.Close() })
		w.nodes = append(w.nodes, n)
	}
	w.waitReady(names, w.nodes...)
	w.router = NewNodeRouter(w.nodes...)
	return w
}

// waitReady waits until nodes are ready with the view names.
func (w *econWorld) waitReady(names []string, nodes ...*econ.Node) {
	w.t.Helper()
	want := strings.Join(names, ",")
	if !zonetest.Poll(20*time.Second, func() bool {
		for _, n := range nodes {
			if st := n.Status(); !st.Ready || strings.Join(st.View, ",") != want {
				return false
			}
		}
		return true
	}) {
		w.t.Fatalf("economy nodes never ready with view %s", want)
	}
}

// economy is the game's economy configuration for the test: the router,
// and deadlines short enough for a test to see an offer sent again. A
// ResubmitAfter below the nodes' commit timeout is safe here only because
// no epoch rotates during a test (EpochMaxAge is 10 minutes, and no scope
// sees 512 movements) and a view change lets every Record in flight
// return before the new view records.
func (w *econWorld) economy() EconomyConfig {
	return EconomyConfig{Ledger: w.router, AttemptTimeout: 2 * time.Second, CallDeadline: 3 * time.Second, ResubmitAfter: 5 * time.Second}
}

// fund gives a some of an asset (coins: noGood), in the player's scope, as
// a platform grant.
func (w *econWorld) fund(a account.ID, g Good, n int64) {
	w.t.Helper()
	w.funded++
	from := "platform:test:grant"
	if g != noGood {
		from = ShopGoodsAccount(g)
	}
	m := netting.Movement{Key: fmt.Sprintf("grant:%d:%d", a, w.funded), Legs: []ledger.Leg{ledger.Debit(from, n), ledger.Credit(walletAccount(a, g), n)}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := w.router.Record(ctx, PlayerScope(a), m)
	if err != nil || out.Status != netting.Accepted {
		w.t.Fatalf("grant %v: %+v %v", m, out, err)
	}
}

// holdings reads an account's spendable amount.
func (w *econWorld) holdings(accounts ...string) []int64 {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := w.router.Holdings(ctx, accounts)
	if err != nil {
		w.t.Fatal(err)
	}
	return h
}

// settle settles every session: first those of nodes no longer running
// (their orphans, which the sweep would settle after its bound), then the
// running nodes' own, so that every scope's sessions settle in the order
// they were written. It fails the test on a movement refused at settle.
func (w *econWorld) settle() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var live []*econ.Node
	for _, n := range w.nodes {
		if !n.Status().Closed {
			live = append(live, n)
		}
	}
	uns, err := w.store.ListUnsettled(ctx, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	var reps []netting.SettleReport
	for _, u := range uns {
		dead := true
		for _, n := range live {
			if n.Name() == u.NodeID {
				dead = false
			}
		}
		if dead {
			rep, err := live[0].Recover(ctx, u.ID)
			if err != nil {
				w.t.Fatalf("recover %s: %v", u.ID, err)
			}
			reps = append(reps, rep)
		}
	}
	for _, n := range live {
		r, err := n.SettleAll(ctx)
		if err != nil {
			w.t.Fatalf("settle %s: %v", n.Name(), err)
		}
		reps = append(reps, r...)
	}
	for _, r := range reps {
		if len(r.Rejected) > 0 {
			w.t.Errorf("session %s refused accepted movements at settle: %+v", r.SessionID, r.Rejected)
		}
	}
}

// audit settles and checks the money: econ's audit (sums zero, no wallet
// below zero, nothing pending or unsettled), every asset conserved on its
// own, and every trade account back at zero. It returns the balances.
func (w *econWorld) audit() map[string]int64 {
	w.t.Helper()
	w.settle()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := econ.Audit(ctx, w.store)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, p := range rep.Problems(true) {
		w.t.Errorf("audit: %s", p)
	}
	bal, err := w.store.Balances(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	perAsset := map[string]int64{}
	for acct, b := range bal {
		perAsset[assetOf(acct)] += b
		if strings.HasPrefix(acct, "platform:trade:") && b != 0 {
			w.t.Errorf("trade account %s holds %d after every trade ended", acct, b)
		}
	}
	for asset, sum := range perAsset {
		if sum != 0 {
			w.t.Errorf("%s not conserved: the accounts sum to %d", asset, sum)
		}
	}
	return bal
}

// assetOf names the asset an account of the game holds: coins, or
// good:<n>.
func assetOf(acct string) string {
	if i := strings.LastIndex(acct, ":good:"); i >= 0 {
		return acct[i+1:]
	}
	return "coins"
}

// econNodes runs the reference game on two zone nodes with the economy:
// an 8 km torus in 2 km regions, zone-0 owning the rows y < 4096, so that
// y = 4096 is a border between them.
func econNodes(t *testing.T, w *econWorld, cfg Config) (*zonetest.Cluster, *Game, *Game) {
	t.Helper()
	grid := cells.GridConfig{RegionEdge: 2048}
	grid.World.Width, grid.World.Height = 8192, 8192
	cfg.Torus, cfg.RegionEdge = grid.World, 2048
	cfg.NoBots = true
	if cfg.Economy.Ledger == nil {
		cfg.Economy = w.economy()
	}
	c := zonetest.Start(t, zonetest.Config{
		Nodes: 2, Grid: grid, Memory: true,
		Module: func(int, string) (zone.Module, error) { return NewModule(cfg) },
	})
	a, b := c.Nodes[0].Module.(*Game), c.Nodes[1].Module.(*Game)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return c, a, b
}

// client spawns a client-driven player (it walks and attacks only when
// told) of account a at p, before a tick.
func (g *Game) client(t *testing.T, a account.ID, p torus.Pos) ecs.ID {
	t.Helper()
	m, err := g.r.NewID()
	if err != nil {
		t.Fatal(err)
	}
	pet, err := g.r.NewID()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.createPlayer(a, m, pet, p, newPlayerState(), true); err != nil {
		t.Fatal(err)
	}
	g.r.SetViewer(a, m)
	return m
}

// input applies a client input to the master before the next tick, as
// the gateway's would be (checked first).
func (g *Game) input(t *testing.T, master ecs.ID, in gateway.Input) {
	t.Helper()
	if err := checkInput(in); err != nil {
		t.Fatalf("input %+v refused: %v", in, err)
	}
	g.r.Post(func() { g.applyInput(master, in) })
}

func offerInput(partner ecs.ID, coins int64, good Good, count int64) gateway.Input {
	return gateway.Input{Kind: InputTradeOffer, Target: uint64(partner), HasPoint: true,
		Point: torus.Pos{X: float64(coins), Y: float64(int64(good) + 256*count)}}
}

// stepUntil steps the cluster, in pace with the economy (stepPaced), until
// cond holds, failing after limit.
func stepUntil(t *testing.T, c *zonetest.Cluster, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		stepPaced(t, c, 1)
	}
}

// holdsCalls marks a test's economy that holds calls on purpose (a gate,
// a node that dies with the call out): stepPaced does not wait for it.
type holdsCalls interface{ holdsCalls() }

// stepPaced steps the cluster n ticks, each only once every call the
// games' workers had out to the economy has been answered (its answer is
// applied at the tick). The tests step as fast as they can while the
// economy answers in wall time, so without this a trade's age and
// timeouts, counted in ticks, would run out on a slow machine before an
// answer came (issue 28: a trade expired at 400 ticks with its offers
// still out). Each call ends within its CallDeadline, so the wait is
// bounded; a game whose economy holds calls (holdsCalls) or whose
// workers are closed is not waited for.
func stepPaced(t *testing.T, c *zonetest.Cluster, n int) {
	t.Helper()
	for range n {
		var waits []*econPool
		for _, node := range c.Nodes {
			g, ok := node.Module.(*Game)
			if !ok || g.econ.pool == nil {
				continue
			}
			if _, held := g.cfg.Economy.Ledger.(holdsCalls); held {
				continue
			}
			waits = append(waits, g.econ.pool)
		}
		const limit = time.Minute
		if !zonetest.Poll(limit, func() bool {
			for _, p := range waits {
				p.mu.Lock()
				closed := p.closed
				p.mu.Unlock()
				if !closed && p.out.Load() > 0 {
					return false
				}
			}
			return true
		}) {
			t.Fatalf("the economy did not answer the games' calls within %v", limit)
		}
		c.StepSync(1)
	}
}

// quiet reports whether neither game has a movement waiting or a trade
// open.
func quiet(games ...*Game) bool {
	for _, g := range games {
		if g.OpenTrades() > 0 || len(g.econ.backlog) > 0 || len(g.econ.inflight) > 0 || len(g.econ.reading) > 0 {
			return false
		}
		s := g.EconomyStats()
		if s.Submitted != s.Accepted+s.Rejected+s.Unknown+s.Failed {
			return false
		}
	}
	return true
}

// ---- pure parts ----

// Every movement the game builds balances asset by asset, so conserving
// the ledger's sum conserves each asset.
func TestMovementsBalancePerAsset(t *testing.T) {
	check := func(name string, m netting.Movement) {
		t.Helper()
		if err := ledger.ValidateLegs(m.Legs); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sums := map[string]int64{}
		for _, l := range m.Legs {
			sums[assetOf(l.Account)] += l.Amount
		}
		for asset, s := range sums {
			if s != 0 {
				t.Fatalf("%s: %s legs sum to %d: %+v", name, asset, s, m.Legs)
			}
		}
	}
	check("loot", lootMovement(77, 5, 10))
	check("buy", buyMovement("buy:1", 5, Sword, 3))
	for _, commit := range []bool{true, false} {
		for _, refusedB := range []bool{false, true} {
			tr := Trade{ID: 9, A: TradeSide{Account: 1, Offer: Offer{Coins: 30, Good: Apple, Count: 2}, Offered: true},
				B: TradeSide{Account: 2, Offer: Offer{Coins: 4, Good: Sword, Count: 1}, Offered: true}, Commit: commit}
			tr.Steps[stepOfferA].Status = StepDone
			tr.Steps[stepOfferB].Status = StepDone
			if refusedB {
				tr.Steps[stepOfferB].Status = StepRefused
			}
			for s := range numSteps {
				if _, m, ok := tr.movement(s); ok {
					check(fmt.Sprintf("commit %v refused b %v %s", commit, refusedB, stepNames[s]), m)
				}
			}
		}
	}
}

// A trade's movements, posted in any order (as sessions of different
// scopes may settle), end with every trade account at zero, no wallet
// below zero, and each player holding what the decision says: the other's
// offer on a commit, its own reserved offer back on a cancel.
func TestTradeMovementsInAnyOrder(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		commit               bool
		reservedA, reservedB bool
	}{
		{"commit", true, true, true},
		{"cancel", false, true, true},
		{"cancel with b refused", false, true, false},
		{"cancel with nothing reserved", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := Trade{ID: 4, Commit: tc.commit,
				A: TradeSide{Account: 1, Offer: Offer{Coins: 30}, Offered: true},
				B: TradeSide{Account: 2, Offer: Offer{Good: Sword, Count: 2}, Offered: true}}
			if tc.reservedA {
				tr.Steps[stepOfferA].Status = StepDone
			}
			if tc.reservedB {
				tr.Steps[stepOfferB].Status = StepDone
			}
			var ms []netting.Movement
			for _, s := range []tradeStep{stepOfferA, stepOfferB, stepEnd, stepClaimA, stepClaimB} {
				if (s == stepOfferA && !tc.reservedA) || (s == stepOfferB && !tc.reservedB) {
					continue
				}
				if _, m, ok := tr.movement(s); ok {
					ms = append(ms, m)
				}
			}
			// Every order of the trade's movements; the wallets' own
			// funding comes first, as the per-player scope ensures.
			perm(len(ms), func(order []int) {
				b := ledger.NewBook()
				fund := []ledger.Leg{ledger.Debit("platform:grant", 100), ledger.Credit(CoinsAccount(1), 100),
					ledger.Debit(ShopGoodsAccount(Sword), 5), ledger.Credit(GoodsAccount(2, Sword), 5)}
				if _, err := b.Post(ledger.Posting{ID: "fund", Legs: fund}); err != nil {
					t.Fatal(err)
				}
				for _, i := range order {
					if _, err := b.Post(ledger.Posting{ID: ms[i].Key, Legs: ms[i].Legs}); err != nil {
						t.Fatalf("order %v: %s refused: %v", order, ms[i].Key, err)
					}
				}
				want := map[string]int64{CoinsAccount(1): 100, GoodsAccount(2, Sword): 5}
				if tc.commit {
					want = map[string]int64{CoinsAccount(1): 70, CoinsAccount(2): 30, GoodsAccount(2, Sword): 3, GoodsAccount(1, Sword): 2}
				}
				for acct, bal := range b.Balances() {
					switch {
					case strings.HasPrefix(acct, "platform:trade:") && bal != 0:
						t.Fatalf("order %v: %s ends at %d", order, acct, bal)
					case ledger.IsWallet(acct) && bal != want[acct]:
						t.Fatalf("order %v: %s ends at %d, want %d", order, acct, bal, want[acct])
					}
				}
			})
		})
	}
}

// perm calls fn with every permutation of 0..n-1.
func perm(n int, fn func([]int)) {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			fn(p)
			return
		}
		for i := k; i < n; i++ {
			p[k], p[i] = p[i], p[k]
			rec(k + 1)
			p[k], p[i] = p[i], p[k]
		}
	}
	rec(0)
}

func TestEconomyInputsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		in gateway.Input
		ok bool
	}{
		{gateway.Input{Kind: InputBuy, Target: uint64(Sword) | 3<<8}, true},
		{gateway.Input{Kind: InputBuy, Target: uint64(Sword)}, false},                 // no count
		{gateway.Input{Kind: InputBuy, Target: 9 | 1<<8}, false},                      // no such good
		{gateway.Input{Kind: InputBuy, Target: uint64(Apple) | (MaxBuy+1)<<8}, false}, // too many
		{offerInput(5, 10, Apple, 2), true},
		{offerInput(5, 0, noGood, 0), true},                                                                    // a gift taken
		{gateway.Input{Kind: InputTradeOffer, Target: 5}, false},                                               // no point
		{gateway.Input{Kind: InputTradeOffer, Target: 5, HasPoint: true, Point: torus.Pos{X: 1.5}}, false},     // not whole
		{gateway.Input{Kind: InputTradeOffer, Target: 5, HasPoint: true, Point: torus.Pos{X: -1}}, false},      // negative
		{gateway.Input{Kind: InputTradeOffer, Target: 5, HasPoint: true, Point: torus.Pos{Y: 9 + 256}}, false}, // no such good
		{gateway.Input{Kind: InputTradeOffer, Target: 5, HasPoint: true, Point: torus.Pos{Y: 2}}, false},       // a good, no count
		{gateway.Input{Kind: InputTradeOffer, Target: 0, HasPoint: true}, false},                               // no partner
		{gateway.Input{Kind: InputTradeAccept, Target: 5}, true},
		{gateway.Input{Kind: InputTradeCancel}, false},
	} {
		if err := checkInput(tc.in); (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}

func TestTradesCodecAndRequests(t *testing.T) {
	in := Trades{List: []Trade{{ID: 7, Decides: true, Phase: TradeCancelling, Cancel: true, Reason: CancelRange,
		A: TradeSide{Master: 3, Account: 1, Offer: Offer{Coins: 5}, Offered: true},
		B: TradeSide{Master: 9, Account: 2, Offer: Offer{Good: Potion, Count: 4}, Offered: true, Accepted: true}}}}
	in.List[0].Steps[stepOfferA] = Step{Status: StepPending, Attempt: 2, Waited: 7}
	b := tradesCodec.Append(nil, &in)
	out, err := tradesCodec.Decode(b)
	if err != nil || len(out.List) != 1 || out.List[0] != in.List[0] {
		t.Fatalf("round trip: %+v %v", out, err)
	}
	if _, err := tradesCodec.Decode(b[:len(b)-1]); err == nil {
		t.Fatal("a short encoding decoded")
	}
	op, a, o, err := decodeRequest(encodeRequest(opOffer, 42, Offer{Coins: 3, Good: Sword, Count: 1}))
	if err != nil || op != opOffer || a != 42 || o != (Offer{Coins: 3, Good: Sword, Count: 1}) {
		t.Fatalf("request round trip: %d %d %+v %v", op, a, o, err)
	}
	for _, bad := range [][]byte{nil, {9, 1, 0, 0, 0}, {opOffer, 0, 0, 0, 0}, {opOffer, 1, 0, 2, 0}, {opOffer, 1, 0, 0, 0, 0}} {
		if _, _, _, err := decodeRequest(bad); err == nil {
			t.Errorf("request %v decoded", bad)
		}
	}
}

func TestEconomyConfigIsValidated(t *testing.T) {
	for _, c := range []EconomyConfig{
		{Workers: -1},
		{CallDeadline: time.Second, ResubmitAfter: time.Second},
		{RetryMin: time.Second, RetryMax: time.Millisecond},
		{TradeRange: -1},
		{LootCoins: -5},
		{TradeTimeout: -time.Second},
	} {
		cfg := Config{Economy: c}.WithDefaults()
		if err := cfg.Validate(); err == nil {
			t.Errorf("%+v validated", c)
		}
	}
	if err := (Config{}).WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
}
