package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/demo"
	"github.com/shardwise/shardwise/errcode"
)

// newDemoCmd is "shardwise demo": the whole cluster in one process (package
// demo's RunWorld); "shardwise demo economy" is the economy alone.
func newDemoCmd() *cobra.Command { return newDemoCmdFor(new(demo.WorldConfig)) }

// newDemoCmdFor is newDemoCmd with its flags parsed into cfg.
func newDemoCmdFor(cfg *demo.WorldConfig) *cobra.Command {
	var (
		jsonFile string
		verbose  bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a whole cluster in one process: four zone nodes, three economy nodes, bots, a region move and two node failures",
		Long: "demo runs a whole shardwise cluster in one process, with nothing to set up: an\n" +
			"embedded etcd; four zone nodes (--zones) splitting the reference game's torus\n" +
			"in quadrants that meet where the players start, each serving players (the\n" +
			"WebSocket client protocol and the browser client) and Prometheus metrics; three\n" +
			"economy nodes (--econs) on loopback gRPC; the world store and the ledger on\n" +
			"SQLite in --data or a temporary directory (PostgreSQL with --postgres); and\n" +
			"--bots bots logging in round robin over the gateways, walking across the\n" +
			"borders and the seam, fighting mobs (a kill pays loot), buying from the dens'\n" +
			"keepers and trading with each other across borders, every coin a movement on\n" +
			"the economy node that owns its scope.\n" +
			"\n" +
			"At --move-at the region where most players stand moves to another node (an\n" +
			"online region move: its entities are handed over), at --kill-at one\n" +
			"economy node is killed mid-epoch: the survivors serve its scopes and sweep its\n" +
			"orphans, and at --zone-kill-at the zone node holding the most players is\n" +
			"killed: once its lease (--zone-ttl) expires the failover controller gives its\n" +
			"regions to their standbys, and its gateway's players reconnect through\n" +
			"another; the report gives the failover's figures, each from the kill.\n" +
			"A progress line comes every second. After --duration the bots log\n" +
			"out and a report follows: entities never simulated by two nodes (a census at\n" +
			"every tick end), the players' entities conserved, handoffs and their p99 in\n" +
			"ticks, blinks seen by clients (0), movements accepted and rejected, the\n" +
			"netting ratio, the money audit and the ledger's hash chain. The exit status is\n" +
			"1 if an invariant fails. --json FILE writes the report as JSON too.\n" +
			"\n" +
			"It serves a live dashboard at --dashboard (printed at start): a map of the\n" +
			"torus with the regions coloured by owner, the border bands, every entity and\n" +
			"the handoffs as they happen, each node's numbers, and a play view that logs\n" +
			"the browser in as a new player. --serve keeps the bots playing until Ctrl-C\n" +
			"(then the report; a moment not reached is said not made, not failed), for\n" +
			"looking around; Ctrl-C before the bots play stops the start. Every zone node also serves\n" +
			"Prometheus metrics (addresses printed at start; \"shardwise top\" reads them).",
		Args: cobra.NoArgs,
		RunE: coded(func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			started := func() {}
			if cfg.Serve {
				// Ctrl-C during the startup stops it; once the cluster is
				// up, it ends the play and the report still runs.
				cfg.Stop = ctx.Done()
				var stop func()
				ctx, started, stop = serveContext(ctx)
				defer stop()
			}
			if err := worldFlags(cmd, cfg); err != nil {
				return err
			}
			if err := checkReportFile("--json", jsonFile); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			level := slog.LevelError
			if verbose {
				level = slog.LevelInfo
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			cfg.OnStart = func(st demo.WorldStart) {
				started()
				fmt.Fprintf(out, "  etcd %s (shardwise members --endpoints %s --prefix %s)\n", st.Etcd, st.Etcd, st.Prefix)
			}
			rep, err := demo.RunWorld(ctx, *cfg, out)
			if err != nil {
				return err
			}
			rep.Print(out)
			if jsonFile != "" {
				b, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonFile, append(b, '\n'), 0o644); err != nil {
					return errcode.Config("--json", jsonFile, err.Error())
				}
			}
			if !rep.OK() {
				return errDemoInvariant.Wrap("%d checks failed", len(rep.Failures))
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long the bots play")
	f.IntVar(&cfg.Bots, "bots", 40, "bots playing through the gateways")
	f.StringSliceVar(&cfg.Zones, "zones", []string{"zone-1", "zone-2", "zone-3", "zone-4"}, "zone node names (four split the torus in quadrants; another number in bands)")
	f.StringSliceVar(&cfg.Econs, "econs", []string{"econ-1", "econ-2", "econ-3"}, "economy node names")
	f.DurationVar(&cfg.MoveAt, "move-at", 0, "when the busiest region moves to another node (default: 35% of --duration; negative: no move)")
	f.DurationVar(&cfg.KillAt, "kill-at", 0, "when an economy node is killed (default: 55% of --duration; negative: no kill)")
	f.DurationVar(&cfg.ZoneKillAt, "zone-kill-at", 0, "when the zone node holding the most players is killed (default: 60% of --duration; negative: no kill)")
	f.DurationVar(&cfg.ZoneTTL, "zone-ttl", 5*time.Second, "the zone nodes' lease with a zone node kill, whole seconds: the killed node's regions are re-owned once it expires (without one: 10s)")
	f.Float64Var(&cfg.ShopChance, "shop-chance", 0.3, "chance that a bot goes shopping after a leg (0: never)")
	f.Float64Var(&cfg.TradeChance, "trade-chance", 0.5, "chance that a bot trades with its partner after a leg (0: never)")
	f.DurationVar(&cfg.EpochMaxAge, "epoch", 2*time.Second, "the economy nodes' epoch max age (the sweep bound is twice this)")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of the world and the bots")
	f.StringVar(&cfg.DataDir, "data", "", "keep the SQLite world store and ledger in this directory (default: a temporary directory, removed at exit)")
	f.StringVar(&cfg.PostgresURL, "postgres", "", "put the world store and the ledger on this PostgreSQL database URL instead of SQLite")
	f.StringVar(&cfg.DashboardAddr, "dashboard", "127.0.0.1:0", `serve the live dashboard at this address (port 0: any free port; "" for none)`)
	f.BoolVar(&cfg.Serve, "serve", false, "keep the bots playing until interrupted (Ctrl-C), then report")
	f.StringVar(&jsonFile, "json", "", "also write the report as JSON to this file")
	f.BoolVar(&verbose, "verbose", false, "log the nodes' events to stderr")
	cmd.AddCommand(newEconomyDemoCmd())
	return cmd
}

// worldFlags turns what the flags left in cfg into what they mean, and
// validates it: an explicit 0 is refused where the configuration would
// read it as "the default", a chance of 0 is "never", an empty node list
// is refused; then WorldConfig.Validate, which names the flags.
func worldFlags(cmd *cobra.Command, cfg *demo.WorldConfig) error {
	// An explicit 0 means what a person means by it, never the
	// default the zero value stands for in WorldConfig.
	changed := cmd.Flags().Changed
	for flag, v := range map[string]*time.Duration{"move-at": &cfg.MoveAt, "kill-at": &cfg.KillAt, "zone-kill-at": &cfg.ZoneKillAt, "zone-ttl": &cfg.ZoneTTL, "duration": &cfg.Duration, "epoch": &cfg.EpochMaxAge} {
		if changed(flag) && *v == 0 {
			return errcode.Config("--"+flag, *v, "must be positive (see --help)")
		}
	}
	// Negative is WorldConfig's "never", which a person writes 0.
	for _, c := range []struct {
		flag string
		v    *float64
	}{{"shop-chance", &cfg.ShopChance}, {"trade-chance", &cfg.TradeChance}} {
		if *c.v < 0 {
			return errcode.Config("--"+c.flag, *c.v, "is a chance: at least 0 (0: never)")
		}
		if changed(c.flag) && *c.v == 0 {
			*c.v = -1 // never
		}
	}
	// An empty list would be WorldConfig's default nodes.
	for _, c := range []struct {
		flag  string
		nodes []string
	}{{"zones", cfg.Zones}, {"econs", cfg.Econs}} {
		if len(c.nodes) == 0 {
			return errcode.Config("--"+c.flag, "", "must name the nodes, comma-separated (see --help)")
		}
	}
	if changed("bots") && cfg.Bots == 0 {
		return errcode.Config("--bots", cfg.Bots, "must be at least 1")
	}
	return cfg.Validate()
}

// coded is run with its error's stable code in front (CONFIG.INVALID: …),
// as every other command prints it.
func coded(run func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error { return errcode.WithCode(run(cmd, args)) }
}

// checkReportFile checks, before a run that ends by writing a report to
// path, that the file can be written there: its directory exists and
// takes a new file, and path is not a directory. Nothing is left behind.
func checkReportFile(flag, path string) error {
	if path == "" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return errcode.Config(flag, path, "is a directory: name the file to write")
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".shardwise-report-*")
	if err != nil {
		// The reason without the probe's own file name: "no such file
		// or directory", "permission denied".
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return errcode.Config(flag, path, "cannot be written in "+dir+": "+err.Error())
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
	return nil
}

// serveContext is the run's context with --serve: parent's cancellation
// (Ctrl-C) cancels it until started is called (the cluster is up, the bots
// about to play), and not after, so that the end of the play (Stop, the
// same Ctrl-C) is followed by the whole report and an orderly shutdown. A
// second Ctrl-C is not seen: main's signal.NotifyContext keeps catching
// the signal once its context is done. stop releases the context.
func serveContext(parent context.Context) (ctx context.Context, started, stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	var once sync.Once
	unhook := context.AfterFunc(parent, func() { once.Do(cancel) })
	started = func() {
		unhook()
		once.Do(func() {}) // racing a cancel: whichever comes first holds
	}
	return ctx, started, func() { unhook(); cancel() }
}
