package econ

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

const (
	// Role is the coord member role of an economy node.
	Role = "econ"
	// AddrKey is the key of a node's service address in coord.Member.Addrs.
	AddrKey = "econ"
	// MetricsAddrKey is the key of a node's metrics address in
	// coord.Member.Addrs (the key zone nodes use too).
	MetricsAddrKey = "metrics"
	// ViewMetaKey is the key, in coord.Member.Meta, of the id of the view
	// the node has adopted (see the package doc's barrier).
	ViewMetaKey = "econ.view"
)

// Stable codes of this package.
const (
	CodeNotReady  = "ECON.NOT_READY"
	CodeClosed    = "ECON.CLOSED"
	CodeLeaseLost = "ECON.LEASE_LOST"
)

var (
	// ErrNotReady: the node is re-forming after a membership change (or has
	// not formed its first view yet). Retry soon with the same movement key.
	ErrNotReady = errcode.New(CodeNotReady, "econ: node re-forming after a membership change; retry")
	// ErrClosed: the node was closed.
	ErrClosed = errcode.New(CodeClosed, "econ: node closed")
	// ErrLeaseLost: the node's membership lease was lost; it records nothing
	// more (restart it to rejoin).
	ErrLeaseLost = errcode.New(CodeLeaseLost, "econ: membership lease lost; node fenced")
)

// DefaultEscrowBound is Config.EscrowBound's default.
const DefaultEscrowBound = 30 * time.Second

// Config configures one economy node. Zero durations take the defaults
// documented per field.
type Config struct {
	// Name is the node's member name (nodename rules); the scope placement
	// is over these names. Required.
	Name string
	// Coord is the etcd handle the node registers and watches membership
	// with. Required; the node does not close it.
	Coord *coord.Client
	// Store is the shared store every economy node of the cluster uses.
	// Required; the node does not close it.
	Store netting.SharedStore
	// Addr is the node's service address, published as Addrs[AddrKey] so
	// callers can reach it. Optional (a node nobody calls over the network).
	Addr string
	// MetricsAddr is where the node's Prometheus metrics are served
	// (host:port, path /metrics), published as Addrs[MetricsAddrKey] so
	// "shardwise top" finds them. Optional.
	MetricsAddr string
	// TTL is the membership lease's time to live: how long a crashed node
	// keeps its scopes before the others re-form without it. Default 10s.
	TTL time.Duration

	// EpochMaxAge: an open session older than this is settled and replaced.
	// Default netting.DefaultEpochMaxAge.
	EpochMaxAge time.Duration
	// MaxMovements: an open session that has accepted this many movements
	// is settled and replaced. Default netting.DefaultMaxMovements.
	MaxMovements int
	// SweepBound is how long an orphan's last journal row must be idle
	// before the sweep settles it. Default, and minimum, 2×EpochMaxAge.
	SweepBound time.Duration
	// RotateEvery is the rotator's period (settles idle epochs that are
	// due). Default EpochMaxAge/4; at most EpochMaxAge.
	RotateEvery time.Duration
	// SweepEvery is the sweeper's period. Default EpochMaxAge.
	SweepEvery time.Duration
	// ReadyWait bounds how long Record waits for a re-forming view before
	// answering ECON.NOT_READY. Default 5s.
	ReadyWait time.Duration
	// SettleLease is how long a settle claim keeps other settlers out if
	// its holder dies. Default netting.DefaultSettleLease.
	SettleLease time.Duration
	// CloseTimeout bounds the settle of Close and of a view change. Default
	// 30s.
	CloseTimeout time.Duration
	// EscrowBound is how long an escrow (escrow.go: a trade's offers held
	// for its decider) may wait for its end after its first offer was
	// journaled, and for its claims after its end, before the sweep of a
	// node owning one of its offers' scopes decides it: cancels it, or
	// pays what its end owes. Measured on the store's clock. Default 30s
	// (three zone lease TTLs of 10s: a dead decider's standby has resumed
	// well before); at least 1s.
	EscrowBound time.Duration
	// EscrowEvery is the escrow sweeper's period. Default EscrowBound/6;
	// at most EscrowBound. An escrow is decided at most EscrowBound +
	// EscrowEvery after its first offer, whether its decider lives or not.
	EscrowEvery time.Duration

	// Clock drives the node's timers (rotation, sweep, ReadyWait). Default
	// clock.Real(). Ages inside netting stay on the store's clock.
	Clock clock.Clock
	// Logger; default discard.
	Logger *slog.Logger
}

