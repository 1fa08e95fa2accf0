package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal asks the command to stop gracefully (the demo's
	// report, a node's save and settle); a second one, while that runs,
	// ends the process as a signal does by default.
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "shardwise:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "shardwise",
		Short:         "Single writers for caches, economies and worlds, across a cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newDemoCmd(),
		newWorldCmd(),
		newRegionsCmd(),
		newMembersCmd(),
		newCertsCmd(),
		newZoneCmd(),
		newTokenCmd(),
		newBotsCmd(),
		newEconCmd(),
		newDevCmd(),
		newTopCmd(),
	)
	return root
}
