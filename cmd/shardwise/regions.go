package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/game"
)

// etcdFlags are the connection flags every etcd-facing command shares.
type etcdFlags struct {
	endpoints []string
	prefix    string
	timeout   time.Duration
}

func (f *etcdFlags) register(cmd *cobra.Command) { f.registerOn(cmd.PersistentFlags()) }

// registerLocal registers the flags on cmd alone, not its subcommands.
func (f *etcdFlags) registerLocal(cmd *cobra.Command) { f.registerOn(cmd.Flags()) }

func (f *etcdFlags) registerOn(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.endpoints, "endpoints", nil,
		"etcd client URLs, comma-separated (for example http://127.0.0.1:2379); required")
	fs.StringVar(&f.prefix, "prefix", coord.DefaultPrefix,
		"key prefix of the shardwise cluster in etcd")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second,
		"give up on etcd after this long")
}

// etcdFlagOf names the flag behind each coord.ClientConfig field.
var etcdFlagOf = map[string]string{
	"ClientConfig.Endpoints":   "--endpoints",
	"ClientConfig.Prefix":      "--prefix",
	"ClientConfig.DialTimeout": "--timeout",
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
	cfg := coord.ClientConfig{Endpoints: f.endpoints, Prefix: f.prefix, DialTimeout: f.timeout}
	// Checked before dialling, so that a typo is named at once by its flag
	// instead of after the dial timeout, or by a Go field name.
	if err := cfg.Validate(); err != nil {
		return nil, nil, nil, errcode.RenameFields(errcode.Indexless(err), etcdFlagOf)
	}
	ctx, cancel := context.WithTimeout(parent, f.timeout)
	c, err := coord.Connect(ctx, cfg)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cancel, c, nil
}

func newRegionsCmd() *cobra.Command {
	var flags etcdFlags
	cmd := &cobra.Command{
		Use:   "regions",
		Short: "Show or replace the region table (which node owns which region) in etcd, or write a new one",
		Long: `The region table assigns every region of the world grid to a node, by
node name. It changes only when an operator applies a new version: a table
of version V replaces exactly version V-1, so two operators applying at
once cannot both win (the loser gets REGIONS.CONFLICT). "regions new" writes
a table file over the zone grid without etcd; running zone nodes follow
every table applied, handing over the entities of the regions that move.`,
	}
	flags.register(cmd)
	cmd.AddCommand(newRegionsShowCmd(&flags), newRegionsApplyCmd(&flags), newRegionsNewCmd())
	return cmd
}

