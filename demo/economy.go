package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// EconomyConfig is the economy demo's shape. Zero fields take the defaults
// documented on them (WithDefaults).
type EconomyConfig struct {
	// Duration is how long buyers keep purchasing. Default 20s.
	Duration time.Duration
	// Nodes are the economy node names. Default econ-1, econ-2, econ-3.
	Nodes []string
	// EpochMaxAge is every node's epoch age bound. Default 2s.
	EpochMaxAge time.Duration
	// SweepBound is the sweep's bound. Default 2×EpochMaxAge, the smallest
	// the epoch-age law allows.
	SweepBound time.Duration
	// MaxMovements rotates an epoch after this many movements. Default 256.
	MaxMovements int
	// KillAfter is when one node dies mid-epoch. Default 35% of Duration.
	KillAfter time.Duration
	// Kill names the node to kill. Default: the node owning most scopes.
	Kill string
	// Scopes is the number of market scopes. Default 9.
	Scopes int
	// Buyers and Sellers are the simulated users. Defaults 400 and 60.
	Buyers, Sellers int
	// Rate caps purchases per second across all workers. Default 1500.
	Rate int
	// Workers is the number of concurrent purchasing goroutines. Default 16.
	Workers int
	// Progress is the interval of the progress line. Default 1s.
	Progress time.Duration
	// Seed drives the simulated users. Default 1.
	Seed uint64
	// Logger receives the nodes' records; default discard.
	Logger *slog.Logger
}

// WithDefaults fills the zero fields.
func (c EconomyConfig) WithDefaults() EconomyConfig {
	if c.Duration == 0 {
		c.Duration = 20 * time.Second
	}
	if len(c.Nodes) == 0 {
		c.Nodes = []string{"econ-1", "econ-2", "econ-3"}
	}
	if c.EpochMaxAge == 0 {
		c.EpochMaxAge = 2 * time.Second
	}
	if c.SweepBound == 0 {
		c.SweepBound = 2 * c.EpochMaxAge
	}
	if c.MaxMovements == 0 {
		c.MaxMovements = 256
	}
	if c.KillAfter == 0 {
		c.KillAfter = c.Duration * 35 / 100
	}
	if c.Scopes == 0 {
		c.Scopes = 9
	}
	if c.Buyers == 0 {
		c.Buyers = 400
	}
	if c.Sellers == 0 {
		c.Sellers = 60
	}
	if c.Rate == 0 {
		c.Rate = 1500
	}
	if c.Workers == 0 {
		c.Workers = 16
	}
	if c.Progress == 0 {
		c.Progress = time.Second
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate checks c after defaults. A field that a flag of "shardwise demo"
// sets is reported under that flag ("--duration"), the name the user typed;
// the others, which only tests set, under their field name.
func (c EconomyConfig) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Duration < 0:
		return errcode.Config("--duration", c.Duration, "must be positive")
	case len(c.Nodes) < 2:
		return errcode.Config("--nodes", c.Nodes, "need at least two nodes: one is killed")
	case c.EpochMaxAge < 0:
		return errcode.Config("--epoch", c.EpochMaxAge, "must be positive")
	case c.SweepBound < 2*c.EpochMaxAge:
		return errcode.Config("SweepBound", c.SweepBound, "must be at least 2 x --epoch (the epoch-age law)")
	case c.MaxMovements < 0:
		return errcode.Config("MaxMovements", c.MaxMovements, "must be positive")
	case c.KillAfter < 0 || c.KillAfter >= c.Duration:
		return errcode.Config("KillAfter", c.KillAfter, "must be inside --duration")
	case c.Scopes < 1:
		return errcode.Config("--markets", c.Scopes, "must be at least 1")
	case c.Buyers < 1:
		return errcode.Config("Buyers", c.Buyers, "must be at least 1")
	case c.Sellers < 1:
		return errcode.Config("Sellers", c.Sellers, "must be at least 1")
	case c.Rate < 1:
		return errcode.Config("--rate", c.Rate, "must be at least 1")
	case c.Workers < 1:
		return errcode.Config("Workers", c.Workers, "must be at least 1")
	case c.Progress < 0:
		return errcode.Config("Progress", c.Progress, "must be positive")
	}
	// Checked here so that the error names --nodes.
	for i, n := range c.Nodes {
		if n == "" {
			return errcode.Config("--nodes", c.Nodes, "contains an empty node id")
		}
		if slices.Contains(c.Nodes[:i], n) {
			return errcode.Config("--nodes", c.Nodes, "lists "+strconv.Quote(n)+" twice")
		}
	}
	if c.Kill != "" && !slices.Contains(c.Nodes, c.Kill) {
		return errcode.Config("--kill", c.Kill, "is not one of --nodes")
	}
	return nil
}

