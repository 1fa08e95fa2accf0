package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/netting"
)

// errNotQuiesced refuses "econ reconcile" while economy nodes are live: a
// node recording or settling races the rebuild of the counters.
var errNotQuiesced = errcode.New("ECON.NOT_QUIESCED", "econ reconcile: economy members are live in etcd")

// newEconReconcileCmd is "shardwise econ reconcile": the manual repair of
// the shared reservation counters (netting.ReconcileReservations).
func newEconReconcileCmd() *cobra.Command {
	var (
		etcd     etcdFlags
		storeURL string
		dryRun   bool
	)
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Rebuild an economy store's reservation counters from its journals, on a stopped cluster",
		Long: "reconcile rebuilds the shared reservation counters of the store --store\n" +
			"(sqlite:///PATH or postgres://…) from the journals of the sessions not yet\n" +
			"settled, less what a half-settled session's postings already released: the\n" +
			"seed's one deliberately manual repair (netting.ReconcileReservations). Run it\n" +
			"when \"shardwise econ audit\" shows reservations pending that no unsettled\n" +
			"session explains, or after restoring a store from a backup taken apart from\n" +
			"its counters (docs/operators.md).\n" +
			"\n" +
			"The cluster must be quiesced: it refuses (ECON.NOT_QUIESCED, naming them)\n" +
			"while any economy member is live in the etcd of --endpoints, since a node\n" +
			"recording or settling would race the rebuild. It prints every counter it\n" +
			"changes, account by account, what it held and what it holds now;\n" +
			"--dry-run prints the same and writes nothing.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if storeURL == "" {
				return errcode.WithCode(errcode.Config("--store", storeURL, "required: sqlite:///PATH or postgres://…"))
			}
			if err := quiesced(cmd, &etcd); err != nil {
				return errcode.WithCode(err)
			}
			ctx := cmd.Context()
			store, err := openExistingStore(ctx, storeURL)
			if err != nil {
				return errcode.WithCode(err)
			}
			defer store.Close()
			var res netting.ReconcileResult
			if dryRun {
				res, err = netting.PlanReconcile(ctx, store)
			} else {
				res, err = netting.ReconcileReservations(ctx, store)
			}
			if err != nil {
				return errcode.WithCode(err)
			}
			printReconcile(cmd.OutOrStdout(), res, dryRun)
			return nil
		},
	}
	etcd.registerLocal(cmd)
	f := cmd.Flags()
	f.StringVar(&storeURL, "store", "", "the economy store: sqlite:///PATH or postgres://… (required)")
	f.BoolVar(&dryRun, "dry-run", false, "print what would change and write nothing")
	return cmd
}

// quiesced connects to etcd and refuses while an economy member is live.
func quiesced(cmd *cobra.Command, etcd *etcdFlags) error {
	ctx, cancel, c, err := etcd.connect(cmd.Context())
	if err != nil {
		return err
	}
	defer cancel()
	defer c.Close()
	members, err := c.Members(ctx)
	if err != nil {
		return err
	}
	var live []string
	for _, m := range members {
		if m.Role == econ.Role {
			live = append(live, fmt.Sprintf("%s (node %d)", m.Name, m.ID))
		}
	}
	if len(live) > 0 {
		return errNotQuiesced.Wrap("%s; stop every economy node first (the cluster must be quiesced: no node recording or settling), then run it again",
			strings.Join(live, ", "))
	}
	return nil
}

func printReconcile(w io.Writer, r netting.ReconcileResult, dryRun bool) {
	for _, c := range r.Changes {
		fmt.Fprintf(w, "%-32s debits %d credits %d -> debits %d credits %d\n", c.Account, c.Was.Debits, c.Was.Credits, c.Now.Debits, c.Now.Credits)
	}
	switch {
	case dryRun:
		fmt.Fprintf(w, "reconcile (dry run, nothing written): %d counter(s) to set, %d account(s) pending after\n", len(r.Changes), r.Accounts)
	case len(r.Changes) == 0 && r.Adjusted == 0:
		fmt.Fprintf(w, "reconcile: every counter already right, %d account(s) pending\n", r.Accounts)
	default:
		fmt.Fprintf(w, "reconcile: %d counter(s) set, %d account(s) pending\n", r.Adjusted, r.Accounts)
	}
}
