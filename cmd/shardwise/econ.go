package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// newEconCmd is "shardwise econ": one economy node as its own process
// (econ.Host), and "econ audit", the money audit of a store.
func newEconCmd() *cobra.Command {
	var (
		etcd    etcdFlags
		host    econ.HostConfig
		verbose bool
	)
	flagOf := map[string]string{
		"HostConfig.Coord.Endpoints":   "--endpoints",
		"HostConfig.Coord.Prefix":      "--prefix",
		"HostConfig.Coord.DialTimeout": "--timeout",
		"HostConfig.Name":              "--name",
		"HostConfig.StoreURL":          "--store",
		"HostConfig.ListenAddr":        "--listen",
		"HostConfig.AdvertiseAddr":     "--advertise",
		"HostConfig.CertDir":           "--certs",
		"HostConfig.MetricsAddr":       "--metrics",
		"HostConfig.Node.TTL":          "--ttl",
		"HostConfig.Node.EpochMaxAge":  "--epoch",
		"HostConfig.Node.MaxMovements": "--max-movements",
		"HostConfig.Node.SweepBound":   "--sweep-bound",
		"HostConfig.Node.SettleLease":  "--settle-lease",
		"HostConfig.Node.ReadyWait":    "--ready-wait",
		"HostConfig.Node.CloseTimeout": "--close-timeout",
		"HostConfig.Node.EscrowBound":  "--escrow-bound",
		"HostConfig.Node.EscrowEvery":  "--escrow-every",
	}
	cmd := &cobra.Command{
		Use:   "econ",
		Short: "Run one economy node (netting sessions for the scopes it owns), found by callers through etcd",
		Long: "econ runs one economy node as its own process: it registers in etcd as --name\n" +
			"(role econ, publishing its service address), and serves the economy service\n" +
			"(gRPC, docs/protocol.md) over the shared store --store (sqlite:///PATH, which\n" +
			"the processes of one machine can share, or postgres://…). Scopes are placed on\n" +
			"the live econ members by rendezvous hashing; a caller reaching the wrong node\n" +
			"is told the owner. When members join or leave, every node settles its open\n" +
			"sessions and re-forms over the new member list, and records again once every\n" +
			"member has done the same (until then callers are answered ECON.NOT_READY and\n" +
			"retry). A node that dies leaves its open sessions to the survivors' sweep,\n" +
			"which settles them once they are idle for --sweep-bound.\n" +
			"\n" +
			"With --certs DIR (written by \"shardwise certs\", holding a certificate for\n" +
			"--name) the service uses mutual TLS: callers present a certificate of the\n" +
			"same cluster CA. Without it the service is plaintext and --listen must be a\n" +
			"loopback address. --metrics ADDR serves Prometheus metrics at\n" +
			"http://ADDR/metrics (shardwise_econ_records_total{result}, _ready,\n" +
			"_view_members, _view_changes_total, _settled_sessions_total,\n" +
			"_settle_postings_total, _settled_movements_total, _swept_orphans_total;\n" +
			"docs/metrics.md) and publishes the address in its member record, where\n" +
			"\"shardwise top\" finds it.\n" +
			"\n" +
			"It prints a ready line and, at the end (interrupt, or a lost lease: exit\n" +
			"status 1), the node's state. It stops gracefully: open sessions settled,\n" +
			"membership left, so the others re-form at once.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			out := cmd.OutOrStdout()
			host.Coord = coord.ClientConfig{Endpoints: etcd.endpoints, Prefix: etcd.prefix, DialTimeout: etcd.timeout}
			host.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			var node *econ.Node
			host.OnReady = func(r econ.HostReady) {
				node = r.Node
				fmt.Fprintf(out, "econ %s ready: serving %s (advertised %s)", r.Name, r.Addr, r.Advertised)
				if r.MetricsAddr != "" {
					fmt.Fprintf(out, ", metrics http://%s/metrics", r.MetricsAddr)
				}
				fmt.Fprintln(out)
			}
			err := econ.Host(cmd.Context(), host)
			if node != nil {
				st := node.Status()
				fmt.Fprintf(out, "econ %s stopped: last view %v, fenced %v\n", st.Name, st.View, st.Fenced)
			}
			return errcode.WithCode(errcode.RenameFields(err, flagOf))
		},
	}
	// Local, not persistent: audit and verify read a store and never etcd.
	etcd.registerLocal(cmd)
	f := cmd.Flags()
	f.StringVar(&host.Name, "name", "", "this node's member name; scopes are placed on these names (required)")
	f.StringVar(&host.StoreURL, "store", "", "the store every economy node shares: sqlite:///PATH or postgres://… (required)")
	f.StringVar(&host.ListenAddr, "listen", "127.0.0.1:0", "address the economy service listens on (port 0: any free port)")
	f.StringVar(&host.AdvertiseAddr, "advertise", "", "service address published for callers (default: the one listened on)")
	f.StringVar(&host.CertDir, "certs", "", `directory written by "shardwise certs" with a certificate for --name: mutual TLS (default: plaintext, loopback only)`)
	f.StringVar(&host.MetricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics and the probes /healthz and /readyz (default: not served)")
	f.DurationVar(&host.Node.TTL, "ttl", 0, "membership lease TTL, whole seconds: a dead node's scopes move this long after it stops (0: 10s)")
	f.DurationVar(&host.Node.EpochMaxAge, "epoch", 0, "an open session older than this is settled and replaced; rotation runs every quarter of it, the sweep every one (0: 60s)")
	f.IntVar(&host.Node.MaxMovements, "max-movements", 0, "an open session that accepted this many movements is settled and replaced (0: 512)")
	f.DurationVar(&host.Node.SweepBound, "sweep-bound", 0, "a dead node's session is settled by the sweep once idle this long; at least twice --epoch (0: twice --epoch)")
	f.DurationVar(&host.Node.SettleLease, "settle-lease", 0, "how long a settle claim keeps other settlers out if its holder dies (0: 30s)")
	f.DurationVar(&host.Node.ReadyWait, "ready-wait", 0, "how long a call waits for the node to re-form before it is answered ECON.NOT_READY (0: 5s)")
	f.DurationVar(&host.Node.CloseTimeout, "close-timeout", 0, "bound on settling the open sessions at stop (0: 30s)")
	f.DurationVar(&host.Node.EscrowBound, "escrow-bound", 0, "a trade's escrow with no end this long after its first offer (or no claims this long after its end) is decided by the economy: cancelled, or paid out (0: 30s)")
	f.DurationVar(&host.Node.EscrowEvery, "escrow-every", 0, "the escrow sweep's period; at most --escrow-bound (0: a sixth of --escrow-bound)")
	f.BoolVar(&verbose, "verbose", false, "log the node's events (views formed and ready, sweeps, settles that failed) to stderr")
	cmd.AddCommand(newEconAuditCmd())
	cmd.AddCommand(newEconVerifyCmd())
	cmd.AddCommand(newEconReconcileCmd())
	return cmd
}

