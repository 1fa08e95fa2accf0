package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
)

// etcdFlags are the connection flags every etcd-facing command shares.
type etcdFlags struct {
	endpoints []string
	prefix    string
	timeout   time.Duration
}

func (f *etcdFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringSliceVar(&f.endpoints, "endpoints", nil,
		"etcd client URLs, comma-separated (for example http://127.0.0.1:2379); required")
	cmd.PersistentFlags().StringVar(&f.prefix, "prefix", coord.DefaultPrefix,
		"key prefix of the shardwise cluster in etcd")
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 10*time.Second,
		"give up on etcd after this long")
}

// connect validates the flags and connects. The returned context carries
// the command's timeout; cancel it and close the client when done.
func (f *etcdFlags) connect(parent context.Context) (context.Context, context.CancelFunc, *coord.Client, error) {
	if len(f.endpoints) == 0 {
		return nil, nil, nil, errcode.Config("--endpoints", "", "required: the etcd cluster to talk to (for example --endpoints http://127.0.0.1:2379)")
	}
	if f.timeout <= 0 {
		return nil, nil, nil, errcode.Config("--timeout", f.timeout, "must be positive")
	}
	ctx, cancel := context.WithTimeout(parent, f.timeout)
	c, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: f.endpoints, Prefix: f.prefix, DialTimeout: f.timeout})
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cancel, c, nil
}

// codedError puts an error's stable code in front of its message, so an
// operator (or a script reading stderr) sees REGIONS.CONFLICT and not only
// prose.
type codedError struct{ err error }

func (e codedError) Error() string { return errcode.Of(e.err) + ": " + e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

func withCode(err error) error {
	if err == nil || errcode.Of(err) == "" {
		return err
	}
	return codedError{err}
}

func newRegionsCmd() *cobra.Command {
	var flags etcdFlags
	cmd := &cobra.Command{
		Use:   "regions",
		Short: "Show or replace the region table (which node owns which region) in etcd",
		Long: `The region table assigns every region of the world grid to a node, by
node name. It changes only when an operator applies a new version: a table
of version V replaces exactly version V-1, so two operators applying at
once cannot both win (the loser gets REGIONS.CONFLICT).`,
	}
	flags.register(cmd)
	cmd.AddCommand(newRegionsShowCmd(&flags), newRegionsApplyCmd(&flags))
	return cmd
}

func newRegionsShowCmd(flags *etcdFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the current region table (JSON or YAML, as regions apply reads it)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asYAML, err := outputIsYAML(output)
			if err != nil {
				return withCode(err)
			}
			ctx, cancel, c, err := flags.connect(cmd.Context())
			if err != nil {
				return withCode(err)
			}
			defer cancel()
			defer c.Close()
			t, err := c.Regions(ctx)
			if err != nil {
				return withCode(err)
			}
			b, err := coord.FormatRegions(t, asYAML)
			if err != nil {
				return withCode(err)
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "json", "output format: json or yaml")
	return cmd
}

func outputIsYAML(format string) (bool, error) {
	switch strings.ToLower(format) {
	case "json":
		return false, nil
	case "yaml", "yml":
		return true, nil
	default:
		return false, errcode.Config("--output", format, "must be json or yaml")
	}
}

func newRegionsApplyCmd(flags *etcdFlags) *cobra.Command {
	var (
		expect uint64
		force  bool
	)
	cmd := &cobra.Command{
		Use:   "apply FILE",
		Short: "Replace the region table with the one in FILE (JSON or YAML; - reads stdin)",
		Long: `Replace the region table with the one in FILE.

The file's version says which table it replaces: version V is stored only if
the current version is V-1. With --expect-version N the file's version is
ignored: the table is stored as version N+1 if the current version is N.
Either way, if someone else applied first, nothing is written and the
command fails with REGIONS.CONFLICT; re-read with "regions show" and retry.

Unless --force is given, every node the table names must be a live member
(see "shardwise members"), and the grid must not change.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readFileArg(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			t, err := coord.ParseRegionsFile(data)
			if err != nil {
				return withCode(fmt.Errorf("%s: %w", args[0], err))
			}
			if cmd.Flags().Changed("expect-version") {
				if t, err = cells.NewTable(t.Grid(), expect+1, t.Owners()); err != nil {
					return withCode(fmt.Errorf("%w: %w", coord.ErrRegionsInvalid, err))
				}
			}
			ctx, cancel, c, err := flags.connect(cmd.Context())
			if err != nil {
				return withCode(err)
			}
			defer cancel()
			defer c.Close()
			if err := c.ApplyRegions(ctx, t, coord.ApplyOptions{Force: force}); err != nil {
				return withCode(err)
			}
			nodes := t.Nodes()
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "applied region table version %d: %d regions over %d node(s): %s\n",
				t.Version(), t.Grid().Regions(), len(nodes), strings.Join(nodes, ", "))
			return err
		},
	}
	cmd.Flags().Uint64Var(&expect, "expect-version", 0, "apply only if the current version is this; the table is stored as this + 1")
	cmd.Flags().BoolVar(&force, "force", false, "store the table even if it names nodes that are not live members or changes the grid")
	return cmd
}

// readFileArg reads FILE ("-" is stdin), at most one byte more than
// coord.MaxRegionsFile: enough for ParseRegionsFile to refuse an oversized
// file without this command first reading all of it into memory.
func readFileArg(stdin io.Reader, name string) ([]byte, error) {
	src := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		defer f.Close()
		src = f
	}
	data, err := io.ReadAll(io.LimitReader(src, coord.MaxRegionsFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}