// Validate reports the first invalid field, naming it.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errcode.Config("Name", c.Name, "is required")
	case c.Coord == nil:
		return errcode.Config("Coord", nil, "is required")
	case c.Store == nil:
		return errcode.Config("Store", nil, "is required")
	}
	return c.validateSettings("")
}

// validateSettings checks the durations and counts, naming a field with
// prefix (HostConfig passes "HostConfig.Node.").
func (c Config) validateSettings(prefix string) error {
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"TTL", c.TTL}, {"EpochMaxAge", c.EpochMaxAge}, {"SweepBound", c.SweepBound},
		{"RotateEvery", c.RotateEvery}, {"SweepEvery", c.SweepEvery}, {"ReadyWait", c.ReadyWait},
		{"SettleLease", c.SettleLease}, {"CloseTimeout", c.CloseTimeout},
		{"EscrowBound", c.EscrowBound}, {"EscrowEvery", c.EscrowEvery},
	} {
		if d.v < 0 {
			return errcode.Config(prefix+d.field, d.v, "must not be negative")
		}
	}
	// Checked here, not first at Register: a bad TTL is refused before
	// any etcd work, under the field the caller set.
	if c.TTL != 0 && (c.TTL < time.Second || c.TTL%time.Second != 0) {
		return errcode.Config(prefix+"TTL", c.TTL, "must be 0 (the default, 10s) or a whole number of seconds, at least 1s (etcd leases count whole seconds)")
	}
	if c.MaxMovements < 0 {
		return errcode.Config(prefix+"MaxMovements", c.MaxMovements, "must not be negative")
	}
	w := c.WithDefaults()
	if w.SweepBound < 2*w.EpochMaxAge {
		return errcode.Config(prefix+"SweepBound", c.SweepBound, fmt.Sprintf("must be at least twice the epoch max age (%s)", 2*w.EpochMaxAge))
	}
	if c.EscrowBound != 0 && c.EscrowBound < time.Second {
		return errcode.Config(prefix+"EscrowBound", c.EscrowBound, "must be 0 (the default, 30s) or at least 1s")
	}
	if w.EscrowEvery > w.EscrowBound {
		return errcode.Config(prefix+"EscrowEvery", c.EscrowEvery, fmt.Sprintf("must be at most the escrow bound (%s), so an escrow is decided within one period of it", w.EscrowBound))
	}
	if w.RotateEvery > w.EpochMaxAge {
		return errcode.Config(prefix+"RotateEvery", c.RotateEvery, fmt.Sprintf("must be at most the epoch max age (%s), so idle epochs rotate in time", w.EpochMaxAge))
	}
	return nil
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	if c.TTL == 0 {
		c.TTL = 10 * time.Second
	}
	if c.EpochMaxAge == 0 {
		c.EpochMaxAge = netting.DefaultEpochMaxAge
	}
	if c.MaxMovements == 0 {
		c.MaxMovements = netting.DefaultMaxMovements
	}
	if c.SweepBound == 0 {
		c.SweepBound = 2 * c.EpochMaxAge
	}
	if c.RotateEvery == 0 {
		c.RotateEvery = c.EpochMaxAge / 4
	}
	if c.SweepEvery == 0 {
		c.SweepEvery = c.EpochMaxAge
	}
	if c.ReadyWait == 0 {
		c.ReadyWait = 5 * time.Second
	}
	if c.SettleLease == 0 {
		c.SettleLease = netting.DefaultSettleLease
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 30 * time.Second
	}
	if c.EscrowBound == 0 {
		c.EscrowBound = DefaultEscrowBound
	}
	if c.EscrowEvery == 0 {
		c.EscrowEvery = c.EscrowBound / 6
	}
	c.Clock = clock.OrReal(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Status is a node's state as Status reports it.
type Status struct {
	Name string
	// Ready is true while the node records under its view.
	Ready bool
	// View is the member names the node routes scopes over (sorted);
	// ViewID identifies it (see the package doc).
	View   []string
	ViewID string
	// Fenced is true once the lease was lost; Closed once Close ran.
	Fenced, Closed bool
}

// Node is one economy node. Its methods are safe for concurrent use.
type Node struct {
	cfg Config
	reg *coord.Registration
	log *slog.Logger
	met *metrics

	// ctx stops the goroutines' loops; work, the store calls they make
	// (a rotation's or a sweep's settles), so that Close lets a pass in
	// progress finish instead of leaving a settle claimed and half done.
	// Halt cancels both at once, as a crash would.
	ctx        context.Context
	cancel     context.CancelFunc
	work       context.Context
	cancelWork context.CancelFunc
	wg         sync.WaitGroup

	// gate is held shared by every Record, rotation and sweep pass on the
	// current generation, and exclusively to replace it or to stop: once a
	// swap holds it, nothing is still recording under the old view.
	gate   sync.RWMutex
	cur    *generation // guarded by gate
	fenced bool        // guarded by gate
	closed bool        // guarded by gate

	// changedMu guards changed, a channel closed (and replaced) whenever
	// the generation changes or becomes ready: what Record waits on.
	changedMu sync.Mutex
	changed   chan struct{}

	// escrows are the escrows the escrow sweeper looks at (escrow.go).
	escrows escrowWatch

	closeOnce sync.Once
	closeErr  error
}

// generation is the node's ClusterNode for one view.
type generation struct {
	view  view
	node  *netting.ClusterNode
	ready chan struct{} // closed once every member adopted the view
}

func (g *generation) isReady() bool {
	select {
	case <-g.ready:
		return true
	default:
		return false
	}
}

// Start validates cfg, registers the node in coord and starts its
// goroutines. The node records once it and every other live economy node
// have adopted the same view (see the package doc).
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	// Checked before registering, so a bad combination fails at once.
	if err := (netting.ClusterConfig{
		NodeID: cfg.Name, Nodes: []string{cfg.Name}, EpochMaxAge: cfg.EpochMaxAge,
		MaxMovements: cfg.MaxMovements, SettleLease: cfg.SettleLease,
		Sweep: &netting.SweepConfig{SettleOlderThan: cfg.SweepBound},
	}).Validate(); err != nil {
		return nil, err
	}
	addrs := map[string]string{}
	if cfg.Addr != "" {
		addrs[AddrKey] = cfg.Addr
	}
	if cfg.MetricsAddr != "" {
		addrs[MetricsAddrKey] = cfg.MetricsAddr
	}
	reg, err := cfg.Coord.Register(ctx, coord.RegisterConfig{Name: cfg.Name, Role: Role, Addrs: addrs, TTL: cfg.TTL})
	if err != nil {
		return nil, fmt.Errorf("econ: register %s: %w", cfg.Name, err)
	}
	n := &Node{
		cfg:     cfg,
		reg:     reg,
		log:     cfg.Logger.With("node", cfg.Name),
		met:     newMetrics(),
		changed: make(chan struct{}),
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.work, n.cancelWork = context.WithCancel(context.Background())
	events, err := cfg.Coord.WatchMembers(n.ctx)
	if err != nil {
		n.cancel()
		n.cancelWork()
		_ = reg.Close()
		return nil, fmt.Errorf("econ: watch members: %w", err)
	}
	n.wg.Go(func() { n.membership(events) })
	// The fence has its own goroutine, so a lost lease stops recording at
	// once even while the membership loop is busy re-forming.
	n.wg.Go(func() {
		select {
		case <-n.ctx.Done():
		case <-reg.Lost():
			n.fence()
		}
	})
	n.wg.Go(func() { n.every(cfg.RotateEvery, n.rotate) })
	n.wg.Go(func() { n.every(cfg.SweepEvery, n.sweep) })
	n.wg.Go(func() { n.every(cfg.EscrowEvery, n.sweepEscrowsNow) })
	return n, nil
}

// Name returns the node's member name.
func (n *Node) Name() string { return n.cfg.Name }

// Store returns the node's store.
func (n *Node) Store() netting.SharedStore { return n.cfg.Store }

// Registration returns the node's membership (its id, lease and record).
func (n *Node) Registration() *coord.Registration { return n.reg }

// Record records m under scope. A movement with no key or with legs
// ledger.ValidateLegs refuses fails first, whichever node is called
// (OP.MALFORMED, LEDGER.UNBALANCED; the order docs/protocol.md gives the
// service's callers). A scope the node's view places elsewhere then fails
// at once with *netting.MisroutedError naming the owner. While the
// node re-forms it waits, up to ReadyWait and ctx, and then fails with
// ErrNotReady; after Close, ErrClosed; after a lost lease, ErrLeaseLost.
// The outcome and the other errors are netting.ClusterNode.Record's.
func (n *Node) Record(ctx context.Context, scope string, m netting.Movement) (netting.Outcome, error) {
	// Judged before it is routed: a caller must not follow a misroute only
	// to be refused by the owner (netting makes the same two checks there).
	if err := checkMovement(m); err != nil {
		n.met.record(err)
		return netting.Outcome{}, err
	}
	var timeout <-chan time.Time
	for {
		n.gate.RLock()
		if err := n.stoppedLocked(); err != nil {
			n.gate.RUnlock()
			n.met.record(err)
			return netting.Outcome{}, err
		}
		g := n.cur
		if g != nil {
			if owner := g.view.owner(scope); owner != n.cfg.Name {
				n.gate.RUnlock()
				err := &netting.MisroutedError{Scope: scope, Owner: owner, NodeID: n.cfg.Name}
				n.met.record(err)
				return netting.Outcome{}, err
			}
			if g.isReady() {
				out, err := recordEscrow(ctx, n.cfg.Store, g.node, scope, m)
				n.escrows.recorded(m, out, err)
				n.gate.RUnlock()
				n.met.recordOutcome(out, err)
				return out, err
			}
		}
		wait := n.changedChan()
		n.gate.RUnlock()
		if timeout == nil {
			t := n.cfg.Clock.NewTimer(n.cfg.ReadyWait)
			defer t.Stop()
			timeout = t.C()
		}
		select {
		case <-wait:
		case <-timeout:
			n.met.record(ErrNotReady)
			return netting.Outcome{}, ErrNotReady
		case <-ctx.Done():
			n.met.record(ErrNotReady)
			return netting.Outcome{}, fmt.Errorf("%w (%w)", ErrNotReady, ctx.Err())
		}
	}
}

// stoppedLocked returns why the node records nothing, or nil. The caller
// holds gate.
func (n *Node) stoppedLocked() error {
	switch {
	case n.closed:
		return ErrClosed
	case n.fenced:
		return ErrLeaseLost
	}
	return nil
}

func (n *Node) changedChan() chan struct{} {
	n.changedMu.Lock()
	defer n.changedMu.Unlock()
	return n.changed
}

// signal wakes every Record waiting for the generation to change.
func (n *Node) signal() {
	n.changedMu.Lock()
	close(n.changed)
	n.changed = make(chan struct{})
	n.changedMu.Unlock()
}

// withCurrent runs f on the current generation if it is ready, holding the
// gate shared, and reports whether it ran.
func (n *Node) withCurrent(f func(g *generation)) error {
	n.gate.RLock()
	defer n.gate.RUnlock()
	if err := n.stoppedLocked(); err != nil {
		return err
	}
	if n.cur == nil || !n.cur.isReady() {
		return ErrNotReady
	}
	f(n.cur)
	return nil
}

// SettleAll settles every open session of the node now (an operator's
// action; rotation does it on its own schedule).
func (n *Node) SettleAll(ctx context.Context) ([]netting.SettleReport, error) {
	var reps []netting.SettleReport
	var err error
	if gerr := n.withCurrent(func(g *generation) { reps, err = g.node.SettleAll(ctx) }); gerr != nil {
		return nil, gerr
	}
	n.met.settledAll(reps)
	return reps, err
}

// Recover rebuilds a session from the store and finishes its settle: an
// operator's action for a session the sweep could not settle. Any node may
// do it; the settle claim keeps two finishers apart.
func (n *Node) Recover(ctx context.Context, sessionID string) (netting.SettleReport, error) {
	var rep netting.SettleReport
	var err error
	if gerr := n.withCurrent(func(g *generation) {
		var s *netting.Session
		if s, err = g.node.Recover(ctx, sessionID); err == nil {
			rep, err = s.Settle(ctx)
		}
	}); gerr != nil {
		return rep, gerr
	}
	if err == nil && !rep.AlreadySettled {
		n.met.settledAll([]netting.SettleReport{rep})
	}
	return rep, err
}

// Sweep runs one orphan sweep now.
func (n *Node) Sweep(ctx context.Context) (netting.SweepSummary, error) {
	var sum netting.SweepSummary
	var err error
	if gerr := n.withCurrent(func(g *generation) { sum, err = g.node.SweepOrphans(ctx, netting.SweepOptions{}) }); gerr != nil {
		return sum, gerr
	}
	n.met.swept.Add(float64(len(sum.Settled)))
	return sum, err
}

// SweepEscrows runs one escrow sweep now (escrow.go): the escrows of the
// node's scopes whose decider let EscrowBound pass are decided.
func (n *Node) SweepEscrows(ctx context.Context, opts EscrowSweepOptions) (EscrowSweepSummary, error) {
	var sum EscrowSweepSummary
	var err error
	if gerr := n.withCurrent(func(g *generation) {
		ids, scan := n.escrows.take(g)
		var open, finished []uint64
		sum, open, finished, err = sweepEscrows(ctx, n.cfg.Store, g.node, n.cfg.Name, n.cfg.EscrowBound, opts.Now, ids, scan)
		if err == nil {
			n.escrows.finish(g, scan, open, finished)
		}
	}); gerr != nil {
		return sum, gerr
	}
	n.met.escrows(sum)
	return sum, err
}

// Status reports the node's view and whether it records.
func (n *Node) Status() Status {
	n.gate.RLock()
	defer n.gate.RUnlock()
	st := Status{Name: n.cfg.Name, Fenced: n.fenced, Closed: n.closed}
	if g := n.cur; g != nil {
		st.View = slices.Clone(g.view.names)
		st.ViewID = g.view.id
		st.Ready = g.isReady() && !n.fenced && !n.closed
	}
	return st
}

// Close stops the node gracefully: no more Records, the open sessions
// settled (bounded by CloseTimeout), the registration ended so the other
// nodes re-form without it at once, and every goroutine joined. Idempotent;
// it returns the first call's error.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.cancel()
		n.wg.Wait()
		n.gate.Lock()
		n.closed = true
		g, fenced := n.cur, n.fenced
		n.gate.Unlock()
		n.signal()
		var errs []error
		if g != nil && !fenced {
			// After a lost lease the fence has settled what it could;
			// the rest is the sweep's.
			errs = append(errs, n.retire(g, true))
		}
		if err := n.reg.Close(); err != nil && !errors.Is(err, coord.ErrLeaseLost) {
			errs = append(errs, fmt.Errorf("econ: end registration: %w", err))
		}
		n.met.ready.Set(0)
		n.cancelWork()
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// Halt stops the node as a crash would, but at once: no more Records,
// nothing settled (its open sessions become orphans for the others' sweep),
// and its registration revoked so the others re-form without it now rather
// than when the lease would expire. Demos and failover drills use it; Close
// is the graceful stop. After Halt, Close does nothing more.
func (n *Node) Halt() {
	n.closeOnce.Do(func() {
		n.cancelWork()
		n.cancel()
		n.wg.Wait()
		n.gate.Lock()
		n.closed = true
		g := n.cur
		n.gate.Unlock()
		n.signal()
		if g != nil {
			_ = g.node.Close()
		}
		if err := n.reg.Close(); err != nil && !errors.Is(err, coord.ErrLeaseLost) {
			n.closeErr = fmt.Errorf("econ: end registration: %w", err)
		}
		n.met.ready.Set(0)
		n.log.Warn("econ: node halted; its open sessions are left to the sweep")
	})
}

// retire closes a generation no longer current and settles its open
// sessions. A settle that fails leaves its session to the sweep.
//
// final is true when the node stops (Close): it then also waits out other
// settlers' claims on its sessions, so a cluster closed node by node ends
// with everything settled. On a view change it does not wait: the new view
// must form now, and the sweep finishes what a claim holder leaves.
func (n *Node) retire(g *generation, final bool) error {
	_ = g.node.Close()
	// Not cut short by Close: a settle abandoned mid-way leaves its claim
	// held until the claim's lease lapses, blocking every other settler of
	// the session that long. CloseTimeout bounds it.
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.CloseTimeout)
	defer cancel()
	reps, err := g.node.SettleAll(ctx)
	n.met.settledAll(reps)
	if err == nil {
		err = n.settleLeftovers(ctx, g, final)
	}
	if err != nil {
		n.log.Warn("econ: settle of the retired view's sessions failed; left for the sweep", "view", g.view.id, "err", err)
		return fmt.Errorf("econ: settle sessions of view %s: %w", g.view.id, err)
	}
	return nil
}

