package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/sim"
)

// newBotsCmd is "shardwise bots": sim bots against a running cluster's
// gateways, with tokens issued from the login key.
func newBotsCmd() *cobra.Command {
	var (
		cfg      sim.BotsConfig
		keyFile  string
		cluster  string
		first    uint64
		duration time.Duration
		every    time.Duration
	)
	flagOf := map[string]string{
		"BotsConfig.Gateways":     "--gateways",
		"BotsConfig.Count":        "--count",
		"BotsConfig.Legs":         "--legs",
		"BotsConfig.Reach":        "--reach",
		"BotsConfig.RelogChance":  "--relog-chance",
		"BotsConfig.RelogPause":   "--relog-pause",
		"BotsConfig.FightRadius":  "--fight-radius",
		"BotsConfig.LegTimeout":   "--leg-timeout",
		"BotsConfig.FirstAccount": "--first-account",
		"BotsConfig.ShopChance":   "--shop-chance",
		"BotsConfig.TradeChance":  "--trade-chance",
		"Cluster":                 "--cluster",
	}
	cmd := &cobra.Command{
		Use:   "bots",
		Short: "Run bots that log in to a cluster's gateways and play the reference game",
		Long: "bots runs --count bots against the gateways of a running cluster (\"shardwise\n" +
			"zone --gateway\"), round robin over --gateways (ws://host:port/ws), bot i\n" +
			"playing account --first-account+i with a token it issues itself from the\n" +
			"login private key --key for --cluster, one per login. Each bot walks to\n" +
			"waypoints between --reach/2 and --reach metres from the origin, each in\n" +
			"another quadrant than the last, so that every leg crosses a region border of\n" +
			"the reference game (its players start around the origin, a corner of four\n" +
			"regions); it attacks the mobs that come near; its pet heals it (the game does);\n" +
			"bots of consecutive accounts are in a party (the game groups them); after a\n" +
			"leg, with chance --relog-chance, it logs out and back in on the next gateway\n" +
			"and checks that its player came back where it left. The schedules come\n" +
			"from --seed.\n" +
			"\n" +
			"It prints a status line every --every and, after --duration (or --legs legs\n" +
			"each, or on interrupt; every bot logs out), a summary: logins, relogs and\n" +
			"where the players resumed, reconnects, inputs, legs, attacks, heals,\n" +
			"purchases and trades (with --shop-chance and --trade-chance), batches, bytes,\n" +
			"blinks (an entity inside the view that vanished and came back at once:\n" +
			"there should be none; returns at the view's edge are counted apart),\n" +
			"owner-only leaks (another account's experience or purse sent to a bot: none),\n" +
			"errors by code and sockets the servers closed by reason. It exits with status\n" +
			"1 if a bot gave up (its logins kept failing).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if duration < 0 {
				return errcode.WithCode(errcode.Config("--duration", duration, "must not be negative (0: until interrupted or --legs done)"))
			}
			if every <= 0 {
				return errcode.WithCode(errcode.Config("--every", every, "must be positive"))
			}
			if cfg.Count < 1 { // 0 would be BotsConfig's default
				return errcode.WithCode(errcode.Config("--count", cfg.Count, "must be at least 1"))
			}
			// BotsConfig reads 0 as "the default": a 0 typed here is
			// refused, or means what the flag's help says.
			switch {
			case cfg.Reach == 0:
				return errcode.WithCode(errcode.Config("--reach", cfg.Reach, "must be a positive number of metres"))
			case cfg.FightRadius == 0:
				return errcode.WithCode(errcode.Config("--fight-radius", cfg.FightRadius, "must be a positive number of metres"))
			case cfg.RelogPause == 0:
				return errcode.WithCode(errcode.Config("--relog-pause", cfg.RelogPause, "must be positive"))
			case cfg.LegTimeout == 0:
				return errcode.WithCode(errcode.Config("--leg-timeout", cfg.LegTimeout, "must be positive"))
			}
			if cfg.RelogChance == 0 {
				cfg.RelogChance = -1 // the help: 0 never relogs
			}
			cfg.FirstAccount = account.ID(first)
			if first == 0 {
				return errcode.WithCode(errcode.Config("--first-account", first, "must be at least 1"))
			}
			key, err := readLoginKey("--key", keyFile)
			if err != nil {
				return errcode.WithCode(err)
			}
			iss, err := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: cluster, Key: key})
			if err != nil {
				return errcode.WithCode(errcode.RenameFields(err, flagOf))
			}
			cfg.Token = func(a account.ID) (string, error) {
				tok, _, err := iss.Issue(a, gateway.Audience)
				return tok, err
			}
			if err := cfg.Validate(); err != nil {
				return errcode.WithCode(errcode.RenameFields(err, flagOf))
			}
			ctx := cmd.Context()
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			out := cmd.OutOrStdout()
			start := time.Now()
			bots, err := sim.StartBots(ctx, cfg)
			if err != nil {
				return errcode.WithCode(errcode.RenameFields(err, flagOf))
			}
			done := make(chan struct{})
			var (
				st     sim.BotStats
				runErr error
			)
			go func() {
				defer close(done)
				st, runErr = bots.Wait()
			}()
			t := time.NewTicker(every)
			defer t.Stop()
			for running := true; running; {
				select {
				case <-done:
					running = false
				case <-t.C:
					printBotStatus(out, time.Since(start), bots.Stats())
				}
			}
			printBotSummary(out, time.Since(start), st)
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&cfg.Gateways, "gateways", nil, "the gateways' WebSocket URLs, comma-separated, used round robin (required; ws://127.0.0.1:8081/ws)")
	f.StringVar(&keyFile, "key", "", "the login private key the bots issue their tokens with (required; see \"shardwise token keygen\")")
	f.StringVar(&cluster, "cluster", defaultCluster, "the cluster id the tokens name (the gateways' --cluster)")
	f.IntVar(&cfg.Count, "count", 10, "how many bots")
	f.Uint64Var(&first, "first-account", 1, "the first bot's account; bot i plays the account after it by i")
	f.DurationVar(&duration, "duration", 0, "stop after this long (every bot logs out); 0: until interrupted or --legs done")
	f.IntVar(&cfg.Legs, "legs", 0, "waypoints each bot walks to before it logs out (0: no limit)")
	f.Uint64Var(&cfg.Seed, "seed", 1, "the bots' schedules come from this seed")
	f.Float64Var(&cfg.Reach, "reach", sim.DefaultBotReach, "waypoints lie between reach/2 and reach metres from the origin on each axis")
	f.Float64Var(&cfg.RelogChance, "relog-chance", sim.DefaultRelogChance, "chance after each leg to log out and back in on the next gateway (0 or negative: never)")
	f.DurationVar(&cfg.RelogPause, "relog-pause", sim.DefaultRelogPause, "how long a bot stays logged out")
	f.Float64Var(&cfg.FightRadius, "fight-radius", sim.DefaultFightRadius, "attack the nearest mob this close, in metres")
	f.DurationVar(&cfg.LegTimeout, "leg-timeout", sim.DefaultLegTimeout, "give up on a waypoint not reached after this long")
	f.Float64Var(&cfg.ShopChance, "shop-chance", 0, "chance after each leg to buy a few of a good the purse affords from the nearest den's keeper (the game needs an economy)")
	f.Float64Var(&cfg.TradeChance, "trade-chance", 0, "chance after each leg that bots 2k and 2k+1 meet across a line through the origin and trade (the game needs an economy)")
	f.DurationVar(&every, "every", 5*time.Second, "how often to print a status line")
	return cmd
}

