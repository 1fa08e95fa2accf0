package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

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
				return errcode.WithCode(errcode.Config("--port", port, "must be a TCP port, 1 to 65535 (0: any free port)"))
			}
			out := cmd.OutOrStdout()
			dir, found, other := dataDir, false, 0
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
				} else if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
					other = len(ents)
				}
				if err := os.MkdirAll(dir, 0o700); err != nil {
					return errcode.WithCode(errcode.Config("--data", dataDir, err.Error()))
				}
			}
			ctx := cmd.Context()
			e, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{DataDir: dir, ClientPort: port})
			if err != nil {
				return errcode.WithCode(errcode.RenameFields(err, map[string]string{"EmbeddedConfig.ClientPort": "--port", "EmbeddedConfig.DataDir": "--data"}))
			}
			defer e.Close()
			switch {
			case dataDir == "":
				fmt.Fprintf(out, "etcd data in %s (removed at exit)\n", dir)
			case found:
				fmt.Fprintf(out, "etcd data in %s: found an earlier run's data, serving it again: %s\n", dir, describeDevData(ctx, e.Endpoints()))
			case other > 0:
				fmt.Fprintf(out, "etcd data in %s (new: the directory held %d other entries and no etcd data, left as they are; kept at exit)\n", dir, other)
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

// describeDevData says what a re-used --data holds under the default
// prefix: the region table's version and nodes, and the members whose
// leases have not expired yet (an earlier run's nodes, until their TTL
// passes: etcd counts a lease's time again from a restart).
func describeDevData(ctx context.Context, endpoints []string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: endpoints})
	if err != nil {
		return "could not read it: " + err.Error()
	}
	defer c.Close()
	var parts []string
	switch t, err := c.Regions(ctx); {
	case errors.Is(err, coord.ErrRegionsNotFound):
		parts = append(parts, "no region table")
	case err != nil:
		parts = append(parts, "region table unreadable: "+err.Error())
	default:
		nodes := t.Nodes()
		parts = append(parts, fmt.Sprintf("region table version %d over %d node(s) (%s)", t.Version(), len(nodes), strings.Join(nodes, ", ")))
	}
	switch ms, err := c.Members(ctx); {
	case err != nil:
		parts = append(parts, "members unreadable: "+err.Error())
	case len(ms) == 0:
		parts = append(parts, "no members")
	default:
		names := make([]string, len(ms))
		for i, m := range ms {
			names[i] = m.Name
		}
		parts = append(parts, fmt.Sprintf("%d member(s) whose leases have not expired yet (%s)", len(ms), strings.Join(names, ", ")))
	}
	return strings.Join(parts, ", ")
}