// EconomyReport is what the economy demo found. OK is false when an
// invariant failed; Failures says which.
type EconomyReport struct {
	Accepted, Rejected, Errors int64
	// SettlePostings is the postings this run's settles wrote (funding
	// excluded); NettingRatio is Accepted / SettlePostings.
	SettlePostings  int64
	FundingPostings int64
	NettingRatio    float64
	// Audit is the money audit of the store after the run.
	Audit econ.AuditReport
	// Ledger is what netting.VerifyLedger proved of the posting chain
	// (LedgerErr the break it found instead, if any).
	Ledger    netting.LedgerProof
	LedgerErr error

	Killed string
	// Orphans are the killed node's journaled, unsettled sessions at the
	// moment it died; OrphansSettled how many of them the survivors' sweep
	// had settled by the end. OrphansSettledAfter is the time from the kill
	// until the last of them was seen settled. YoungestSweptAge is the
	// smallest idle age (the store's clock at the moment a settle was seen,
	// minus the orphan's last journal row) of an orphan seen settled: the
	// orphans are watched every eighth of an epoch, so it exceeds the age at
	// which the sweep settled it by at most that.
	Orphans             int
	OrphansSettled      int
	OrphansSettledAfter time.Duration
	YoungestSweptAge    time.Duration

	Elapsed  time.Duration
	Failures []string
}

// OK reports whether every invariant held.
func (r EconomyReport) OK() bool { return len(r.Failures) == 0 }

// economyDemo is one run. Its goroutines are all started and joined by run.
type economyDemo struct {
	cfg   EconomyConfig
	store *sqlstore.Store
	log   *slog.Logger
	out   io.Writer
	runID string

	etcd   *coord.Embedded
	prefix string
	ec     *econCluster
	watch  *orphanWatch
	killed string

	accepted, rejected, errs atomic.Int64
}

// RunEconomy runs the economy demo on store: an embedded etcd, the nodes
// (econ.Node, each serving the economy service on loopback gRPC), buyers
// purchasing through the econ client for Duration, one node halted mid-epoch
// and its orphans swept by the survivors. It returns the report; the error
// is for failures to run at all, invariant failures are in the report.
func RunEconomy(ctx context.Context, cfg EconomyConfig, store *sqlstore.Store, out io.Writer) (EconomyReport, error) {
	if err := cfg.Validate(); err != nil {
		return EconomyReport{}, err
	}
	cfg = cfg.WithDefaults()
	runID := strconv.FormatInt(time.Now().UnixNano(), 36)
	d := &economyDemo{
		cfg: cfg, store: store, log: cfg.Logger, out: out, runID: runID,
		prefix: "/shardwise-demo/" + runID + "/",
	}
	return d.run(ctx)
}

func (d *economyDemo) scope(i int) string  { return fmt.Sprintf("market-%02d", i+1) }
func (d *economyDemo) buyer(i int) string  { return fmt.Sprintf("buyer-%03d", i) }
func (d *economyDemo) seller(i int) string { return fmt.Sprintf("seller-%03d", i) }

