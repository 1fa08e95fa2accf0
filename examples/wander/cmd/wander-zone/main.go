// Command wander-zone is a zone node of your own: the shardwise CLI's
// "zone" command (package zonecli: etcd, certificates, the gateway,
// metrics, the probes, the dashboard, every flag and check) hosting the
// wander module (examples/wander) instead of the reference game. It is
// what docs/modules.md builds, and what a user's main looks like:
//
//	go run ./examples/wander/cmd/wander-zone --endpoints http://127.0.0.1:2379 \
//		--name zone-a --certs certs --entities 32
//
// The region table it follows is the one "shardwise regions apply" stores:
// the module runs on zone's default grid, the one "shardwise regions new"
// writes tables over.
package main

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/zone/zonecli"
)

func main() { zonecli.Main(module()) }

// module is wander as the command hosts it: its flags, and how they and
// the node's make one wander.Module.
func module() zonecli.Module {
	var cfg wander.Config
	return zonecli.Module{
		Name:  "wander",
		Usage: "wanderers walking between waypoints",
		Flags: func(f *pflag.FlagSet) {
			f.IntVar(&cfg.Entities, "entities", 64, "wanderers of the whole world, each on the node owning its spawn point")
			f.IntVar(&cfg.Accounts, "accounts", 4, "accounts owning them, round robin (at most --entities)")
			f.Float64Var(&cfg.Area, "area", 2000, "side in metres of the spawn square, centred on the seams' crossing (0: the whole world)")
			f.Float64Var(&cfg.Roam, "roam", 0, "side in metres of the square around its spawn point a wanderer roams, across borders (0: it stays in its region)")
		},
		// wander.Config's errors name its fields; the user typed flags.
		FlagOf: map[string]string{
			"Entities": "--entities",
			"Accounts": "--accounts",
			"Area":     "--area",
			"Roam":     "--roam",
		},
		New: func(_ context.Context, n zonecli.Node) (zonecli.Hosted, error) {
			// wander.Config reads 0 as "the default": typed, it is refused.
			if cfg.Entities == 0 {
				return zonecli.Hosted{}, errcode.Config("--entities", cfg.Entities, "must be positive")
			}
			if cfg.Accounts == 0 {
				return zonecli.Hosted{}, errcode.Config("--accounts", cfg.Accounts, "must be positive")
			}
			cfg.Seed = n.Seed // the world seed, the same on every node
			m, err := wander.New(cfg)
			return zonecli.Hosted{Module: m}, err
		},
	}
}
