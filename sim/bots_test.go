package sim_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone/zonetest"
)

func noToken(account.ID) (string, error) { return "", errors.New("no tokens here") }

// A bot's plan is a pure function of the seed and its account, every
// prefix of a longer plan is the shorter plan, and every leg ends in
// another quadrant around the centre than the one before (so it crosses
// a line through the centre), between Reach/2 and Reach out on each axis.
func TestBotPlanIsSeededAndCrossesTheCentre(t *testing.T) {
	seed := testseed.Seed(t)
	cfg := sim.BotsConfig{Gateways: []string{"ws://x"}, Token: noToken, Seed: seed, Reach: 100, RelogChance: 0.5, FirstAccount: 40}
	for bot := range 8 {
		long := sim.BotPlan(cfg, bot, 50)
		if again := sim.BotPlan(cfg, bot, 50); !equalPlans(long, again) {
			t.Fatalf("bot %d: two plans from one seed differ", bot)
		}
		short := sim.BotPlan(cfg, bot, 20)
		if !equalPlans(short, long[:len(short)]) {
			t.Fatalf("bot %d: the plan of 20 legs is not a prefix of the plan of 50", bot)
		}
		var prev *torus.Pos
		walks, relogs := 0, 0
		for i, st := range long {
			switch st.Kind {
			case sim.StepRelog:
				relogs++
				if i == 0 || long[i-1].Kind != sim.StepWalk || i == len(long)-1 {
					t.Fatalf("bot %d: a relog at step %d is not between two walks", bot, i)
				}
				continue
			case sim.StepWalk:
				walks++
			default:
				t.Fatalf("bot %d: step %d of kind %d", bot, i, st.Kind)
			}
			for _, v := range []float64{st.To.X, st.To.Y} {
				if a := max(v, -v); a < 50 || a > 100 {
					t.Fatalf("bot %d: waypoint %v is not between Reach/2 and Reach on each axis", bot, st.To)
				}
			}
			if prev != nil && (prev.X > 0) == (st.To.X > 0) && (prev.Y > 0) == (st.To.Y > 0) {
				t.Fatalf("bot %d: leg to %v stays in the quadrant of %v", bot, st.To, *prev)
			}
			prev = &st.To
		}
		if walks != 50 || relogs == 0 || relogs == 49 {
			t.Fatalf("bot %d: %d walks and %d relogs at chance 0.5", bot, walks, relogs)
		}
	}
	other := cfg
	other.Seed++
	if equalPlans(sim.BotPlan(cfg, 0, 10), sim.BotPlan(other, 0, 10)) {
		t.Fatal("two seeds made one plan")
	}
}

