package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/demo"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// errDemoInvariant is returned (exit status 1) when a demo's final checks
// find an invariant broken: money not conserved, an entity simulated by two
// nodes, a blink, work left undone.
var errDemoInvariant = errcode.New("DEMO.INVARIANT", "demo: invariant failed")

// newEconomyDemoCmd is "shardwise demo economy": the economy netting
// cluster alone in one process, on SQLite by default.
func newEconomyDemoCmd() *cobra.Command {
	var (
		cfg      demo.EconomyConfig
		dataDir  string
		pgURL    string
		verbose  bool
		nodeList []string
	)
	cmd := &cobra.Command{
		Use:   "economy",
		Short: "Run three economy nodes alone netting simulated purchases, kill one, sweep its orphans",
		Long: "demo economy runs an economy cluster alone in one process: an embedded etcd and three\n" +
			"economy nodes (membership in etcd, each serving the economy service on a\n" +
			"loopback gRPC address) over one shared store (SQLite in --data or a temporary\n" +
			"directory; PostgreSQL with --postgres). Buyers, funded first, purchase from\n" +
			"sellers for --duration through the economy client, which routes each market\n" +
			"to its owner by rendezvous hashing. Epochs rotate every --epoch. One node is\n" +
			"killed mid-epoch: the survivors re-form without it at once and serve its\n" +
			"markets, and its open sessions stay unsettled until the survivors' sweep\n" +
			"settles them, once they are idle for twice the epoch age. It ends with a\n" +
			"report checked against the store: movements accepted and rejected, postings\n" +
			"versus movements, the money audit (\"shardwise econ audit\"), orphans found\n" +
			"and settled. The exit status is 1 if an invariant fails.",
		Args: cobra.NoArgs,
		RunE: coded(func(cmd *cobra.Command, _ []string) error {
			cfg.Nodes = nodeList
			// EconomyConfig reads 0 as its default; typed, 0 is refused.
			switch {
			case cfg.Duration == 0:
				return errcode.Config("--duration", cfg.Duration, "must be positive")
			case cfg.EpochMaxAge == 0:
				return errcode.Config("--epoch", cfg.EpochMaxAge, "must be positive")
			case cfg.Rate == 0:
				return errcode.Config("--rate", cfg.Rate, "must be at least 1")
			case cfg.Scopes == 0:
				return errcode.Config("--markets", cfg.Scopes, "must be at least 1")
			case len(nodeList) == 0:
				return errcode.Config("--nodes", "", "must name the nodes, comma-separated (see --help)")
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			level := slog.LevelError
			if verbose {
				level = slog.LevelInfo
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))

			store, where, cleanup, err := openDemoStore(ctx, dataDir, pgURL)
			if err != nil {
				return err
			}
			defer cleanup()
			defer store.Close()
			c := cfg.WithDefaults()
			fmt.Fprintf(out, "economy demo: %d nodes on %s, %s of purchases, epochs of %s, sweep after %s\n",
				len(c.Nodes), where, c.Duration, c.EpochMaxAge, c.SweepBound)
			cfg.Logger = log
			rep, err := demo.RunEconomy(ctx, cfg, store, out)
			if err != nil {
				return err
			}
			rep.Print(out)
			if !rep.OK() {
				return errDemoInvariant.Wrap("%d checks failed", len(rep.Failures))
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data", "", "directory for the SQLite database (default: a temporary directory, removed at exit)")
	f.StringVar(&pgURL, "postgres", "", "run on this PostgreSQL database URL instead of SQLite")
	f.DurationVar(&cfg.Duration, "duration", 20*time.Second, "how long the simulated users purchase")
	f.DurationVar(&cfg.EpochMaxAge, "epoch", 2*time.Second, "epoch max age of every node (the sweep bound is twice this)")
	f.IntVar(&cfg.Rate, "rate", 1500, "purchases per second across all simulated users")
	f.IntVar(&cfg.Scopes, "markets", 9, "number of market scopes")
	f.StringSliceVar(&nodeList, "nodes", []string{"econ-1", "econ-2", "econ-3"}, "economy node ids")
	f.StringVar(&cfg.Kill, "kill", "", "node to kill mid-run (default: the one owning most markets)")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of the simulated users")
	f.BoolVar(&verbose, "verbose", false, "log node events to stderr")
	return cmd
}

// openDemoStore opens the store the demo runs on and says where it is.
func openDemoStore(ctx context.Context, dataDir, pgURL string) (store *sqlstore.Store, where string, cleanup func(), err error) {
	cleanup = func() {}
	if pgURL != "" && dataDir != "" {
		return nil, "", cleanup, errcode.Config("--data", dataDir, "cannot be combined with --postgres")
	}
	if pgURL != "" {
		s, err := sqlstore.OpenPostgres(ctx, pgURL)
		if err != nil {
			return nil, "", cleanup, err
		}
		return s, "PostgreSQL", cleanup, nil
	}
	if dataDir == "" {
		tmp, err := os.MkdirTemp("", "shardwise-demo-")
		if err != nil {
			return nil, "", cleanup, err
		}
		dataDir = tmp
		cleanup = func() { os.RemoveAll(tmp) }
	} else if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, "", cleanup, err
	}
	path := filepath.Join(dataDir, "netting.db")
	s, err := sqlstore.OpenSQLite(ctx, path)
	if err != nil {
		cleanup()
		return nil, "", func() {}, err
	}
	return s, "SQLite " + path, cleanup, nil
}
