package router

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardwise/shardwise/clock"
)

// Route is a key's node and that node's client.
type Route[C any] struct {
	Node   Node
	Client C
}

// memberState is where a registered node is in its life.
type memberState int

const (
	// stateJoining: the first AddNode is connecting; not on the ring.
	stateJoining memberState = iota
	// stateLive: connected and on the ring; member.conn is set.
	stateLive
	// stateDown: marked down; a reconnect loop is running.
	stateDown
)

// member is the registry entry of one node, from AddNode until RemoveNode
// or Close. Its fields are guarded by Router.mu.
type member[C any] struct {
	id    string
	node  Node // Vnodes resolved: the weight it was added with, kept across rejoins
	state memberState
	conn  *conn[C] // the current connection; set exactly when state is stateLive
	seq   uint64   // join order on the ring; a rejoin takes a new, later one

	// ctx ends when the node is removed or the router closed; every
	// goroutine working for the node watches it.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts the goroutines working for this node (prober, probe calls,
	// reconnect loop, disconnects), so RemoveNode can wait for them.
	wg sync.WaitGroup

	// joined is closed when the first AddNode's connect settles; joinErr
	// (written before the close) is its result. A concurrent AddNode of the
	// same node waits on it instead of connecting a second client.
	joined  chan struct{}
	joinErr error
	// waiters counts AddNode calls waiting on joined (tests observe it to
	// order a cancellation after a call has started waiting).
	waiters int
}

// conn is one connection of a member: a client and the goroutines that
// belong to it. A member gets a new conn on every rejoin, and failures are
// only acted on when they come from the member's current conn.
type conn[C any] struct {
	member *member[C]
	node   Node
	client C
	routes prometheus.Counter // the node's routes counter, looked up once
	// stopProbe ends this connection's prober; nil when health is off.
	stopProbe context.CancelFunc
	// ord is the join position this connection was published with; the
	// multi-key calls group keys by it.
	ord uint64
	// down is set, without a lock, as soon as the router knows this
	// connection failed: the read paths skip it from then on, before the
	// snapshot without it is published.
	down atomic.Bool
}

// snapshot is what the read paths see: an immutable placement and the
// client of every node it can return, published together.
type snapshot[C any] struct {
	closed    bool
	placement Placement
	conns     map[string]*conn[C]
	live      []Node // join order
}

// Router routes keys to nodes on a placement (a consistent-hash ring by
// default), keeps one client per live node, fails over to replicas, probes
// health, and reconnects nodes that went down. It is safe for concurrent
// use. Route, RouteAll, Execute and ExecuteAll take no lock.
type Router[C any] struct {
	opts     Options[C] // defaults filled
	backoff  Backoff
	clock    clock.Clock
	wallTime bool // Clock is the wall clock, so probe contexts can carry real deadlines
	log      *slog.Logger
	metrics  *metrics

	snap atomic.Pointer[snapshot[C]]

	rngMu sync.Mutex
	rng   *rand.Rand

	// ctx ends at Close; every member's ctx derives from it.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex // guards closed, members, seq, and every member's fields
	closed  bool
	members map[string]*member[C]
	seq     uint64
	// wg counts every goroutine the router started; Close waits for it.
	wg sync.WaitGroup

	// downs queues connections that a call saw fail, for downWorker to
	// take off the ring: Execute hands a mark-down over and moves on to
	// the next replica instead of waiting for the membership lock.
	downMu     sync.Mutex
	downs      []pendingDown[C]
	downSignal chan struct{} // capacity 1: "downs is not empty"

	closeOnce sync.Once
	closeErr  error
}

// pendingDown is a mark-down that a failed call handed to downWorker.
type pendingDown[C any] struct {
	c     *conn[C]
	cause error
}

// New validates opts and returns a router with no nodes.
func New[C any](opts Options[C]) (*Router[C], error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	wallTime := opts.Clock == nil
	o := opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Router[C]{
		opts:     o,
		backoff:  Backoff{Base: o.Retry.BaseDelay, Max: o.Retry.MaxDelay},
		clock:    o.Clock,
		wallTime: wallTime,
		log:      o.Logger,
		metrics:  newMetrics(),
		rng:      rand.New(o.Rand),
		ctx:      ctx,
		cancel:   cancel,
		members:  make(map[string]*member[C]),

		downSignal: make(chan struct{}, 1),
	}
	r.snap.Store(&snapshot[C]{placement: noPlacement{}, conns: map[string]*conn[C]{}})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.downWorker()
	}()
	return r, nil
}