// startCluster starts the embedded etcd and the economy cluster.
func (d *economyDemo) startCluster(ctx context.Context, etcdDir string) error {
	e, err := startEtcd(ctx, etcdDir)
	if err != nil {
		return err
	}
	d.etcd = e
	d.ec, err = startEcon(ctx, e.Endpoints(), d.prefix, d.store, d.cfg.Nodes,
		econOptions{EpochMaxAge: d.cfg.EpochMaxAge, SweepBound: d.cfg.SweepBound, MaxMovements: d.cfg.MaxMovements}, d.log)
	if err != nil {
		return err
	}
	d.watch = newOrphanWatch(d.ec, d.out, d.cfg.EpochMaxAge)
	return nil
}

// stopCluster stops everything startCluster started.
func (d *economyDemo) stopCluster() error {
	var errs []error
	if d.ec != nil {
		errs = append(errs, d.ec.stop())
	}
	if d.etcd != nil {
		errs = append(errs, d.etcd.Close())
	}
	return errors.Join(errs...)
}

func (d *economyDemo) run(ctx context.Context) (EconomyReport, error) {
	postingsBefore, err := d.store.PostingCount(ctx)
	if err != nil {
		return EconomyReport{}, err
	}
	funding, err := d.fund(ctx)
	if err != nil {
		return EconomyReport{}, err
	}
	etcdDir, err := os.MkdirTemp("", "shardwise-demo-etcd-")
	if err != nil {
		return EconomyReport{}, err
	}
	defer os.RemoveAll(etcdDir)
	defer func() {
		if err := d.stopCluster(); err != nil && ctx.Err() == nil {
			fmt.Fprintf(d.out, "warning: stopping the cluster: %v\n", err)
		}
	}()
	if err := d.startCluster(ctx, etcdDir); err != nil {
		return EconomyReport{}, err
	}
	d.killed = d.cfg.Kill
	if d.killed == "" {
		d.killed = d.busiestNode()
	}

	start := time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, d.cfg.Duration)
	defer stopLoad()
	bgCtx, stopBackground := context.WithCancel(ctx)
	var load, background sync.WaitGroup
	limiter := rate.NewLimiter(rate.Limit(d.cfg.Rate), max(1, d.cfg.Rate/20))
	for w := range d.cfg.Workers {
		load.Go(func() { d.purchaser(ctx, loadCtx, limiter, w) })
	}
	background.Go(func() { d.progress(bgCtx, start) })
	background.Go(func() { d.watch.watch(bgCtx, d.log) })

	killErr := d.killAt(ctx, loadCtx, start.Add(d.cfg.KillAfter))
	load.Wait()
	stopLoad()
	// The survivors' sweep settles the dead node's epochs once they are
	// idle past the bound; wait for it (generously) before stopping.
	endErr := d.watch.wait(ctx, 3*d.cfg.SweepBound+5*time.Second)
	stopBackground()
	background.Wait()
	closeErr := d.ec.closeExcept(d.watch.counts().Killed) // "" if the kill failed before the halt
	if err := errors.Join(killErr, endErr, closeErr); err != nil && ctx.Err() == nil {
		// Not fatal by itself: the report says whether money and work were
		// left in a bad state.
		fmt.Fprintf(d.out, "warning: %v\n", err)
	}
	if ctx.Err() != nil {
		return EconomyReport{}, ctx.Err()
	}
	rep, err := d.report(ctx, postingsBefore, funding)
	if err != nil {
		return EconomyReport{}, err
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// busiestNode is the node owning the most scopes (ties by name), so the kill
// always leaves orphans to sweep.
func (d *economyDemo) busiestNode() string {
	owner, _ := netting.ScopeRouter(d.cfg.Nodes) // validated names
	count := map[string]int{}
	for i := range d.cfg.Scopes {
		count[owner(d.scope(i))]++
	}
	best := d.cfg.Nodes[0]
	for _, n := range d.cfg.Nodes {
		if count[n] > count[best] || (count[n] == count[best] && n < best) {
			best = n
		}
	}
	return best
}

// fund credits every buyer a random amount from platform revenue, as
// ordinary ledger postings with per-run ids.
func (d *economyDemo) fund(ctx context.Context) (int64, error) {
	rng := rand.New(rand.NewPCG(d.cfg.Seed, 0x5eed))
	for i := range d.cfg.Buyers {
		amount := 200 + rng.Int64N(4800)
		p := ledger.Posting{
			ID:   "fund-" + d.runID + "-" + d.buyer(i),
			Legs: []ledger.Leg{ledger.Credit(ledger.Spendable(d.buyer(i)), amount), ledger.Debit(ledger.Revenue, amount)},
			Meta: map[string]string{"kind": "funding"},
		}
		if err := d.store.Post(ctx, p); err != nil {
			return 0, fmt.Errorf("demo: fund %s: %w", d.buyer(i), err)
		}
	}
	return int64(d.cfg.Buyers), nil
}

// purchaser records purchases until load ends: a random buyer pays a random
// seller in a random market, through the econ client (which routes to the
// market's owner and follows misroutes). An outcome the client could not
// learn is asked again with the same key until it is known: the key makes
// the retry safe. Each Record runs under ctx, not load: the end of the load
// must not cut a Record in half.
func (d *economyDemo) purchaser(ctx, load context.Context, limiter *rate.Limiter, w int) {
	rng := rand.New(rand.NewPCG(d.cfg.Seed, uint64(w)+1))
	for n := 0; ; n++ {
		if err := limiter.Wait(load); err != nil {
			return
		}
		scope := d.scope(rng.IntN(d.cfg.Scopes))
		buyer, seller := d.buyer(rng.IntN(d.cfg.Buyers)), d.seller(rng.IntN(d.cfg.Sellers))
		amount := 1 + rng.Int64N(60)
		m := netting.Movement{
			Key:  fmt.Sprintf("buy-%s-%d-%d", d.runID, w, n),
			Legs: []ledger.Leg{ledger.Debit(ledger.Spendable(buyer), amount), ledger.Credit(ledger.Earned(seller), amount)},
		}
		out, err := d.ec.client.Record(ctx, scope, m)
		for err != nil && (errors.Is(err, econ.ErrOutcomeUnknown) || errors.Is(err, econ.ErrNotReady)) && ctx.Err() == nil {
			out, err = d.ec.client.Record(ctx, scope, m)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			d.errs.Add(1)
			d.log.Warn("demo: record failed", "scope", scope, "key", m.Key, "code", errcode.Of(err), "err", err)
		case out.Status == netting.Accepted:
			d.accepted.Add(1)
		default:
			d.rejected.Add(1)
		}
	}
}

// killAt kills the chosen node at the given time (orphanWatch.kill).
func (d *economyDemo) killAt(ctx, load context.Context, at time.Time) error {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-load.Done():
		return nil
	case <-t.C:
	}
	if err := d.watch.kill(ctx, load, d.killed); err != nil {
		return err
	}
	var survivors []string
	for _, n := range d.cfg.Nodes {
		if n != d.killed {
			survivors = append(survivors, n)
		}
	}
	fmt.Fprintf(d.out, "killed %s with %d open epochs; %s re-form and serve every scope\n", d.killed, d.watch.counts().Orphans, strings.Join(survivors, " and "))
	return nil
}