// settleLeftovers settles the node's sessions that are still unsettled in
// the store although none of its lanes holds them: a rotated-out epoch
// whose settle failed, or an epoch of an earlier run under the same name.
// Nothing records into them any more (the node's generations before g are
// all retired, and g is closed), so they need not wait for the sweep's
// bound. A settle claimed by another settler is that settler's to finish.
func (n *Node) settleLeftovers(ctx context.Context, g *generation, wait bool) error {
	list, err := n.cfg.Store.ListUnsettled(ctx, 0)
	if err != nil {
		return err
	}
	var errs []error
	for _, u := range list {
		if u.NodeID != n.cfg.Name {
			continue
		}
		if err := n.settleWaitingOutClaims(ctx, g, u.ID, wait); err != nil {
			errs = append(errs, fmt.Errorf("settle %s: %w", u.ID, err))
		}
	}
	return errors.Join(errs...)
}

// settleWaitingOutClaims settles a session, waiting while another settler
// holds a claim on it: a live one finishes the settle (ours then finds it
// done); a dead one's claim lapses and ours takes over.
// With wait false a held claim is left to its holder (or, if the holder
// died, to the sweep) at once.
func (n *Node) settleWaitingOutClaims(ctx context.Context, g *generation, id string, wait bool) error {
	for {
		s, err := g.node.Recover(ctx, id)
		if err == nil {
			var rep netting.SettleReport
			if rep, err = s.Settle(ctx); err == nil {
				n.met.settledAll([]netting.SettleReport{rep})
				return nil
			}
		}
		var held *netting.ClaimHeldError
		if !errors.As(err, &held) {
			return err
		}
		if !wait {
			return nil
		}
		now, nerr := n.cfg.Store.Now(ctx)
		if nerr != nil {
			return errors.Join(err, nerr)
		}
		t := n.cfg.Clock.NewTimer(max(held.ExpiresAt.Sub(now), 10*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C():
		}
	}
}

// every runs f every period of the node's clock until the node stops.
func (n *Node) every(period time.Duration, f func()) {
	t := n.cfg.Clock.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C():
			f()
		}
	}
}

