package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/game"
)

// newWorldCmd runs the reference game headless on one node and prints tick
// statistics.
func newWorldCmd() *cobra.Command {
	var (
		cfg   game.Config
		ticks int
	)
	// The game.Config fields the flags below set, and those flags.
	flagOf := map[string]string{
		"Seed":              "--seed",
		"Players":           "--players",
		"Area":              "--area",
		"DenChance":         "--den-chance",
		"DenCapacity":       "--den-capacity",
		"MaterialiseBudget": "--materialise-budget",
		"Node":              "--node",
	}
	cmd := &cobra.Command{
		Use:   "world",
		Short: "Run the reference game headless on one node and print tick statistics",
		Long: "world plays the reference game (players with pets, dens, mobs, combat) on one\n" +
			"node as fast as it can, for --ticks ticks, deterministically from --seed, and\n" +
			"prints tick time percentiles, entity count, and messages and bytes per tick\n" +
			"(delivered, and encoded once per audience). Interrupted (Ctrl-C), it prints\n" +
			"the statistics of the ticks it ran and exits 0.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ticks < 1 {
				return errcode.WithCode(errTicks(ticks))
			}
			// game.Config reads 0 as its default (8 players, a 1 km
			// square): a 0 typed here is refused instead.
			switch {
			case cfg.Players == 0:
				return errcode.WithCode(errcode.Config("--players", cfg.Players, "must be at least 1"))
			case cfg.Area == 0:
				return errcode.WithCode(errcode.Config("--area", cfg.Area, "must be positive and fit the torus"))
			}
			if err := cfg.WithDefaults().Validate(); err != nil {
				return errcode.WithCode(errcode.RenameFields(err, flagOf))
			}
			ctx := cmd.Context()
			s, err := game.RunHeadless(ctx, cfg, ticks, nil)
			if err != nil && ctx.Err() == nil {
				return err
			}
			out := cmd.OutOrStdout()
			if err != nil {
				// Interrupted: the statistics of the ticks that ran, as
				// zone prints its summary, and a clean exit.
				fmt.Fprintf(out, "world: interrupted after %d of %d ticks\n", s.Ticks, ticks)
			}
			_, err = s.WriteTo(out)
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&ticks, "ticks", 200, "ticks to run (20 per simulated second)")
	f.Uint64Var(&cfg.Seed, "seed", 1, "world seed: same seed, same run")
	f.IntVar(&cfg.Players, "players", 64, "players logged in (a master and a pet each)")
	f.Float64Var(&cfg.Area, "area", 2000, "side in metres of the start square, centred on the seams' crossing")
	f.Float64Var(&cfg.DenChance, "den-chance", 0, "probability a column holds a den (0: default 0.04)")
	f.IntVar(&cfg.DenCapacity, "den-capacity", 0, "mobs per den (0: default 4)")
	f.IntVar(&cfg.MaterialiseBudget, "materialise-budget", 0, "columns materialised per tick (0: default 64)")
	f.IntVar(&cfg.Node, "node", 0, "entity id node part (0-255)")
	return cmd
}

func errTicks(n int) error {
	return errcode.Config("--ticks", n, "must be at least 1")
}
