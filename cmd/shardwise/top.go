package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/top"
)

// newTopCmd is "shardwise top": the members' /metrics in one table,
// refreshed (package internal/top scrapes and formats; this wires flags,
// etcd and the refresh).
func newTopCmd() *cobra.Command {
	var (
		etcd   etcdFlags
		every  time.Duration
		scrape time.Duration
		once   bool
	)
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show every node's metrics (zone ticks, entities, handoffs; economy movements, netting) in one table, refreshed",
		Long: "top lists the live members in etcd, scrapes the Prometheus metrics of each one\n" +
			"that publishes a metrics address (\"shardwise zone --metrics\", \"shardwise econ\n" +
			"--metrics\": the member record's addrs metrics=HOST:PORT), and prints a table\n" +
			"every --every until interrupted, or once with --once.\n" +
			"\n" +
			"Per zone node: the last tick, entities simulated and frozen (in a handoff),\n" +
			"regions owned, render ghosts, handoffs sent/acked/adopted, the gateway's\n" +
			"sessions (\"-\" without a gateway), link frames sent/received. Per economy\n" +
			"node: ready, members in its view, movements accepted and rejected, sessions\n" +
			"settled, postings written, the netting ratio (movements settled per posting)\n" +
			"and orphans swept. A node that does not answer within --scrape-timeout is a\n" +
			"row with its error. docs/metrics.md lists every series.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if every <= 0 {
				return errcode.WithCode(errcode.Config("--every", every, "must be positive"))
			}
			if scrape <= 0 {
				return errcode.WithCode(errcode.Config("--scrape-timeout", scrape, "must be positive"))
			}
			if len(etcd.endpoints) == 0 {
				return errcode.WithCode(errcode.Config("--endpoints", "", "required: the etcd cluster to talk to (for example --endpoints http://127.0.0.1:2379)"))
			}
			if etcd.timeout <= 0 {
				return errcode.WithCode(errcode.Config("--timeout", etcd.timeout, "must be positive"))
			}
			ctx := cmd.Context()
			cl, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: etcd.endpoints, Prefix: etcd.prefix, DialTimeout: etcd.timeout})
			if err != nil {
				return errcode.WithCode(errcode.RenameFields(errcode.Indexless(err), map[string]string{
					"ClientConfig.Endpoints": "--endpoints", "ClientConfig.Prefix": "--prefix", "ClientConfig.DialTimeout": "--timeout",
				}))
			}
			defer cl.Close()
			out := cmd.OutOrStdout()
			client := &http.Client{Timeout: scrape}
			clear := isTerminal(out)
			t := time.NewTicker(every)
			defer t.Stop()
			for round := 0; ; round++ {
				snap, err := topRound(ctx, cl, client, etcd.timeout)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return errcode.WithCode(err)
				}
				switch {
				case clear:
					fmt.Fprint(out, "\x1b[H\x1b[2J") // home, clear: the table redraws in place
				case round > 0:
					fmt.Fprintln(out)
				}
				if _, err := snap.WriteTo(out); err != nil {
					return err
				}
				if once {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
				}
			}
		},
	}
	etcd.register(cmd)
	f := cmd.Flags()
	f.DurationVar(&every, "every", 2*time.Second, "refresh the table this often")
	f.DurationVar(&scrape, "scrape-timeout", 5*time.Second, "give up on a node's /metrics after this long (its row then shows the error)")
	f.BoolVar(&once, "once", false, "print one table and exit (for scripts)")
	return cmd
}

// topRound lists the members (within timeout) and scrapes them.
func topRound(ctx context.Context, cl *coord.Client, client *http.Client, timeout time.Duration) (top.Snapshot, error) {
	lctx, cancel := context.WithTimeout(ctx, timeout)
	ms, err := cl.Members(lctx)
	cancel()
	if err != nil {
		return top.Snapshot{}, err
	}
	return top.Take(ctx, client, ms, time.Now()), nil
}

// isTerminal reports whether w is a character device (a terminal), where
// top redraws in place instead of printing table after table.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
