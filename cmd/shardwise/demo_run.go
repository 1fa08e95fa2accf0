package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// demoConfig is the economy demo's shape. Zero fields take the defaults
// documented on them (filled in by withDefaults only).
type demoConfig struct {
	// Duration is how long buyers keep purchasing. Default 20s.
	Duration time.Duration
	// Nodes are the economy node ids. Default econ-1, econ-2, econ-3.
	Nodes []string
	// EpochMaxAge is every node's epoch age bound. Default 2s.
	EpochMaxAge time.Duration
	// SweepBound is the sweep's SettleOlderThan. Default 2×EpochMaxAge, the
	// smallest the epoch-age law allows.
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
}

func (c demoConfig) withDefaults() demoConfig {
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
	return c
}

// Validate checks c after defaults. A field that a flag of "shardwise demo"
// sets is reported under that flag ("--duration"), the name the user typed;
// the others, which only tests set, under their field name.
func (c demoConfig) Validate() error {
	c = c.withDefaults()
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
	// The node list is netting's too, but checked here so that the error
	// names --nodes, not netting.Config's Nodes.
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

// demoReport is what the demo found. OK is false when a money invariant
// failed; Failures says which.
type demoReport struct {
	Accepted, Rejected, Errors int64
	// SettlePostings is the postings this run's settles wrote (funding
	// excluded); NettingRatio is Accepted / SettlePostings.
	SettlePostings  int64
	FundingPostings int64
	NettingRatio    float64

	SumBalances int64 // SELECT SUM(balance): must be 0
	SumEntries  int64 // SELECT SUM(amount) over every entry: must be 0
	Clearing    int64 // platform:netting_clearing: must be 0
	// NegativeWallets lists wallet accounts below zero (must be none).
	NegativeWallets []string
	// PendingLeft is every nonzero reservation counter after the end (must
	// be none).
	PendingLeft map[string]int64
	// Unsettled counts sessions with journaled movements still unsettled at
	// the end (must be 0).
	Unsettled int

	Killed string
	// Orphans are the killed node's journaled, unsettled sessions at the
	// moment it died; OrphansSettled how many of them the survivors' sweep
	// settled. MaxOrphanAge is the oldest age the sweep saw before settling.
	Orphans        int
	OrphansSettled int
	MaxOrphanAge   time.Duration
	// SweepSettled counts every session a sweep settled.
	SweepSettled int

	Elapsed  time.Duration
	Failures []string
}

// OK reports whether every invariant held.
func (r demoReport) OK() bool { return len(r.Failures) == 0 }

// clusterView is the routing every worker uses: the live nodes and the
// scope router over their ids. It is replaced whole when membership changes.
type clusterView struct {
	owner func(string) string
	nodes map[string]*netting.ClusterNode
}

// economyDemo is one run. Its goroutines are all started and joined by run.
type economyDemo struct {
	cfg   demoConfig
	store *sqlstore.Store
	log   *slog.Logger
	out   io.Writer
	runID string

	view atomic.Pointer[clusterView]
	// viewMu is held shared by each rotator and sweeper pass and
	// exclusively by the kill's view swap: after the swap no background
	// pass can still be working on the dead node (a rotation there would
	// settle an epoch that must be left to the sweep).
	viewMu sync.RWMutex
	// recordGate is held shared by every Record call and exclusively by the
	// kill, so the dead node has no call in flight (a Record there could
	// still rotate, and so settle, an epoch) once it is declared dead.
	recordGate sync.RWMutex

	accepted, rejected, errs atomic.Int64

	mu           sync.Mutex
	orphans      map[string]bool // the killed node's unsettled sessions
	orphanDone   map[string]bool // ... that a sweep settled
	maxOrphanAge time.Duration
	sweepSettled map[string]bool
	killed       string
}

// runDemo runs the economy demo on store and returns its report. The error
// is for failures to run at all; invariant failures are in the report.
func runDemo(ctx context.Context, cfg demoConfig, store *sqlstore.Store, out io.Writer, log *slog.Logger) (demoReport, error) {
	if err := cfg.Validate(); err != nil {
		return demoReport{}, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &economyDemo{
		cfg: cfg, store: store, log: log, out: out,
		runID:        strconv.FormatInt(time.Now().UnixNano(), 36),
		orphans:      map[string]bool{},
		orphanDone:   map[string]bool{},
		sweepSettled: map[string]bool{},
	}
	return d.run(ctx)
}

func (d *economyDemo) scope(i int) string { return fmt.Sprintf("market-%02d", i+1) }

func (d *economyDemo) buyer(i int) string  { return fmt.Sprintf("buyer-%03d", i) }
func (d *economyDemo) seller(i int) string { return fmt.Sprintf("seller-%03d", i) }

func (d *economyDemo) openNodes(ids []string, all []string) (map[string]*netting.ClusterNode, error) {
	nodes := map[string]*netting.ClusterNode{}
	for _, id := range ids {
		n, err := netting.OpenClusterNode(d.store, netting.ClusterConfig{
			NodeID:       id,
			Nodes:        all,
			EpochMaxAge:  d.cfg.EpochMaxAge,
			MaxMovements: d.cfg.MaxMovements,
			Sweep:        &netting.SweepConfig{SettleOlderThan: d.cfg.SweepBound},
			// A settle cut short (a killed node, the end of the run) holds
			// its claim this long; the sweep can finish it afterwards.
			SettleLease: d.cfg.EpochMaxAge,
			Logger:      d.log,
		})
		if err != nil {
			return nil, err
		}
		nodes[id] = n
	}
	return nodes, nil
}

func (d *economyDemo) run(ctx context.Context) (demoReport, error) {
	postingsBefore, err := d.store.PostingCount(ctx)
	if err != nil {
		return demoReport{}, err
	}
	funding, err := d.fund(ctx)
	if err != nil {
		return demoReport{}, err
	}
	owner, err := netting.ScopeRouter(d.cfg.Nodes)
	if err != nil {
		return demoReport{}, err
	}
	nodes, err := d.openNodes(d.cfg.Nodes, d.cfg.Nodes)
	if err != nil {
		return demoReport{}, err
	}
	d.view.Store(&clusterView{owner: owner, nodes: nodes})
	d.killed = d.cfg.Kill
	if d.killed == "" {
		d.killed = d.busiestNode(owner)
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
	background.Go(func() { d.rotator(bgCtx) })
	background.Go(func() { d.sweeper(bgCtx) })
	background.Go(func() { d.progress(bgCtx, start) })

	killErr := d.killAt(ctx, loadCtx, start.Add(d.cfg.KillAfter))
	load.Wait()
	stopLoad()

	// Graceful end for the survivors; then keep sweeping until the dead
	// node's epochs are settled (they become eligible SweepBound after their
	// last row) or a generous deadline passes.
	var endErr error
	for _, n := range d.view.Load().nodes {
		if _, err := n.SettleAll(ctx); err != nil {
			endErr = errors.Join(endErr, err)
		}
	}
	endErr = errors.Join(endErr, d.waitSettled(ctx, 3*d.cfg.SweepBound+5*time.Second))
	stopBackground()
	background.Wait()
	for _, n := range d.view.Load().nodes {
		n.Close()
	}
	if err := errors.Join(killErr, endErr); err != nil && ctx.Err() == nil {
		// Not fatal by itself: the report's queries say whether money and
		// work were left in a bad state.
		fmt.Fprintf(d.out, "warning: %v\n", err)
	}
	if ctx.Err() != nil {
		return demoReport{}, ctx.Err()
	}
	rep, err := d.report(ctx, postingsBefore, funding)
	if err != nil {
		return demoReport{}, err
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// busiestNode is the node owning the most scopes (ties by id), so the kill
// always leaves orphans to sweep.
func (d *economyDemo) busiestNode(owner func(string) string) string {
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
// seller in a random market, routed to the market's owner. Each Record runs
// under ctx, not load: the end of the load must not cut a Record (or the
// epoch rotation it triggers) in half.
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
		out, err := d.record(ctx, scope, m)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			d.errs.Add(1)
			d.log.Warn("demo: record failed", "scope", scope, "key", m.Key, "code", netting.Code(err), "err", err)
		case out.Status == netting.Accepted:
			d.accepted.Add(1)
		default:
			d.rejected.Add(1)
		}
	}
}

// record routes m to the scope's owner in the current view, following a
// view change (a closed or misrouted node) a few times.
func (d *economyDemo) record(ctx context.Context, scope string, m netting.Movement) (netting.Outcome, error) {
	d.recordGate.RLock()
	defer d.recordGate.RUnlock()
	var lastErr error
	for range 4 {
		v := d.view.Load()
		n := v.nodes[v.owner(scope)]
		out, err := n.Record(ctx, scope, m)
		if err == nil || !(errors.Is(err, netting.ErrClosed) || errors.Is(err, netting.ErrMisrouted) || errors.Is(err, netting.ErrSessionSettled)) {
			return out, err
		}
		lastErr = err
	}
	return netting.Outcome{}, lastErr
}

// killAt kills one node at the given time: it is dropped with its epochs
// open and unsettled, as in a crash. The survivors then reopen with the
// smaller node list; rendezvous moves only the dead node's scopes, and the
// survivors hand their own open epochs over by settling them.
func (d *economyDemo) killAt(ctx, load context.Context, at time.Time) error {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-load.Done():
		return nil
	case <-t.C:
	}
	old := d.view.Load()
	var survivors []string
	for _, id := range d.cfg.Nodes {
		if id != d.killed {
			survivors = append(survivors, id)
		}
	}
	owner, err := netting.ScopeRouter(survivors)
	if err != nil {
		return err
	}
	nodes, err := d.openNodes(survivors, survivors)
	if err != nil {
		return err
	}
	// Die mid-epoch: wait (briefly, polling) until the victim has an open
	// epoch with journaled movements. The check, the view swap and the death
	// happen with every Record and every rotation or sweep pass paused, so
	// the orphans counted are exactly what the dead node leaves behind.
	for {
		d.recordGate.Lock()
		d.viewMu.Lock()
		list, err := d.store.ListUnsettled(ctx, 0)
		var open []string
		for _, u := range list {
			if u.NodeID == d.killed {
				open = append(open, u.ID)
			}
		}
		if err == nil && (len(open) > 0 || load.Err() != nil) {
			d.view.Store(&clusterView{owner: owner, nodes: nodes})
			old.nodes[d.killed].Close() // no SettleAll: its open epochs are now orphans
			d.mu.Lock()
			for _, id := range open {
				d.orphans[id] = true
			}
			d.mu.Unlock()
		}
		d.viewMu.Unlock()
		d.recordGate.Unlock()
		if err != nil {
			return err
		}
		if d.view.Load().nodes[d.killed] == nil {
			break
		}
		wait := time.NewTimer(10 * time.Millisecond)
		select {
		case <-load.Done():
		case <-wait.C:
		}
		wait.Stop()
	}
	fmt.Fprintf(d.out, "killed %s with %d open epochs; %s now serve every scope\n", d.killed, len(d.orphans), strings.Join(survivors, " and "))
	var errs error
	for _, id := range survivors {
		prev := old.nodes[id]
		prev.Close()
		if _, err := prev.SettleAll(ctx); err != nil {
			errs = errors.Join(errs, err)
		}
	}
	return errs
}

// rotator settles due epochs on every live node, so idle scopes rotate too.
func (d *economyDemo) rotator(ctx context.Context) {
	d.everyLiveNode(ctx, func(n *netting.ClusterNode) {
		if _, err := n.RotateDue(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("demo: rotate", "node", n.NodeID(), "err", err)
		}
	})
}

// sweeper runs every live node's orphan sweep.
func (d *economyDemo) sweeper(ctx context.Context) {
	d.everyLiveNode(ctx, func(n *netting.ClusterNode) { d.sweepOnce(ctx, n) })
}

// everyLiveNode calls each for every live node, a quarter of an epoch apart,
// until ctx ends. It holds viewMu shared for a whole pass.
func (d *economyDemo) everyLiveNode(ctx context.Context, each func(*netting.ClusterNode)) {
	t := time.NewTicker(max(d.cfg.EpochMaxAge/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.viewMu.RLock()
		for _, n := range d.view.Load().nodes {
			each(n)
		}
		d.viewMu.RUnlock()
	}
}

func (d *economyDemo) sweepOnce(ctx context.Context, n *netting.ClusterNode) {
	sum, err := n.SweepOrphans(ctx, netting.SweepOptions{})
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("demo: sweep", "node", n.NodeID(), "err", err)
		}
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ages := map[string]time.Duration{}
	for _, o := range sum.Orphans {
		ages[o.SessionID] = o.Age
	}
	for _, s := range sum.Settled {
		d.sweepSettled[s.SessionID] = true
		if d.orphans[s.SessionID] && !d.orphanDone[s.SessionID] {
			d.orphanDone[s.SessionID] = true
			d.maxOrphanAge = max(d.maxOrphanAge, ages[s.SessionID])
			fmt.Fprintf(d.out, "swept %s (%s) after %s idle, settled %s\n", s.SessionID, d.killed, ages[s.SessionID].Round(time.Millisecond), s.Mode)
		}
	}
}

// waitSettled sweeps until no session is left unsettled, or until limit.
func (d *economyDemo) waitSettled(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		list, err := d.store.ListUnsettled(ctx, 0)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: %d sessions still unsettled after %s", len(list), limit)
		}
		for _, n := range d.view.Load().nodes {
			d.sweepOnce(ctx, n)
		}
		t := time.NewTimer(d.cfg.EpochMaxAge / 4)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (d *economyDemo) progress(ctx context.Context, start time.Time) {
	if d.cfg.Progress <= 0 {
		return
	}
	t := time.NewTicker(d.cfg.Progress)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v := d.view.Load()
		d.mu.Lock()
		swept, orphans, done := len(d.sweepSettled), len(d.orphans), len(d.orphanDone)
		d.mu.Unlock()
		fmt.Fprintf(d.out, "[%5.1fs] nodes=%d accepted=%d rejected=%d errors=%d swept=%d orphans settled=%d/%d\n",
			time.Since(start).Seconds(), len(v.nodes), d.accepted.Load(), d.rejected.Load(), d.errs.Load(), swept, done, orphans)
	}
}

// report checks the money invariants with queries against the store.
func (d *economyDemo) report(ctx context.Context, postingsBefore, funding int64) (demoReport, error) {
	r := demoReport{Accepted: d.accepted.Load(), Rejected: d.rejected.Load(), Errors: d.errs.Load(), FundingPostings: funding, Killed: d.killed}
	after, err := d.store.PostingCount(ctx)
	if err != nil {
		return r, err
	}
	r.SettlePostings = after - postingsBefore - funding
	if r.SettlePostings > 0 {
		r.NettingRatio = float64(r.Accepted) / float64(r.SettlePostings)
	}
	if r.SumBalances, err = d.store.SumBalances(ctx); err != nil {
		return r, err
	}
	if r.SumEntries, err = d.store.SumEntries(ctx); err != nil {
		return r, err
	}
	if r.Clearing, err = d.store.Balance(ctx, ledger.NettingClearing); err != nil {
		return r, err
	}
	balances, err := d.store.Balances(ctx)
	if err != nil {
		return r, err
	}
	for a, b := range balances {
		if b < 0 && ledger.IsWallet(a) {
			r.NegativeWallets = append(r.NegativeWallets, a)
		}
	}
	sort.Strings(r.NegativeWallets)
	if r.PendingLeft, err = d.store.PendingAll(ctx); err != nil {
		return r, err
	}
	unsettled, err := d.store.ListUnsettled(ctx, 0)
	if err != nil {
		return r, err
	}
	r.Unsettled = len(unsettled)
	d.mu.Lock()
	r.Orphans, r.OrphansSettled, r.MaxOrphanAge, r.SweepSettled = len(d.orphans), len(d.orphanDone), d.maxOrphanAge, len(d.sweepSettled)
	d.mu.Unlock()

	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
	if r.SumBalances != 0 {
		fail("sum of balances is %d, not 0", r.SumBalances)
	}
	if r.SumEntries != 0 {
		fail("sum of entries is %d, not 0", r.SumEntries)
	}
	if r.Clearing != 0 {
		fail("%s ends at %d, not 0", ledger.NettingClearing, r.Clearing)
	}
	if len(r.NegativeWallets) > 0 {
		fail("wallets below zero: %v", r.NegativeWallets)
	}
	if len(r.PendingLeft) > 0 {
		fail("reservations left pending: %v", r.PendingLeft)
	}
	if r.Unsettled > 0 {
		fail("%d sessions left unsettled", r.Unsettled)
	}
	if r.OrphansSettled != r.Orphans {
		fail("the sweep settled %d of the killed node's %d orphans", r.OrphansSettled, r.Orphans)
	}
	if r.Accepted > 0 && r.SettlePostings == 0 {
		fail("%d movements accepted but no settle postings written", r.Accepted)
	}
	return r, nil
}

func printDemoReport(w io.Writer, r demoReport) {
	fmt.Fprintf(w, "\neconomy demo report (%s)\n", r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  movements accepted        %d\n", r.Accepted)
	fmt.Fprintf(w, "  movements rejected        %d (INSUFFICIENT_FUNDS)\n", r.Rejected)
	fmt.Fprintf(w, "  record errors             %d\n", r.Errors)
	fmt.Fprintf(w, "  settle postings written   %d (plus %d funding postings)\n", r.SettlePostings, r.FundingPostings)
	fmt.Fprintf(w, "  netting ratio             %.1f movements per posting\n", r.NettingRatio)
	fmt.Fprintf(w, "  sum of balances           %d (SELECT SUM(balance))\n", r.SumBalances)
	fmt.Fprintf(w, "  sum of entries            %d (SELECT SUM(amount))\n", r.SumEntries)
	fmt.Fprintf(w, "  clearing account          %d\n", r.Clearing)
	fmt.Fprintf(w, "  wallets below zero        %d\n", len(r.NegativeWallets))
	fmt.Fprintf(w, "  reservations pending      %d accounts\n", len(r.PendingLeft))
	fmt.Fprintf(w, "  sessions unsettled        %d\n", r.Unsettled)
	fmt.Fprintf(w, "  killed node               %s\n", r.Killed)
	fmt.Fprintf(w, "  orphans found / settled   %d / %d (oldest swept after %s idle)\n", r.Orphans, r.OrphansSettled, r.MaxOrphanAge.Round(time.Millisecond))
	fmt.Fprintf(w, "  sessions settled by sweep %d\n", r.SweepSettled)
	if r.OK() {
		fmt.Fprintf(w, "  money conserved           yes\n")
		return
	}
	fmt.Fprintf(w, "  INVARIANTS FAILED:\n")
	for _, f := range r.Failures {
		fmt.Fprintf(w, "    - %s\n", f)
	}
}
