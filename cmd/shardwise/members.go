package main

import (
	"context"
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
		flags       etcdFlags
		output      string
		wait        int
		waitTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the live members of the cluster (node id, name, role, addresses) from etcd",
		Long: `List the live members of the cluster. A member exists exactly as long as
its etcd lease: a node that stops renewing it disappears from this list
within its lease TTL, and its node id and name become free.

With --wait N it first waits until at least N members are live (polling
etcd every 200 ms, for at most --wait-timeout), so a script that starts
nodes in the background can go on once they have joined instead of racing
their start; it fails with MEMBERS.NOT_READY, listing who has joined, if
they do not.`,
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
			if wait < 0 {
				return errcode.WithCode(errcode.Config("--wait", wait, "must be 0 (do not wait) or a number of members"))
			}
			if wait > 0 && waitTimeout <= 0 {
				return errcode.WithCode(errcode.Config("--wait-timeout", waitTimeout, "must be positive"))
			}
			var ms []coord.Member
			if wait > 0 {
				ms, err = waitForMembers(cmd.Context(), c, wait, waitTimeout)
			} else {
				ms, err = c.Members(ctx)
			}
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
	cmd.Flags().IntVar(&wait, "wait", 0, "wait until at least this many members are live before listing them (0: list at once)")
	cmd.Flags().DurationVar(&waitTimeout, "wait-timeout", time.Minute, "how long --wait waits before failing with MEMBERS.NOT_READY")
	return cmd
}

// errMembersNotReady: --wait's members did not all join in time.
var errMembersNotReady = errcode.New("MEMBERS.NOT_READY", "members: fewer members live than --wait asks for")

// waitForMembers polls etcd until at least n members are live, for at
// most limit, and returns them; after limit it fails naming who joined.
func waitForMembers(parent context.Context, c *coord.Client, n int, limit time.Duration) ([]coord.Member, error) {
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var ms []coord.Member
	for {
		got, err := c.Members(ctx)
		if err == nil {
			ms = got
			if len(ms) >= n {
				return ms, nil
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			if parent.Err() != nil {
				return nil, parent.Err()
			}
			names := make([]string, len(ms))
			for i, m := range ms {
				names[i] = m.Name
			}
			return nil, errMembersNotReady.Wrap("%d of %d member(s) live after %s: %v", len(ms), n, limit, names)
		}
	}
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