// Shops and trades join a plan without changing its walks and relogs;
// the two bots of a pair trade after the same legs, each at its side of
// one meeting point on a line through the centre, 2 m across it, the
// pairs' meetings alternating between the two lines; a last bot without
// a partner never trades.
func TestBotPlanShopsAndTradesInPairs(t *testing.T) {
	seed := testseed.Seed(t)
	base := sim.BotsConfig{Gateways: []string{"ws://x"}, Token: noToken, Seed: seed, Reach: 100, RelogChance: 0.5, Count: 5}
	cfg := base
	cfg.ShopChance, cfg.TradeChance = 0.5, 0.5
	const legs = 40
	walksOf := func(plan []sim.BotStep) []sim.BotStep {
		var out []sim.BotStep
		for _, st := range plan {
			if st.Kind == sim.StepWalk || st.Kind == sim.StepRelog {
				out = append(out, st)
			}
		}
		return out
	}
	// tradesOf returns the trade of each leg (Kind 0: none).
	tradesOf := func(plan []sim.BotStep) []sim.BotStep {
		var out []sim.BotStep
		for _, st := range plan {
			switch st.Kind {
			case sim.StepWalk:
				out = append(out, sim.BotStep{})
			case sim.StepTrade:
				out[len(out)-1] = st
			}
		}
		return out
	}
	for bot := range cfg.Count {
		plan := sim.BotPlan(cfg, bot, legs)
		if !equalPlans(walksOf(plan), sim.BotPlan(base, bot, legs)) {
			t.Fatalf("bot %d: shops and trades changed the walks and relogs", bot)
		}
		if short := sim.BotPlan(cfg, bot, 10); !equalPlans(short, plan[:len(short)]) {
			t.Fatalf("bot %d: the plan of 10 legs is not a prefix of the plan of %d", bot, legs)
		}
		shops := 0
		for i, st := range plan {
			switch st.Kind {
			case sim.StepShop:
				shops++
				if prev := plan[i-1].Kind; prev != sim.StepWalk {
					t.Fatalf("bot %d: a shop after a step of kind %d", bot, prev)
				}
			case sim.StepTrade:
				if prev := plan[i-1].Kind; prev != sim.StepWalk && prev != sim.StepShop {
					t.Fatalf("bot %d: a trade after a step of kind %d", bot, prev)
				}
			}
		}
		if shops == 0 || shops == legs {
			t.Errorf("bot %d: %d shops in %d legs at chance 0.5", bot, shops, legs)
		}
	}
	for pair := 0; pair < 2; pair++ {
		a, b := tradesOf(sim.BotPlan(cfg, 2*pair, legs)), tradesOf(sim.BotPlan(cfg, 2*pair+1, legs))
		n := 0
		for leg := range a {
			x, y := a[leg], b[leg]
			if (x.Kind == sim.StepTrade) != (y.Kind == sim.StepTrade) {
				t.Fatalf("pair %d, leg %d: one bot trades, the other not", pair, leg)
			}
			if x.Kind != sim.StepTrade {
				continue
			}
			if x.Partner != 2*pair+1 || y.Partner != 2*pair || x.To != y.PartnerAt || y.To != x.PartnerAt || x.Coins != y.Coins || x.Coins < 1 || x.Coins > 5 {
				t.Fatalf("pair %d, leg %d: trades %+v and %+v do not meet", pair, leg, x, y)
			}
			// On the line y = 0 for pair + n even, x = 0 otherwise, 2 m
			// either side, along it between Reach/2 and Reach.
			along, across, other := x.To.X, x.To.Y, x.PartnerAt.Y
			if (pair+n)%2 == 1 {
				along, across, other = x.To.Y, x.To.X, x.PartnerAt.X
			}
			if across != -2 || other != 2 || max(along, -along) < 50 || max(along, -along) > 100 {
				t.Fatalf("pair %d, trade %d: %+v is not across the line its turn gives", pair, n, x)
			}
			n++
		}
		if n == 0 || n == legs {
			t.Errorf("pair %d: %d trades in %d legs at chance 0.5", pair, n, legs)
		}
	}
	for _, st := range sim.BotPlan(cfg, 4, legs) {
		if st.Kind == sim.StepTrade {
			t.Fatal("the fifth of five bots, with no partner, trades")
		}
	}
}

func equalPlans(a, b []sim.BotStep) bool {
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

func TestBotsConfigValidateNamesTheField(t *testing.T) {
	ok := sim.BotsConfig{Gateways: []string{"ws://127.0.0.1:1/ws"}, Token: noToken}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	cases := []struct {
		field string
		edit  func(*sim.BotsConfig)
	}{
		{"BotsConfig.Gateways", func(c *sim.BotsConfig) { c.Gateways = nil }},
		{"BotsConfig.Gateways", func(c *sim.BotsConfig) { c.Gateways = []string{"http://x"} }},
		{"BotsConfig.Token", func(c *sim.BotsConfig) { c.Token = nil }},
		{"BotsConfig.Count", func(c *sim.BotsConfig) { c.Count = -1 }},
		{"BotsConfig.Count", func(c *sim.BotsConfig) { c.FirstAccount, c.Count = ^account.ID(0), 2 }},
		{"BotsConfig.Legs", func(c *sim.BotsConfig) { c.Legs = -1 }},
		{"BotsConfig.Reach", func(c *sim.BotsConfig) { c.Reach = -5 }},
		{"BotsConfig.RelogChance", func(c *sim.BotsConfig) { c.RelogChance = 1.5 }},
		{"BotsConfig.LegTimeout", func(c *sim.BotsConfig) { c.LegTimeout = -time.Second }},
		{"BotsConfig.PingEvery", func(c *sim.BotsConfig) { c.PingEvery = -time.Second }},
		{"BotsConfig.ShopChance", func(c *sim.BotsConfig) { c.ShopChance = -0.1 }},
		{"BotsConfig.ShopWait", func(c *sim.BotsConfig) { c.ShopWait = -time.Second }},
		{"BotsConfig.TradeChance", func(c *sim.BotsConfig) { c.TradeChance = 1.5 }},
		{"BotsConfig.TradeWait", func(c *sim.BotsConfig) { c.TradeWait = -time.Second }},
	}
	for _, c := range cases {
		cfg := ok
		c.edit(&cfg)
		var ce *errcode.ConfigError
		if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: error %v", c.field, err)
		}
	}
}