// markDownLater flags c as down at once, so every call skips it from now
// on, and queues its mark-down for downWorker. Only the first failure of a
// connection is queued.
func (r *Router[C]) markDownLater(c *conn[C], cause error) {
	if !c.down.CompareAndSwap(false, true) {
		return
	}
	r.downMu.Lock()
	r.downs = append(r.downs, pendingDown[C]{c: c, cause: cause})
	r.downMu.Unlock()
	select {
	case r.downSignal <- struct{}{}:
	default:
	}
}

// downWorker takes queued connections off the ring until Close.
func (r *Router[C]) downWorker() {
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.downSignal:
		}
		r.downMu.Lock()
		batch := r.downs
		r.downs = nil
		r.downMu.Unlock()
		for _, d := range batch {
			r.markDownConn(d.c, ReasonExecute, d.cause)
		}
	}
}

// LiveNodes returns the nodes on the ring, in join order, with their
// weights.
func (r *Router[C]) LiveNodes() []Node {
	return slices.Clone(r.snap.Load().live)
}

// delay draws the jittered backoff of attempt n.
func (r *Router[C]) delay(attempt int) time.Duration {
	r.rngMu.Lock()
	u := r.rng.Uint64()
	r.rngMu.Unlock()
	return r.backoff.Delay(attempt, u)
}

// AddNode connects to n, retrying with backoff (Retry.MaxRetries+1
// attempts), and puts it on the ring. Adding a node that is already
// registered (live, or down and reconnecting) does nothing and keeps its
// weight; while another AddNode of the same node is connecting, this one
// waits for that result instead of opening a second client, and returns it,
// unless that call failed only because its own ctx ended: then this one
// connects itself. The node is validated before any connect. AddNode returns
// ErrNodeRemoved when RemoveNode ran during the connect, and ErrClosed when
// Close did; the client it may have opened is closed either way.
func (r *Router[C]) AddNode(ctx context.Context, n Node) error {
	if err := n.Validate(); err != nil {
		return err
	}
	if n.Vnodes == 0 {
		n.Vnodes = r.opts.Vnodes
	}
	id := n.ID()

	r.mu.Lock()
	for {
		if r.closed {
			r.mu.Unlock()
			return ErrClosed
		}
		m, ok := r.members[id]
		if !ok {
			break
		}
		if m.state != stateJoining {
			r.mu.Unlock()
			return nil
		}
		m.waiters++
		r.mu.Unlock()
		select {
		case <-m.joined:
		case <-ctx.Done():
			return ctx.Err()
		}
		// The first AddNode failed because its caller gave up (its ctx
		// ended) while ours is still live: that error is not ours to
		// return. Try again; the entry is gone, so this call connects.
		if !givenUp(m.joinErr) || ctx.Err() != nil {
			return m.joinErr
		}
		r.mu.Lock()
	}
	mctx, mcancel := context.WithCancel(r.ctx)
	m := &member[C]{id: id, node: n, state: stateJoining, ctx: mctx, cancel: mcancel, joined: make(chan struct{})}
	r.members[id] = m
	r.mu.Unlock()

	client, err := r.connectWithRetry(ctx, m)

	r.mu.Lock()
	stale := false
	switch {
	case err == nil && r.closed:
		err, stale = ErrClosed, true
	case err == nil && r.members[id] != m:
		err, stale = ErrNodeRemoved, true
	case err == nil:
		err = r.joinLocked(m, client)
		stale = err != nil
	case r.closed:
		err = ErrClosed
	case r.members[id] != m:
		err = ErrNodeRemoved
	}
	if err != nil && r.members[id] == m {
		delete(r.members, id)
		m.cancel()
	}
	m.joinErr = err
	close(m.joined)
	r.mu.Unlock()

	if stale {
		// On the caller's goroutine: the router may already be closed, so
		// it cannot start one of its own.
		r.disconnect(client, n)
	}
	return err
}