func printBotStatus(out io.Writer, since time.Duration, s sim.BotStats) {
	fmt.Fprintf(out, "bots %s  bots %d (done %d)  logins %d  relogs %d  reconnects %d  legs %d  inputs %d  attacks %d  heals %d  bought %d  trades %d  batches %d  bytes %d  blinks %d  leaks %d  errors %d\n",
		since.Round(time.Second), s.Bots, s.Done, s.Logins, s.Relogs, s.Reconnects, s.Legs, s.Inputs, s.Attacks, s.Heals,
		s.Purchases, s.TradesCommitted, s.Batches, s.Bytes, s.Blinks, s.Leaks, s.ErrorCount())
}

func printBotSummary(out io.Writer, since time.Duration, s sim.BotStats) {
	fmt.Fprintf(out, "bots: %d bots ran %s: logins %d (failed %d), relogs %d (resumed where they left %d, elsewhere %d), reconnects %d (by resume credential %d, refused %d), "+
		"legs %d (timed out %d), inputs %d, pings %d, attacks %d, heals %d, "+
		"purchases %d (refused %d, outcome not seen %d, trips that bought nothing %d), trades committed %d (cancelled %d, partner missed %d, skipped %d), "+
		"batches %d, bytes %d, blinks %d (edge returns %d), out of order %d, owner-only leaks %d, errors %s, closed by the server %s\n",
		s.Bots, since.Round(time.Millisecond), s.Logins, s.LoginFailures, s.Relogs, s.Resumed, s.ResumeMisses, s.Reconnects, s.SessionResumes, s.ResumesRefused,
		s.Legs, s.LegTimeouts, s.Inputs, s.Pings, s.Attacks, s.Heals,
		s.Purchases, s.PurchasesRefused, s.PurchasesUnseen, s.ShopMisses, s.TradesCommitted, s.TradesCancelled, s.TradeTimeouts, s.TradeSkips,
		s.Batches, s.Bytes, s.Blinks, s.EdgeReturns, s.OutOfOrder, s.Leaks, counts(s.Errors), counts(s.Closes))
}

// counts prints a count per code, sorted by code, or "-".
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, m[k])
	}
	return b.String()
}
