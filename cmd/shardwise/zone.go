package main

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/zone/zonecli"
)

// newZoneCmd is "shardwise zone": one zone node as its own process
// (package zonecli, which a user's main builds the same way with its own
// module), running the reference game or the wander example. Here is only
// what is the game's or wander's: their flags and how they make a module.
func newZoneCmd() *cobra.Command {
	// --area is both modules': one variable, which zonecli gives to
	// whichever runs.
	var area float64
	return zonecli.NewCommand(zonecli.Config{
		Use:   "zone",
		Short: "Run one zone node (the reference game or wander), with its peers found through etcd",
		Long: "zone runs one zone node as its own process: it registers in etcd as --name\n" +
			"(role zone, publishing its link address), serves the node link with the\n" +
			"certificate --certs holds for --name (see \"shardwise certs\"), and simulates\n" +
			"the regions the region table gives it (\"shardwise regions new\" writes a table\n" +
			"over the grid the node runs, the game's: 128 km torus, 8 km regions;\n" +
			"\"shardwise regions apply\" stores it). Every other zone member is a link\n" +
			"peer; the entities they simulate near this node's viewers arrive as render\n" +
			"ghosts.\n" +
			"\n" +
			"--module game (the default) runs the reference game: every node runs it from\n" +
			"the same --seed and --players, each spawning the players whose homes it owns.\n" +
			"--module wander runs examples/wander: --entities wanderers spawned in the\n" +
			"--area square, each on the node owning its spawn region, each staying inside\n" +
			"that region.\n" +
			"\n" +
			"When a new table moves a region away, the node hands every entity standing\n" +
			"in it to the new owner over the link, under the same id, within a few ticks;\n" +
			"an entity that walks past a border is handed over the same way. The game's\n" +
			"dens and their mobs belong to the region's columns: the old owner removes\n" +
			"them and the new owner sets them up again. --no-handoff turns handoff off:\n" +
			"entities then stay with the node that simulates them.\n" +
			"\n" +
			"It prints a ready line, a status line about once a second (entities, those\n" +
			"simulated and frozen in a handoff, regions, render ghosts, peers, handoffs),\n" +
			"a line when the table changes, and a summary at the end: after --ticks ticks,\n" +
			"on interrupt, or when the node loses its lease (exit status 1). With\n" +
			"--metrics it serves Prometheus metrics at http://ADDR/metrics, among them\n" +
			"shardwise_zone_region_entities{region} (entities simulated per region) and\n" +
			"shardwise_zone_handoffs_total{event} (docs/metrics.md lists them all), and\n" +
			"publishes the address in its member record, where \"shardwise top\" finds it.\n" +
			"With --dashboard ADDR it serves the live dashboard at http://ADDR/: the\n" +
			"region table's map with this node's entities and the handoffs it sees, and\n" +
			"its numbers (the demo's dashboard shows every node of its cluster).\n" +
			"\n" +
			"With --gateway ADDR the node serves players: the client protocol's WebSocket\n" +
			"at ws://ADDR/ws and the browser client at http://ADDR/ (docs/protocol.md).\n" +
			"A client may connect to any node's gateway; that node serves it for the whole\n" +
			"session, wherever its player walks. Logins are tokens for --cluster signed\n" +
			"with the login key whose public half is --login-pub (\"shardwise token\").\n" +
			"Every gateway of a cluster must share one session directory, --directory\n" +
			"redis://HOST:PORT, and one world store, --world-store sqlite:///PATH (the\n" +
			"processes of one machine can share the file) or postgres://…, where players\n" +
			"are kept between sessions; a node alone in its region table may leave both\n" +
			"out (they are then in memory, gone when it stops). --no-bots starts the\n" +
			"reference game without its bot players, so that only clients play; accounts\n" +
			"1 to --players form parties of three.\n" +
			"\n" +
			"With --economy the reference game has money: a mob's killer is paid its loot,\n" +
			"den keepers sell goods, and players trade across borders, every change a\n" +
			"movement on the economy node that owns its scope (\"shardwise econ\", found\n" +
			"in the same etcd); the zone node never writes money itself.",
		Modules: []zonecli.Module{gameModule(&area), wanderModule(&area)},
	})
}

// areaFlag registers --area on fs, bound to area.
func areaFlag(fs *pflag.FlagSet, area *float64) {
	fs.Float64Var(area, "area", 2000, "side in metres of the start square, centred on the seams' crossing")
}

// checkArea refuses a typed 0, which game.Config reads as its default.
func checkArea(area float64) error {
	if area == 0 {
		return errcode.Config("--area", area, "must be positive and fit the torus")
	}
	return nil
}

// gameFlagOf names the flag behind each game.Config field.
var gameFlagOf = map[string]string{
	"Seed":              "--seed",
	"Players":           "--players",
	"Area":              "--area",
	"TickInterval":      "--tick",
	"MaterialiseBudget": "--materialise-budget",
}

