package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
)

// newDevCmd is "shardwise dev": an embedded etcd for trying the commands
// that talk to one (regions, members, zone, econ) without installing etcd.
func newDevCmd() *cobra.Command {
	var (
		dataDir string
		port    int
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run an embedded etcd on this machine for trying shardwise's cluster commands",
		Long: "dev runs a single-member etcd inside this process, on 127.0.0.1, and prints its\n" +
			"endpoint: pass it as --endpoints to \"shardwise regions\", \"members\", \"zone\"\n" +
			"and \"econ\". It keeps its data in --data (kept after exit, and found again on\n" +
			"the next start) or in a temporary directory removed at exit. It runs until\n" +
			"interrupted. It is for one machine and for trying things: production runs a\n" +
			"real etcd cluster.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if port < 0 || port > 65535 {
				return withCode(errcode.Config("--port", port, "must be a TCP port, 1 to 65535 (0: any free port)"))
			}
			out := cmd.OutOrStdout()
			dir, found := dataDir, false
			if dir == "" {
				tmp, err := os.MkdirTemp("", "shardwise-dev-etcd-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dir = tmp
			} else {
				if _, err := os.Stat(filepath.Join(dir, "member")); err == nil {
					found = true
				}
				if err := os.MkdirAll(dir, 0o700); err != nil {
					return withCode(errcode.Config("--data", dataDir, err.Error()))
				}
			}
			ctx := cmd.Context()
			e, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{DataDir: dir, ClientPort: port})
			if err != nil {
				return withCode(renameToFlags(err, map[string]string{"EmbeddedConfig.ClientPort": "--port", "EmbeddedConfig.DataDir": "--data"}))
			}
			defer e.Close()
			switch {
			case dataDir == "":
				fmt.Fprintf(out, "etcd data in %s (removed at exit)\n", dir)
			case found:
				fmt.Fprintf(out, "etcd data in %s: found an earlier run's data, serving it again\n", dir)
			default:
				fmt.Fprintf(out, "etcd data in %s (new; kept at exit)\n", dir)
			}
			fmt.Fprintf(out, "etcd serving at %s; stop with Ctrl-C\n", strings.Join(e.Endpoints(), ","))
			fmt.Fprintf(out, "try: shardwise members --endpoints %s\n", strings.Join(e.Endpoints(), ","))
			<-ctx.Done()
			fmt.Fprintln(out, "etcd stopping")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data", "", "directory for etcd's data, kept at exit (default: a temporary directory, removed at exit)")
	f.IntVar(&port, "port", 2379, "client port on 127.0.0.1 (0: any free port)")
	return cmd
}