// newEconAuditCmd is "shardwise econ audit": the money audit of a store.
func newEconAuditCmd() *cobra.Command {
	var (
		storeURL string
		settled  bool
		asJSON   bool
		account  string
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Print the money audit of an economy store: every accepted movement in the ledger once, balances, clearing, wallets, pending, unsettled sessions",
		Long: "audit reads the store --store (sqlite:///PATH or postgres://…) and prints the\n" +
			"money audit. It matches the journal with the ledger: every accepted movement\n" +
			"of a settled session must be in the ledger (its session's chunks, all posted\n" +
			"and none compensated, if it settled netted; its own posting mv_<session>_<seq>\n" +
			"if it settled replayed), and every settle posting must have accepted journal\n" +
			"rows behind it; each movement missing and each posting unbacked is named (a\n" +
			"breach). It prints the sum of every balance (0 in a sound ledger) and, on SQL\n" +
			"stores, of every posting entry; the netting clearing account; the wallets'\n" +
			"total and any wallet below zero; the reservations pending and the sessions\n" +
			"not settled yet; with --account NAME, that account's balance and pending.\n" +
			"--json prints all of it, every account's balance included (fields in\n" +
			"docs/protocol.md, \"The audit and verify\"). It writes nothing and may run\n" +
			"while the cluster runs. It exits with status 1 on a breach or an unsound\n" +
			"ledger, and with --settled (the cluster is stopped: everything should be\n" +
			"settled) also when the clearing account is not 0 or reservations or\n" +
			"sessions are left.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			// Not created if missing: an empty database would audit clean.
			store, err := openExistingStore(ctx, storeURL)
			if err != nil {
				return errcode.WithCode(err)
			}
			defer store.Close()
			rep, err := econ.Audit(ctx, store)
			if err != nil {
				return errcode.WithCode(err)
			}
			problems := rep.Problems(settled)
			if account != "" {
				if err := econ.CheckAccount("--account", account); err != nil && account != ledger.NettingClearing {
					return errcode.WithCode(err)
				}
			}
			if asJSON {
				err = printAuditJSON(cmd.OutOrStdout(), rep, problems, account)
			} else {
				printAudit(cmd.OutOrStdout(), rep, problems, account)
			}
			if err != nil {
				return err
			}
			if len(problems) > 0 {
				return fmt.Errorf("econ audit: %d problems", len(problems))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&storeURL, "store", "", "the economy store: sqlite:///PATH or postgres://… (required)")
	f.BoolVar(&settled, "settled", false, "the cluster is stopped: also require the clearing account at 0 and nothing pending or unsettled")
	f.BoolVar(&asJSON, "json", false, "print the audit as JSON (every account's balance included)")
	f.StringVar(&account, "account", "", "also print this account's balance and pending (with --json: list only it)")
	return cmd
}

func printAudit(w io.Writer, r econ.AuditReport, problems []string, account string) {
	fmt.Fprintf(w, "accounts          %d\n", r.Accounts)
	fmt.Fprintf(w, "sum of balances   %d\n", r.SumBalances)
	if r.HasSumEntries {
		fmt.Fprintf(w, "sum of entries    %d\n", r.SumEntries)
	}
	fmt.Fprintf(w, "clearing          %d\n", r.Clearing)
	fmt.Fprintf(w, "wallets           %d (%d below zero)\n", r.Wallets, len(r.NegativeWallets))
	var pending int64
	for _, v := range r.Pending {
		pending += v
	}
	fmt.Fprintf(w, "pending           %d accounts, net %d\n", len(r.Pending), pending)
	byNode := map[string]int{}
	for _, u := range r.Unsettled {
		byNode[u.NodeID]++
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	fmt.Fprintf(w, "unsettled         %d sessions", len(r.Unsettled))
	for _, n := range nodes {
		fmt.Fprintf(w, " %s:%d", n, byNode[n])
	}
	fmt.Fprintln(w)
	listed := ""
	if !r.SessionsListed {
		listed = ", found through postings (the store cannot list sessions)"
	}
	fmt.Fprintf(w, "sessions          %d (%d settled%s)\n", r.Sessions, r.SettledSessions, listed)
	fmt.Fprintf(w, "postings          %d (%d by settles)\n", r.Postings, r.SessionPostings)
	fmt.Fprintf(w, "missing           %d accepted movements not in the ledger\n", len(r.Missing))
	fmt.Fprintf(w, "unbacked          %d postings with no accepted movement\n", len(r.Unbacked))
	if account != "" {
		b := r.Balance(account)
		fmt.Fprintf(w, "account           %s balance %d pending %d\n", b.Account, b.Balance, b.Pending)
	}
	if len(problems) == 0 {
		fmt.Fprintln(w, "audit: ok")
		return
	}
	for _, p := range problems {
		fmt.Fprintln(w, "problem:", p)
	}
	fmt.Fprintf(w, "audit: FAILED (%d problems, %d breaches)\n", len(problems), r.Breaches())
}

// auditUnsettled is one unsettled session in "econ audit --json". Its
// field names predate the others' (kept: tools read them).
type auditUnsettled struct {
	ID, Scope, Node string
	Records         int64
	LastRecordedAt  time.Time
}

func printAuditJSON(w io.Writer, r econ.AuditReport, problems []string, account string) error {
	out := econ.NewAuditJSON(r, problems, func(u netting.UnsettledSession) auditUnsettled {
		return auditUnsettled{u.ID, u.Scope, u.NodeID, u.Records, u.LastRecordedAt}
	})
	if account != "" {
		out.Balances = []econ.AccountBalance{r.Balance(account)}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
