package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
)

func newMembersCmd() *cobra.Command {
	var (
		flags  etcdFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the live members of the cluster (node id, name, role, addresses) from etcd",
		Long: `List the live members of the cluster. A member exists exactly as long as
its etcd lease: a node that stops renewing it disappears from this list
within its lease TTL, and its node id and name become free.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return errcode.WithCode(errcode.Config("--output", output, "must be table or json"))
			}
			ctx, cancel, c, err := flags.connect(cmd.Context())
			if err != nil {
				return errcode.WithCode(err)
			}
			defer cancel()
			defer c.Close()
			ms, err := c.Members(ctx)
			if err != nil {
				return errcode.WithCode(err)
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				return writeMembersJSON(out, ms)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tROLE\tADDRESSES\tLEASE\tJOINED")
			for _, m := range ms {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%x\t%s\n", m.ID, m.Name, m.Role, formatAddrs(m.Addrs), m.Lease, m.JoinedAt.UTC().Format(time.RFC3339))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "%d member(s)\n", len(ms))
			return err
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

// memberJSON is the members command's JSON row; it includes the
// incarnation, which the stored record leaves to etcd.
type memberJSON struct {
	coord.Member
	Incarnation int64 `json:"incarnation"`
}

func writeMembersJSON(w io.Writer, ms []coord.Member) error {
	rows := make([]memberJSON, len(ms))
	for i, m := range ms {
		rows[i] = memberJSON{Member: m, Incarnation: m.Incarnation}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

func formatAddrs(addrs map[string]string) string {
	if len(addrs) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(addrs))
	for _, k := range slices.Sorted(maps.Keys(addrs)) {
		parts = append(parts, k+"="+addrs[k])
	}
	return strings.Join(parts, ",")
}