func (d *economyDemo) progress(ctx context.Context, start time.Time) {
	every(ctx, d.cfg.Progress, func() {
		o := d.watch.counts()
		fmt.Fprintf(d.out, "[%5.1fs] nodes ready=%d accepted=%d rejected=%d errors=%d orphans settled=%d/%d\n",
			time.Since(start).Seconds(), d.ec.ready(), d.accepted.Load(), d.rejected.Load(), d.errs.Load(), o.Settled, o.Orphans)
	})
}

// report checks the invariants with econ's money audit and the run's
// counts.
func (d *economyDemo) report(ctx context.Context, postingsBefore, funding int64) (EconomyReport, error) {
	r := EconomyReport{Accepted: d.accepted.Load(), Rejected: d.rejected.Load(), Errors: d.errs.Load(), FundingPostings: funding, Killed: d.killed}
	after, err := d.store.PostingCount(ctx)
	if err != nil {
		return r, err
	}
	r.SettlePostings = after - postingsBefore - funding
	if r.SettlePostings > 0 {
		r.NettingRatio = float64(r.Accepted) / float64(r.SettlePostings)
	}
	if r.Audit, err = econ.Audit(ctx, d.store); err != nil {
		return r, err
	}
	r.Ledger, r.LedgerErr = netting.VerifyLedger(ctx, d.store)
	var broken *netting.LedgerChainBrokenError
	if r.LedgerErr != nil && !errors.As(r.LedgerErr, &broken) {
		return r, r.LedgerErr
	}
	o := d.watch.counts()
	r.Orphans, r.OrphansSettled, r.OrphansSettledAfter, r.YoungestSweptAge = o.Orphans, o.Settled, o.SettledAfter, o.YoungestSweptAge

	r.Failures = append(r.Failures, r.Audit.Problems(true)...)
	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
	if r.LedgerErr != nil {
		fail("the ledger does not prove itself: %v", r.LedgerErr)
	}
	if r.Errors > 0 {
		fail("%d movements failed with an error", r.Errors)
	}
	if r.OrphansSettled != r.Orphans {
		fail("the sweep settled %d of the killed node's %d orphans", r.OrphansSettled, r.Orphans)
	}
	if r.Accepted > 0 && r.SettlePostings == 0 {
		fail("%d movements accepted but no settle postings written", r.Accepted)
	}
	return r, nil
}