// newRegionsNewCmd is "shardwise regions new": a table file for "regions
// apply", over the grid "shardwise zone" runs, written without etcd.
func newRegionsNewCmd() *cobra.Command {
	var (
		nodes   []string
		version uint64
		set     []string
		output  string
	)
	cmd := &cobra.Command{
		Use:   "new",
		Short: "Print a region table over the zone grid, split between --nodes (no etcd needed)",
		Long: `Print a region table, in the form "regions apply" reads, over the grid
"shardwise zone" runs (the reference game's: a 128 km torus in 8 km regions,
16 × 16 = 256 regions, numbered row by row from the origin: region 0 spans
x and y in [0, 8000) m, region 1 is next to it along x, region 16 along y).

The regions are split between --nodes in contiguous blocks, in the order
given: with two nodes the first owns regions 0-127 (y below 64 km) and
the second 128-255. Each --set REGION=NODE then gives one region to a node.
It only prints; apply the result with "regions apply", for example with
--expect-version N to replace version N whatever the file's --version says.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asYAML, err := outputIsYAML(output)
			if err != nil {
				return errcode.WithCode(err)
			}
			t, err := newRegionTable(nodes, version, set)
			if err != nil {
				return errcode.WithCode(err)
			}
			b, err := coord.FormatRegions(t, asYAML)
			if err != nil {
				return errcode.WithCode(err)
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&nodes, "nodes", nil, "node names sharing the regions, comma-separated, in block order (required)")
	f.Uint64Var(&version, "version", 1, "the table's version (it replaces version-1)")
	f.StringArrayVar(&set, "set", nil, "REGION=NODE: give one region to a node (repeatable)")
	f.StringVarP(&output, "output", "o", "json", "output format: json or yaml")
	return cmd
}

// newRegionTable is the table "regions new" prints.
func newRegionTable(nodes []string, version uint64, set []string) (*cells.Table, error) {
	if len(nodes) == 0 {
		return nil, errcode.Config("--nodes", "", "required: the nodes sharing the regions (for example --nodes zone-a,zone-b)")
	}
	if version == 0 {
		return nil, errcode.Config("--version", version, "must be at least 1")
	}
	grid, err := cells.NewGrid(game.Config{}.RuntimeConfig().Grid)
	if err != nil {
		return nil, err
	}
	t, err := cells.Uniform(grid, version, nodes)
	if err != nil {
		return nil, errcode.Config("--nodes", strings.Join(nodes, ","), err.Error())
	}
	owners := t.Owners()
	for _, kv := range set {
		region, node, ok := strings.Cut(kv, "=")
		r, err := strconv.Atoi(region)
		if !ok || err != nil || r < 0 || r >= len(owners) {
			return nil, errcode.Config("--set", kv, fmt.Sprintf("must be REGION=NODE with REGION in [0, %d)", len(owners)))
		}
		owners[r] = node
	}
	if t, err = cells.NewTable(grid, version, owners); err != nil {
		return nil, errcode.Config("--set", strings.Join(set, " "), err.Error())
	}
	return t, nil
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
				return errcode.WithCode(err)
			}
			ctx, cancel, c, err := flags.connect(cmd.Context())
			if err != nil {
				return errcode.WithCode(err)
			}
			defer cancel()
			defer c.Close()
			t, prov, err := c.RegionsProvenance(ctx)
			if err != nil {
				return errcode.WithCode(err)
			}
			b, err := coord.FormatRegions(t, asYAML)
			if err != nil {
				return errcode.WithCode(err)
			}
			// Who wrote it goes to stderr, as a comment: the table on
			// stdout stays a file "regions apply" reads (and so does the
			// two together).
			if _, err := fmt.Fprintln(cmd.ErrOrStderr(), provenanceLine(prov)); err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "json", "output format: json or yaml")
	return cmd
}

// provenanceLine says who wrote a table version and why, as a comment.
func provenanceLine(p coord.Provenance) string {
	writer, reason := p.Writer, p.Reason
	if writer == "" {
		writer = "an unnamed writer"
	}
	line := fmt.Sprintf("# version %d written by %s", p.Version, writer)
	if !p.At.IsZero() {
		line += " at " + p.At.UTC().Format(time.RFC3339)
	}
	if reason != "" {
		line += ": " + reason
	}
	return line
}

// operatorName is the writer "regions apply" records: the local user and
// host, as far as they can be known.
func operatorName() string {
	who := os.Getenv("USER")
	if who == "" {
		who = "unknown"
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		who += "@" + host
	}
	return "operator " + who
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
		reason string
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
(see "shardwise members"), and the grid must not change.

The table is recorded as written by "operator USER@HOST" with --reason, and
"regions show" prints that (the zone nodes' failover controller records
itself the same way).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readFileArg(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			t, err := coord.ParseRegionsFile(data)
			if err != nil {
				return errcode.WithCode(fmt.Errorf("%s: %w", args[0], err))
			}
			if cmd.Flags().Changed("expect-version") {
				if t, err = cells.NewTable(t.Grid(), expect+1, t.Owners()); err != nil {
					return errcode.WithCode(fmt.Errorf("%w: %w", coord.ErrRegionsInvalid, err))
				}
			}
			ctx, cancel, c, err := flags.connect(cmd.Context())
			if err != nil {
				return errcode.WithCode(err)
			}
			defer cancel()
			defer c.Close()
			if err := c.ApplyRegions(ctx, t, coord.ApplyOptions{Force: force, Writer: operatorName(), Reason: reason}); err != nil {
				return errcode.WithCode(explainConflict(err, args[0], cmd.Flags().Changed("expect-version")))
			}
			nodes := t.Nodes()
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "applied region table version %d: %d regions over %d node(s): %s\n",
				t.Version(), t.Grid().Regions(), len(nodes), strings.Join(nodes, ", "))
			return err
		},
	}
	cmd.Flags().Uint64Var(&expect, "expect-version", 0, "apply only if the current version is this; the table is stored as this + 1")
	cmd.Flags().BoolVar(&force, "force", false, "store the table even if it names nodes that are not live members or changes the grid")
	cmd.Flags().StringVar(&reason, "reason", "", `why, recorded with the table and printed by "regions show"`)
	return cmd
}

// explainConflict says, for a refused apply, what version the stored
// table has and what to do: a file written against an older version
// (the same file applied twice, say) goes in with --expect-version; a
// version passed with --expect-version that is not the stored one means
// someone else applied since it was read. Other errors pass unchanged.
func explainConflict(err error, file string, expected bool) error {
	var ce *coord.RegionsConflictError
	if !errors.As(err, &ce) {
		return err
	}
	var msg string
	if expected {
		msg = fmt.Sprintf("the stored region table is version %d, not --expect-version %d: someone applied a table since you read it; "+
			`re-read it ("shardwise regions show"), make your change to that, and apply again with --expect-version %d`,
			ce.Actual, ce.Expected, ce.Actual)
	} else {
		msg = fmt.Sprintf("the stored region table is version %d, and %s is version %d, which replaces only version %d: "+
			"to store %s over the current table anyway, apply it with --expect-version %d (it is stored as version %d); "+
			`to keep someone else's change, re-read the table ("shardwise regions show") and edit that`,
			ce.Actual, file, ce.Expected+1, ce.Expected, file, ce.Actual, ce.Actual+1)
	}
	return conflictHint{err: ce, msg: msg}
}

// conflictHint is a *coord.RegionsConflictError (errors.As and its code
// still find it) with the command's own message.
type conflictHint struct {
	err *coord.RegionsConflictError
	msg string
}

func (e conflictHint) Error() string { return e.msg }
func (e conflictHint) Unwrap() error { return e.err }

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