// gameModule is the reference game: --players, --no-bots, --economy.
func gameModule(area *float64) zonecli.Module {
	var (
		players int
		noBots  bool
		economy string
	)
	return zonecli.Module{
		Name:  "game",
		Usage: "the reference game",
		Flags: func(f *pflag.FlagSet) {
			f.IntVar(&players, "players", 64, "--module game: players of the whole world (a master and a pet each), each on the node owning its home")
			areaFlag(f, area)
			f.StringVar(&economy, "economy", "", `--module game: money, loot, shops and trades through the economy nodes in etcd ("shardwise econ"): "tls" (mutual TLS with this node's --certs) or "plaintext" (to loopback nodes only); default: no economy`)
			f.BoolVar(&noBots, "no-bots", false, "--module game: no bot players, only clients through the gateways (accounts 1 to --players still form parties)")
		},
		FlagOf: gameFlagOf,
		New: func(ctx context.Context, n zonecli.Node) (zonecli.Hosted, error) {
			if err := checkArea(*area); err != nil {
				return zonecli.Hosted{}, err
			}
			gc := game.Config{Seed: n.Seed, Players: players, Area: *area, NoBots: noBots,
				TickInterval: n.TickInterval, MaterialiseBudget: n.MaterialiseBudget}
			var h zonecli.Hosted
			if economy != "" {
				ledger, closeEconomy, err := dialEconomy(ctx, n.Coord, economy, n.CertDir, n.Name)
				if err != nil {
					return h, err
				}
				h.Close = closeEconomy
				gc.Economy.Ledger = ledger
			}
			if players == 0 { // game.Config's 0 is its default, 8
				return h, errcode.Config("--players", players, "must be at least 1")
			}
			mod, err := game.NewModule(gc)
			if err != nil {
				return h, err
			}
			h.Module, h.Runtime, h.Kinds = mod, gc.RuntimeConfig(), game.KindOf
			return h, nil
		},
	}
}

// wanderModule is examples/wander: --entities wanderers, on the game's
// grid, in the --area square centred on the seams' crossing.
func wanderModule(area *float64) zonecli.Module {
	var entities int
	return zonecli.Module{
		Name:  "wander",
		Usage: "examples/wander",
		Flags: func(f *pflag.FlagSet) {
			f.IntVar(&entities, "entities", 64, "--module wander: wanderers of the whole world, each on the node owning its spawn region")
			areaFlag(f, area)
		},
		FlagOf: map[string]string{"Entities": "--entities", "Area": "--area", "Seed": "--seed", "TickInterval": "--tick", "MaterialiseBudget": "--materialise-budget"},
		New: func(_ context.Context, n zonecli.Node) (zonecli.Hosted, error) {
			if err := checkArea(*area); err != nil {
				return zonecli.Hosted{}, err
			}
			// The game's configuration is checked too: its runtime
			// configuration (grid, step, budget) is the node's.
			gc := game.Config{Seed: n.Seed, Area: *area, TickInterval: n.TickInterval, MaterialiseBudget: n.MaterialiseBudget}
			if err := gc.WithDefaults().Validate(); err != nil {
				return zonecli.Hosted{}, err
			}
			if entities == 0 { // wander.Config's 0 is its default, 64
				return zonecli.Hosted{}, errcode.Config("--entities", entities, "must be positive")
			}
			// Centre zero: the seams' crossing, where the game's start square is.
			mod, err := wander.New(wander.Config{Seed: n.Seed, Entities: entities, Area: *area})
			if err != nil {
				return zonecli.Hosted{}, err
			}
			return zonecli.Hosted{Module: mod, Runtime: gc.RuntimeConfig()}, nil
		},
	}
}

// dialEconomy connects the game's economy port to the economy nodes in
// etcd: a coord connection for their membership and econ's client over it.
// The returned func closes both.
func dialEconomy(ctx context.Context, cc coord.ClientConfig, mode, certDir, name string) (game.Economy, func(), error) {
	cfg := econ.ClientConfig{}
	switch mode {
	case "tls":
		if certDir == "" {
			return nil, nil, errcode.Config("--economy", mode, "needs --certs: this node's certificate is its identity to the economy nodes")
		}
		t, err := econ.ClientTLS(certDir, name)
		if err != nil {
			return nil, nil, errcode.Config("--certs", certDir, err.Error())
		}
		cfg.TLS = t
	case "plaintext":
		cfg.Insecure = true
	default:
		return nil, nil, errcode.Config("--economy", mode, `must be "tls" or "plaintext"`)
	}
	if len(cc.Endpoints) == 0 {
		return nil, nil, errcode.Config("--endpoints", "", "required: the etcd cluster to talk to (for example --endpoints http://127.0.0.1:2379)")
	}
	cl, err := coord.Connect(ctx, cc)
	if err != nil {
		return nil, nil, err
	}
	cfg.Members = cl
	client, err := econ.NewClient(ctx, cfg)
	if err != nil {
		cl.Close()
		return nil, nil, err
	}
	return game.ClientEconomy{Client: client}, func() { client.Close(); cl.Close() }, nil
}