func (n *Node) rotate() {
	var reps []netting.SettleReport
	var err error
	if n.withCurrent(func(g *generation) { reps, err = g.node.RotateDue(n.work) }) != nil {
		return
	}
	n.met.settledAll(reps)
	if err != nil && n.work.Err() == nil {
		n.log.Warn("econ: rotation", "err", err)
	}
}

func (n *Node) sweep() {
	sum, err := n.Sweep(n.work)
	if err != nil {
		if n.work.Err() == nil && !errors.Is(err, ErrNotReady) {
			n.log.Warn("econ: sweep", "err", err)
		}
		return
	}
	for _, s := range sum.Settled {
		n.log.Info("econ: swept an orphan", "session", s.SessionID, "mode", s.Mode)
	}
}

func (n *Node) sweepEscrowsNow() {
	sum, err := n.SweepEscrows(n.work, EscrowSweepOptions{})
	if err != nil {
		if n.work.Err() == nil && !errors.Is(err, ErrNotReady) {
			n.log.Warn("econ: escrow sweep", "err", err)
		}
		return
	}
	for _, id := range sum.Expired {
		n.log.Info("econ: cancelled an escrow its decider left past the bound", "escrow", id)
	}
	for _, f := range sum.Failed {
		n.log.Warn("econ: escrow sweep failed on an escrow; retried next sweep", "escrow", f.ID, "code", f.Code, "err", f.Err)
	}
}

// checkMovement is the shape netting's session requires of a movement: a
// key and legs ledger.ValidateLegs accepts.
func checkMovement(m netting.Movement) error {
	if m.Key == "" {
		return &ledger.MalformedError{Index: -1, Reason: "empty idempotency key"}
	}
	return ledger.ValidateLegs(m.Legs)
}