// Print writes the report for a person.
func (r EconomyReport) Print(w io.Writer) {
	a := r.Audit
	fmt.Fprintf(w, "\neconomy demo report (%s)\n", r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  movements accepted        %d\n", r.Accepted)
	fmt.Fprintf(w, "  movements rejected        %d (INSUFFICIENT_FUNDS)\n", r.Rejected)
	fmt.Fprintf(w, "  record errors             %d\n", r.Errors)
	fmt.Fprintf(w, "  settle postings written   %d (plus %d funding postings)\n", r.SettlePostings, r.FundingPostings)
	fmt.Fprintf(w, "  netting ratio             %.1f movements per posting\n", r.NettingRatio)
	fmt.Fprintf(w, "  sum of balances           %d\n", a.SumBalances)
	if a.HasSumEntries {
		fmt.Fprintf(w, "  sum of entries            %d\n", a.SumEntries)
	}
	fmt.Fprintf(w, "  clearing account          %d\n", a.Clearing)
	if r.LedgerErr == nil {
		fmt.Fprintf(w, "  ledger chain              %d postings proved, %d balances checked\n", r.Ledger.Head.Len, r.Ledger.Accounts)
	}
	fmt.Fprintf(w, "  wallets below zero        %d\n", len(a.NegativeWallets))
	fmt.Fprintf(w, "  reservations pending      %d accounts\n", len(a.Pending))
	fmt.Fprintf(w, "  sessions unsettled        %d\n", len(a.Unsettled))
	fmt.Fprintf(w, "  killed node               %s\n", r.Killed)
	fmt.Fprintf(w, "  orphans found / settled   %d / %d (the youngest seen settled %s idle; the last %s after the kill)\n", r.Orphans, r.OrphansSettled, r.YoungestSweptAge.Round(time.Millisecond), r.OrphansSettledAfter.Round(time.Millisecond))
	if r.OK() {
		fmt.Fprintf(w, "  money conserved           yes\n")
		return
	}
	fmt.Fprintf(w, "  INVARIANTS FAILED:\n")
	for _, f := range r.Failures {
		fmt.Fprintf(w, "    - %s\n", f)
	}
}