// Bots against two nodes with a gateway each: every bot logs in (round
// robin), walks legs that cross the border between the nodes' regions
// (handed over, with no blink and one socket), has every input applied,
// and logs out and back in on the other node, where its player resumes
// where it left.
func TestBotsPlayAcrossTwoNodes(t *testing.T) {
	t.Parallel()
	seed := testseed.Seed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Homes within 20 m of the origin, where zone-0's rows meet zone-1's.
	pc := startPlayCluster(t, 2, game.Config{Seed: seed, NoBots: true, Players: 12, Area: 40})
	const bots, legs = 4, 3
	start := time.Now()
	st, err := sim.RunBots(ctx, sim.BotsConfig{
		Gateways: pc.URLs, Token: pc.Token, Count: bots, Seed: seed, Legs: legs,
		Reach: 70, RelogChance: 1, RelogPause: 300 * time.Millisecond, LegTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bots in %v: %+v", bots, time.Since(start).Round(time.Millisecond), st)
	relogs := bots * (legs - 1)
	if st.Bots != bots || st.Done != bots || st.Logins != bots+relogs || st.Relogs != relogs || st.LoginFailures != 0 || st.Reconnects != 0 {
		t.Errorf("logins: %+v, want %d bots with %d logins and %d relogs, none failed", st, bots, bots+relogs, relogs)
	}
	if st.Legs != bots*legs || st.LegTimeouts != 0 {
		t.Errorf("legs: %d arrived, %d timed out, want %d arrived", st.Legs, st.LegTimeouts, bots*legs)
	}
	if st.Resumed != relogs || st.ResumeMisses != 0 {
		t.Errorf("relogs: %d resumed where they left, %d did not, want %d", st.Resumed, st.ResumeMisses, relogs)
	}
	if st.Blinks != 0 || st.Leaks != 0 || st.OutOfOrder != 0 || st.ErrorCount() != 0 || len(st.Closes) != 0 {
		t.Errorf("the clients saw blinks %d, owner-only leaks %d, out of order %d, errors %v, closes %v", st.Blinks, st.Leaks, st.OutOfOrder, st.Errors, st.Closes)
	}
	if st.Batches == 0 || st.Bytes == 0 || st.Inputs < bots*legs {
		t.Errorf("batches %d, bytes %d, inputs %d", st.Batches, st.Bytes, st.Inputs)
	}
	// Every input is applied once, by whichever node simulated the master.
	var ps = pc.PlayerStats()
	if !zonetest.Poll(10*time.Second, func() bool { ps = pc.PlayerStats(); return ps.Inputs == st.Inputs && ps.Removed == bots+relogs }) {
		t.Errorf("the nodes applied %d inputs and removed %d players, want %d and %d: %+v", ps.Inputs, ps.Removed, st.Inputs, bots+relogs, ps)
	}
	if ps.StaleSession != 0 || ps.SaveErrors != 0 {
		t.Errorf("player stats %+v", ps)
	}
	if h := pc.HandoffStats(); h.Acked == 0 || h.Aborted != 0 {
		t.Errorf("handoffs %+v: want the bots' masters handed over the border", h)
	}
}

// TradeFirst moves only a first leg's trade before its walk, and marks it
// Near (the pair may meet where it stands): the steps are otherwise the
// plan without it, in the same order.
func TestBotPlanTradeFirst(t *testing.T) {
	seed := testseed.Seed(t)
	cfg := sim.BotsConfig{Gateways: []string{"ws://x"}, Token: noToken, Seed: seed, Reach: 100, Count: 4, TradeChance: 1, ShopChance: 0.5}
	first := cfg
	first.TradeFirst = true
	for bot := range cfg.Count {
		plan, moved := sim.BotPlan(cfg, bot, 6), sim.BotPlan(first, bot, 6)
		if moved[0].Kind != sim.StepTrade || !moved[0].Near {
			t.Fatalf("bot %d: the plan starts with a step of kind %d (near %v), want the near trade", bot, moved[0].Kind, moved[0].Near)
		}
		if slices.ContainsFunc(plan, func(s sim.BotStep) bool { return s.Near }) {
			t.Fatalf("bot %d: a plan without TradeFirst has a near trade", bot)
		}
		i := slices.IndexFunc(plan, func(s sim.BotStep) bool { return s.Kind == sim.StepTrade })
		want := slices.Concat([]sim.BotStep{plan[i]}, plan[:i], plan[i+1:])
		want[0].Near = true
		if !equalPlans(moved, want) {
			t.Fatalf("bot %d: TradeFirst changed more than the first trade's place", bot)
		}
	}
}
