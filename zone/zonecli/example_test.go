package zonecli_test

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/zone/zonecli"
)

// A zone command of one's own hosting one module with a flag of its own.
// A main would call zonecli.Main(module) instead, which runs the same
// command as the program; here a flag refused before any I/O shows the
// error a user reads.
func ExampleNewCommand() {
	var entities int
	module := zonecli.Module{
		Name:  "wander",
		Flags: func(f *pflag.FlagSet) { f.IntVar(&entities, "entities", 64, "wanderers of the whole world") },
		New: func(_ context.Context, n zonecli.Node) (zonecli.Hosted, error) {
			m, err := wander.New(wander.Config{Seed: n.Seed, Entities: entities})
			return zonecli.Hosted{Module: m}, err
		},
	}
	cmd := zonecli.NewCommand(zonecli.Config{Use: "wander-zone", Modules: []zonecli.Module{module}})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetArgs([]string{"--endpoints", "http://127.0.0.1:2379", "--name", "zone-a", "--certs", "certs", "--tick", "0s"})
	fmt.Println(cmd.ExecuteContext(context.Background()))
	fmt.Println(cmd.Flags().Lookup("entities").Usage)
	// Output:
	// CONFIG.INVALID: invalid configuration: --tick = 0s: must be positive
	// wanderers of the whole world
}