// givenUp reports whether an AddNode error came from its caller's context
// ending rather than from the node.
func givenUp(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// connectWithRetry makes up to MaxRetries+1 connect attempts. They stop
// early when ctx ends or the member is removed or the router closed.
func (r *Router[C]) connectWithRetry(ctx context.Context, m *member[C]) (C, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(m.ctx, cancel)
	defer stop()

	var zero C
	var last error
	attempts := 0
	for attempt := 0; attempt <= r.opts.Retry.MaxRetries; attempt++ {
		if attempt > 0 {
			if err := clock.Sleep(ctx, r.clock, r.delay(attempt-1)); err != nil {
				break
			}
		}
		attempts++
		client, err := r.opts.Connect(ctx, m.node)
		if err == nil {
			return client, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	if last == nil {
		last = context.Cause(ctx)
	}
	return zero, &ConnectError{Node: m.node, Attempts: attempts, Err: last}
}

// joinLocked puts a connected member on the ring: a new conn, a later join
// position, a new snapshot, and a prober. On error nothing changed. r.mu is
// held.
func (r *Router[C]) joinLocked(m *member[C], client C) error {
	prevState, prevSeq := m.state, m.seq
	c := &conn[C]{member: m, node: m.node, client: client, routes: r.metrics.routes.WithLabelValues(m.id)}
	r.seq++
	c.ord = r.seq
	m.state, m.conn, m.seq = stateLive, c, r.seq
	if err := r.publishJoinLocked(m); err != nil {
		m.state, m.conn, m.seq = prevState, nil, prevSeq
		return err
	}
	r.startProberLocked(c)
	return nil
}

// publishJoinLocked publishes the snapshot with live member m (its conn
// set) joined last. It derives the placement from the current one when that
// is incremental, and builds it from all live members otherwise. On error
// nothing is published. r.mu is held.
func (r *Router[C]) publishJoinLocked(m *member[C]) error {
	old := r.snap.Load()
	joined := Member{ID: m.id, Weight: m.node.Vnodes}
	var p Placement
	var err error
	if ip, ok := old.placement.(IncrementalPlacement); ok && len(old.live) > 0 {
		p, err = ip.With(joined)
	} else {
		p, err = r.opts.Placement(append(membersOf(old.live), joined))
	}
	if err != nil {
		return err
	}
	conns := maps.Clone(old.conns)
	conns[m.id] = m.conn
	r.snap.Store(&snapshot[C]{placement: p, conns: conns, live: append(slices.Clip(old.live), m.node)})
	r.metrics.liveNodes.Set(float64(len(conns)))
	return nil
}

// publishLeaveLocked publishes the snapshot without member m, derived from
// the current placement when it is incremental and rebuilt otherwise (or
// when deriving fails). If even the rebuild fails (a degenerate custom
// placement) the old placement stays, without m's client: the read paths
// walk past an owner without a client, as the next placement will. r.mu is
// held.
func (r *Router[C]) publishLeaveLocked(m *member[C]) {
	old := r.snap.Load()
	live := slices.DeleteFunc(slices.Clone(old.live), func(n Node) bool { return n.Host == m.node.Host && n.Port == m.node.Port })
	conns := maps.Clone(old.conns)
	delete(conns, m.id)
	var p Placement = noPlacement{}
	if len(live) > 0 {
		var err error
		ip, incremental := old.placement.(IncrementalPlacement)
		if incremental {
			p, err = ip.Without(m.id)
		}
		if !incremental || err != nil {
			// Not incremental, or its Without failed (a custom placement):
			// build the placement of the others from scratch, so a later
			// rejoin does not meet a placement that still holds the node.
			p, err = r.opts.Placement(membersOf(live))
		}
		if err != nil {
			r.log.Error("router: placement rebuild failed on leave; keeping previous placement", "node", m.id, "err", err)
			p = old.placement
		}
	}
	r.snap.Store(&snapshot[C]{placement: p, conns: conns, live: live})
	r.metrics.liveNodes.Set(float64(len(conns)))
}

// membersOf lists live nodes as a placement sees them.
func membersOf(live []Node) []Member {
	members := make([]Member, len(live))
	for i, n := range live {
		members[i] = Member{ID: n.ID(), Weight: n.Vnodes}
	}
	return members
}

// leaveLocked takes a live member's conn off the ring (the member is left
// in stateDown) and closes the client in the background. r.mu is held.
func (r *Router[C]) leaveLocked(m *member[C]) {
	c := m.conn
	c.down.Store(true)
	m.conn, m.state = nil, stateDown
	if c.stopProbe != nil {
		c.stopProbe()
	}
	r.publishLeaveLocked(m)
	r.spawn(m, func() { r.disconnect(c.client, c.node) })
}

// spawn starts f on a goroutine counted by the router and the member. It
// is called either with r.mu held and the router not yet closed (so Close's
// Wait has not started), or from a goroutine that is itself counted (so the
// counters are above zero, which lets Add run concurrently with Wait).
func (r *Router[C]) spawn(m *member[C], f func()) {
	r.wg.Add(1)
	m.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer m.wg.Done()
		f()
	}()
}

// disconnect closes a client with the user's Disconnect, logging its error.
func (r *Router[C]) disconnect(client C, n Node) {
	if r.opts.Disconnect == nil {
		return
	}
	if err := r.opts.Disconnect(client, n); err != nil {
		r.log.Warn("router: disconnect failed", "node", n.ID(), "err", err)
	}
}

// RemoveNode takes n off the ring, stops its reconnects and probes, and
// closes its client. It returns once everything working for the node has
// stopped, or when ctx ends (the removal itself has happened by then).
// Removing an unknown node does nothing. An AddNode of n that is still
// connecting returns ErrNodeRemoved.
func (r *Router[C]) RemoveNode(ctx context.Context, n Node) error {
	id := n.ID()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	m, ok := r.members[id]
	if !ok {
		r.mu.Unlock()
		return nil
	}
	delete(r.members, id)
	m.cancel()
	if m.state == stateLive {
		r.leaveLocked(m)
	}
	m.state = stateDown
	r.mu.Unlock()
	return waitGroup(ctx, &m.wg)
}

// waitGroup waits for wg or ctx, whichever is first.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// MarkDown takes n off the ring now, closes its client and reconnects it in
// the background. It does nothing when n is not live (unknown, joining,
// already down) or the router is closed.
func (r *Router[C]) MarkDown(n Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if m, ok := r.members[n.ID()]; ok && m.state == stateLive {
		r.markDownLocked(m, ReasonManual, nil)
	}
}

// markDownConn marks c's node down, but only if c is still its current
// connection: a failure seen on a client that has since been replaced by a
// reconnect says nothing about the new one.
func (r *Router[C]) markDownConn(c *conn[C], reason string, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := c.member
	if r.closed || r.members[m.id] != m || m.conn != c {
		return
	}
	r.markDownLocked(m, reason, cause)
}

// markDownLocked moves a live member to down and starts its reconnect
// loop. r.mu is held.
func (r *Router[C]) markDownLocked(m *member[C], reason string, cause error) {
	// Counted before the ring without the node is published, so whoever
	// sees the node gone (ring readers take no lock) sees it counted.
	r.metrics.markDowns.WithLabelValues(m.id, reason).Inc()
	r.leaveLocked(m)
	r.log.Warn("router: node marked down", "node", m.id, "reason", reason, "err", cause)
	r.spawn(m, func() { r.reconnectLoop(m) })
}

// reconnectLoop reconnects a down member with jittered backoff, forever,
// until it rejoins or the member's ctx ends (removal or Close).
func (r *Router[C]) reconnectLoop(m *member[C]) {
	for attempt := 0; ; attempt++ {
		d := r.delay(attempt)
		if clock.Sleep(m.ctx, r.clock, d) != nil {
			return
		}
		r.metrics.reconnects.WithLabelValues(m.id).Inc()
		r.log.Info("router: reconnect attempt", "node", m.id, "attempt", attempt+1, "delay", d)
		client, err := r.opts.Connect(m.ctx, m.node)
		if err != nil {
			if m.ctx.Err() != nil {
				return
			}
			r.log.Info("router: reconnect failed", "node", m.id, "attempt", attempt+1, "err", err)
			continue
		}
		r.mu.Lock()
		if r.closed || r.members[m.id] != m || m.ctx.Err() != nil || m.state != stateDown {
			r.mu.Unlock()
			// Removed or closed while connecting: the node must not come back.
			r.disconnect(client, m.node)
			return
		}
		err = r.joinLocked(m, client)
		r.mu.Unlock()
		if err != nil {
			r.log.Error("router: rejoin failed", "node", m.id, "err", err)
			r.disconnect(client, m.node)
			continue
		}
		r.log.Info("router: node rejoined", "node", m.id, "vnodes", m.node.Vnodes, "attempts", attempt+1)
		return
	}
}

// Close stops probing and reconnecting, closes every client, and returns
// once every goroutine the router started has stopped. Callbacks that
// ignore their context and outlive Options.CloseTimeout are abandoned and
// reported as ErrCloseTimeout. Close is idempotent; later calls return the
// first call's result. Every other method returns ErrClosed afterwards.
func (r *Router[C]) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.cancel()
		for _, m := range r.members {
			if m.state == stateLive {
				c := m.conn
				m.conn = nil
				if c.stopProbe != nil {
					c.stopProbe()
				}
				r.spawn(m, func() { r.disconnect(c.client, c.node) })
			}
			m.state = stateDown
		}
		clear(r.members)
		r.snap.Store(&snapshot[C]{closed: true, placement: noPlacement{}, conns: map[string]*conn[C]{}})
		r.metrics.liveNodes.Set(0)
		r.mu.Unlock()

		done := make(chan struct{})
		go func() {
			r.wg.Wait()
			close(done)
		}()
		t := r.clock.NewTimer(r.opts.CloseTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C():
			r.closeErr = ErrCloseTimeout.Wrap("waited %s", r.opts.CloseTimeout)
			r.log.Error("router: close timed out; callbacks still running", "timeout", r.opts.CloseTimeout)
		}
	})
	return r.closeErr
}
