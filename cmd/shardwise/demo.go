package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// errDemoInvariant is returned (exit status 1) when the demo's final checks
// find money not conserved or work left undone.
var errDemoInvariant = errcode.New("DEMO.INVARIANT", "economy demo: invariant failed")

// newDemoCmd is "shardwise demo": the economy netting cluster in one
// process, on SQLite by default.
func newDemoCmd() *cobra.Command {
	var (
		cfg      demoConfig
		dataDir  string
		pgURL    string
		verbose  bool
		nodeList []string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run three economy nodes netting simulated purchases, kill one, sweep its orphans",
		Long: "demo runs an economy netting cluster in one process: three nodes over one\n" +
			"shared store (SQLite in --data or a temporary directory; PostgreSQL with\n" +
			"--postgres), markets routed to nodes by rendezvous hashing, buyers funded and\n" +
			"then purchasing from sellers for --duration. Epochs rotate every\n" +
			"--epoch; one node is killed mid-epoch and its open sessions are left\n" +
			"unsettled, until the survivors' sweep settles them once they are older than\n" +
			"twice the epoch age. It ends with a report checked by queries: movements\n" +
			"accepted and rejected, postings versus movements, the sum of all balances,\n" +
			"orphans found and settled. The exit status is 1 if an invariant fails.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Nodes = nodeList
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
			c := cfg.withDefaults()
			fmt.Fprintf(out, "economy demo: %d nodes on %s, %s of purchases, epochs of %s, sweep after %s\n",
				len(c.Nodes), where, c.Duration, c.EpochMaxAge, c.SweepBound)
			rep, err := runDemo(ctx, cfg, store, out, log)
			if err != nil {
				return err
			}
			printDemoReport(out, rep)
			if !rep.OK() {
				return errDemoInvariant.Wrap("%d checks failed", len(rep.Failures))
			}
			return nil
		},
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
