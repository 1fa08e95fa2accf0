package router

// One test per known defect of the TypeScript router (@shardwise/core)
// that ours must not have; docs/decisions.md refers to them by number.
// Each test fails on the original behaviour.
//
//  1. Concurrent AddNode calls for one node (or AddNode racing a pending
//     reconnect) open two clients and leak one.
//  2. RemoveNode or Close during a reconnect attempt: the node comes back,
//     or the retries never stop.
//  3. A failing probe that finishes during Close marks the node down and
//     schedules a reconnect after Close.
//  4. A failure is blamed on the node by id, so an error from an old client
//     ejects the freshly reconnected one.
//  5. Invalid vnodes found only after connecting: a leaked client per retry
//     and a registry entry that never routes.
//  6. A replica count of zero, negative or fractional is accepted.
//  7. An error that is not the node's fault still fails over.
//  8. A hung disconnect blocks failover and Close; fn has no timeout.
//  9. A hung health check lets probes pile up (a); failure counts survive
//     a removal (b); backoff without jitter (c).
//  10. No closed state: AddNode after Close starts everything again.

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/hashring"
)

// Defect 1: two concurrent AddNode calls for one node both connected and one
// client leaked.
func TestDefect01ConcurrentAddNodeConnectsOnce(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	n := node(1)
	entered := make(chan struct{}, 8)
	release := make(chan struct{})
	c.setGate(func(ctx context.Context, _ Node) error {
		entered <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	errs := make(chan error, 2)
	go func() { errs <- r.AddNode(t.Context(), n) }()
	<-entered // the first AddNode is connecting, so the node is registered

	// A second AddNode waits for the first one's connect rather than
	// opening its own: given a context that is already done, it returns at
	// once with the context's error and never reaches Connect.
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.AddNode(gone, n); !errors.Is(err, context.Canceled) {
		t.Fatalf("second AddNode = %v, want it to wait (and give up) on the first", err)
	}
	if len(entered) != 0 {
		t.Fatal("the second AddNode called Connect while the first was connecting")
	}
	go func() { errs <- r.AddNode(t.Context(), n) }()
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("AddNode: %v", err)
		}
	}
	if got := c.connectCount(n.ID()); got != 1 {
		t.Fatalf("%d connects for one node", got)
	}
	if got := c.openCount(); got != 1 {
		t.Fatalf("%d open clients for one node", got)
	}
}

// Defect 1, the waiting side: an AddNode that waits on another's connect
// must not inherit that caller's cancellation. When the first caller gives
// up, the waiter (whose ctx is live) connects itself, and still only one
// client is open.
func TestDefect01WaiterDoesNotInheritAnotherCallersCancel(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	n := node(1)
	entered := make(chan struct{}, 2)
	var calls atomic.Int32
	c.setGate(func(ctx context.Context, _ Node) error {
		entered <- struct{}{}
		if calls.Add(1) == 1 {
			<-ctx.Done() // the first caller's connect hangs until it gives up
			return ctx.Err()
		}
		return nil
	})
	first, cancelFirst := context.WithCancel(t.Context())
	firstErr := make(chan error, 1)
	go func() { firstErr <- r.AddNode(first, n) }()
	<-entered
	second := make(chan error, 1)
	go func() { second <- r.AddNode(t.Context(), n) }()
	waitFor(t, "the second AddNode to wait on the first", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		m := r.members[n.ID()]
		return m != nil && m.waiters == 1
	})
	cancelFirst()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("first AddNode = %v, want its own cancellation", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("second AddNode = %v, want it to connect after the first gave up", err)
	}
	if !isLive(r, n) || c.openCount() != 1 {
		t.Fatalf("live = %v, open = %d", r.LiveNodes(), c.openCount())
	}
}

// Defect 1, under contention: many AddNode calls race; one client results.
func TestDefect01ManyConcurrentAddNodes(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if err := r.AddNode(t.Context(), node(1)); err != nil {
				t.Errorf("AddNode: %v", err)
			}
		})
	}
	wg.Wait()
	if c.connectCount(node(1).ID()) != 1 || c.openCount() != 1 {
		t.Fatalf("connects = %d, open = %d", c.connectCount(node(1).ID()), c.openCount())
	}
}

// Defect 1, second half: AddNode racing a pending reconnect connected a
// second client.
func TestDefect01AddNodeDuringReconnectDoesNotConnect(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	r := newRouter(t, c, baseOptions(c, clk))
	n := node(1)
	addNodes(t, r, n)
	r.MarkDown(n)
	waitArmed(t, clk, 50*time.Millisecond) // reconnect pending
	addNodes(t, r, n)
	if got := c.connectCount(n.ID()); got != 1 {
		t.Fatalf("AddNode of a reconnecting node connected: %d connects", got)
	}
	clk.Advance(50 * time.Millisecond)
	waitFor(t, "rejoin", func() bool { return isLive(r, n) })
	if c.connectCount(n.ID()) != 2 || c.openCount() != 1 {
		t.Fatalf("connects = %d, open = %d; want 2 and 1", c.connectCount(n.ID()), c.openCount())
	}
}

// Defect 2: RemoveNode or Close during a running reconnect attempt let the
// node come back, or retry forever.
func TestDefect02RemoveOrCloseDuringReconnectAttempt(t *testing.T) {
	for _, stop := range []string{"RemoveNode", "Close"} {
		t.Run(stop, func(t *testing.T) {
			c := newCluster()
			clk := clock.NewFake(epoch)
			r, err := New(baseOptions(c, clk))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			n := node(1)
			addNodes(t, r, n)
			entered := make(chan struct{})
			// The reconnect's connect succeeds, but only once the router
			// has cancelled it: the worst case for a late return.
			c.setGate(func(ctx context.Context, _ Node) error {
				close(entered)
				<-ctx.Done()
				return nil
			})
			r.MarkDown(n)
			waitArmed(t, clk, 50*time.Millisecond)
			clk.Advance(50 * time.Millisecond)
			<-entered

			if stop == "RemoveNode" {
				if err := r.RemoveNode(t.Context(), n); err != nil {
					t.Fatalf("RemoveNode: %v", err)
				}
			} else if err := r.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			// RemoveNode and Close wait for the attempt, so by now its
			// client must be closed and the node gone for good.
			if isLive(r, n) {
				t.Fatal("node came back")
			}
			if c.openCount() != 0 {
				t.Fatalf("%d clients open", c.openCount())
			}
			if w := clk.Waiters(); w != 0 {
				t.Fatalf("%d timers still armed: reconnects continue", w)
			}
			clk.Advance(time.Hour)
			if got := c.connectCount(n.ID()); got != 2 {
				t.Fatalf("%d connects, want 2 (no retry after %s)", got, stop)
			}
		})
	}
}

// Defect 3: a failing probe that finished during Close marked the node down
// and scheduled a reconnect after Close.
func TestDefect03ProbeFailingDuringCloseDoesNothing(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	logs := &logRecorder{}
	opts := baseOptions(c, clk)
	opts.Logger = slog.New(logs)
	started := make(chan struct{})
	opts.Health = &Health[*client]{
		Interval: probeInterval, Timeout: probeTimeout, FailureThreshold: 1,
		Check: func(ctx context.Context, _ *client, _ Node) error {
			close(started)
			<-ctx.Done()
			return errUnhealthy // fails, as a probe cut off by Close would
		},
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	n := node(1)
	addNodes(t, r, n)
	waitArmed(t, clk, probeInterval)
	clk.Advance(probeInterval)
	<-started
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if logs.count("router: node marked down", "") != 0 || logs.count("router: reconnect attempt", "") != 0 {
		t.Fatal("the probe that failed during Close marked the node down")
	}
	if v := metricValue(t, r.metrics.markDowns.WithLabelValues(n.ID(), ReasonProbe)); v != 0 {
		t.Fatalf("mark-downs = %v", v)
	}
	clk.Advance(time.Hour)
	if c.connectCount(n.ID()) != 1 || c.openCount() != 0 || clk.Waiters() != 0 {
		t.Fatalf("after Close: connects = %d, open = %d, timers = %d", c.connectCount(n.ID()), c.openCount(), clk.Waiters())
	}
}

// Defect 4: Execute marked a node down by id, so an error from an old client
// ejected the freshly reconnected node.
func TestDefect04StaleClientErrorKeepsReconnectedNode(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	opts := baseOptions(c, clk)
	opts.Replicas = 1
	r := newRouter(t, c, opts)
	n := node(1)
	addNodes(t, r, n)

	inFn := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- r.Execute(t.Context(), "k", func(_ context.Context, cl *client, _ Node) error {
			if cl.gen == 1 {
				close(inFn)
				<-release
				return errRefused // the old client's connection broke
			}
			return nil
		})
	}()
	<-inFn
	r.MarkDown(n)
	waitArmed(t, clk, 50*time.Millisecond)
	clk.Advance(50 * time.Millisecond)
	waitFor(t, "rejoin with a new client", func() bool { return isLive(r, n) })
	close(release)
	<-done // it failed: its only replica was the old client

	if !isLive(r, n) {
		t.Fatal("an old client's error ejected the reconnected node")
	}
	rt, err := r.Route("k")
	if err != nil || rt.Client.gen != 2 {
		t.Fatalf("route = %+v, %v; want the second client", rt, err)
	}
	if v := metricValue(t, r.metrics.markDowns.WithLabelValues(n.ID(), ReasonExecute)); v != 0 {
		t.Fatalf("mark-downs{execute} = %v", v)
	}
}

// Defect 5: invalid vnodes were detected after connect, leaking a client
// per retry and leaving a registry entry that never routed.
func TestDefect05InvalidNodeRefusedBeforeConnect(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	bad := []Node{
		{Host: "a", Port: 1, Vnodes: -1},
		{Host: "a", Port: 1, Vnodes: hashring.MaxVNodes + 1},
		{Host: "", Port: 1},
		{Host: "a", Port: 0},
		{Host: "a", Port: 70000},
	}
	for _, n := range bad {
		err := r.AddNode(t.Context(), n)
		if !errors.Is(err, errcode.ErrConfigInvalid) {
			t.Errorf("AddNode(%+v) = %v, want CONFIG.INVALID", n, err)
		}
	}
	if got := c.connectCount("a:1") + c.connectCount(":1") + c.connectCount("a:0") + c.connectCount("a:70000"); got != 0 {
		t.Fatalf("%d connects for invalid nodes", got)
	}
	// No registry entry was left: the same address joins normally.
	addNodes(t, r, Node{Host: "a", Port: 1, Vnodes: 10})
	if _, err := r.Route("k"); err != nil {
		t.Fatal(err)
	}
}

// Defect 5, the other way a join can fail after connect: the placement
// refuses the node. The client is closed and nothing stays registered.
func TestDefect05PlacementFailureClosesClient(t *testing.T) {
	c := newCluster()
	opts := baseOptions(c, clock.NewFake(epoch))
	refuse := errors.New("placement refuses")
	var fail atomic.Bool
	fail.Store(true)
	opts.Placement = func(ms []Member) (Placement, error) {
		if fail.Load() {
			return nil, refuse
		}
		return RingPlacement(nil)(ms)
	}
	r := newRouter(t, c, opts)
	if err := r.AddNode(t.Context(), node(1)); !errors.Is(err, refuse) {
		t.Fatalf("AddNode = %v", err)
	}
	if c.openCount() != 0 || len(r.LiveNodes()) != 0 {
		t.Fatalf("open = %d, live = %v", c.openCount(), r.LiveNodes())
	}
	fail.Store(false)
	addNodes(t, r, node(1))
	if c.connectCount(node(1).ID()) != 2 {
		t.Fatal("a second AddNode did not connect: the failed one left an entry")
	}
}

// Defect 6: replicas ≤ 0 (or fractional) was accepted and broke routing.
func TestDefect06ReplicaCountsAreValidated(t *testing.T) {
	c := newCluster()
	opts := baseOptions(c, clock.NewFake(epoch))
	opts.Replicas = -1
	if _, err := New(opts); !errors.Is(err, errcode.ErrConfigInvalid) {
		t.Fatalf("Replicas -1: %v", err)
	}
	opts.Replicas = 0 // the zero value means the default, 3
	r := newRouter(t, c, opts)
	addNodes(t, r, node(1), node(2), node(3), node(4))
	nodes, err := r.ExecuteAll(t.Context(), "k", func(context.Context, *client, Node) error { return nil })
	if err != nil || len(nodes) != 3 {
		t.Fatalf("ExecuteAll with default replicas: %v, %v", nodes, err)
	}
	for _, count := range []int{0, -2} {
		if _, err := r.RouteAll("k", count); !errors.Is(err, errcode.ErrConfigInvalid) {
			t.Errorf("RouteAll(k, %d) = %v", count, err)
		}
	}
}

// Defect 7: failover happened even when ShouldMarkDown said the error was
// not the node's fault. Decision: such an error goes back to the caller,
// the node stays, and no replica is tried.
func TestDefect07NotTheNodesFaultReturnsError(t *testing.T) {
	c := newCluster()
	errNotFound := errors.New("key not found")
	opts := baseOptions(c, clock.NewFake(epoch))
	opts.ShouldMarkDown = func(err error, _ Node) bool { return !errors.Is(err, errNotFound) }
	r := newRouter(t, c, opts)
	addNodes(t, r, node(1), node(2), node(3))
	calls := 0
	err := r.Execute(t.Context(), "k", func(context.Context, *client, Node) error {
		calls++
		return errNotFound
	})
	if !errors.Is(err, errNotFound) || calls != 1 {
		t.Fatalf("Execute = %v after %d calls; want the error, from the leader only", err, calls)
	}
	if len(r.LiveNodes()) != 3 || metricValue(t, r.metrics.failovers) != 0 {
		t.Fatalf("live = %v, failovers = %v", r.LiveNodes(), metricValue(t, r.metrics.failovers))
	}
	if _, err := r.ExecuteAll(t.Context(), "k", func(context.Context, *client, Node) error { return errNotFound }); !errors.Is(err, errNotFound) {
		t.Fatalf("ExecuteAll = %v", err)
	}
	if len(r.LiveNodes()) != 3 {
		t.Fatal("ExecuteAll marked nodes down for errors that are not their fault")
	}
}

// Defect 7, the caller's own cancellation is not the node's fault either.
func TestDefect07CallerCancellationMarksNothingDown(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	addNodes(t, r, node(1), node(2))
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	err := r.Execute(ctx, "k", func(ctx context.Context, _ *client, _ Node) error {
		calls++
		cancel()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) || calls != 1 || len(r.LiveNodes()) != 2 {
		t.Fatalf("err = %v, calls = %d, live = %v", err, calls, r.LiveNodes())
	}
}

// Defect 8: a hung disconnect blocked failover and Close.
func TestDefect08HungDisconnectBlocksNeitherFailoverNorClose(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	opts := baseOptions(c, clk)
	opts.CloseTimeout = 5 * time.Second
	hung := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	opts.Disconnect = func(*client, Node) error {
		select {
		case hung <- struct{}{}:
		default:
		}
		<-release
		return nil
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	addNodes(t, r, node(1), node(2))
	lead, _ := r.Route("k")
	served := make(chan Node, 1)
	err = r.Execute(t.Context(), "k", func(_ context.Context, _ *client, n Node) error {
		if n == lead.Node {
			return errRefused
		}
		served <- n
		return nil
	})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if n := <-served; n == lead.Node {
		t.Fatal("served by the failed leader")
	}
	<-hung // the leader's disconnect is running and stuck

	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	waitFor(t, "Close's timer", func() bool {
		next, ok := clk.NextDeadline()
		return ok && next.Sub(clk.Now()) == opts.CloseTimeout
	})
	clk.Advance(opts.CloseTimeout)
	if err := <-closed; !errors.Is(err, ErrCloseTimeout) {
		t.Fatalf("Close = %v, want ErrCloseTimeout", err)
	}
}

// Defect 8, second half: fn had no timeout. With AttemptTimeout a hung
// leader becomes a failed attempt and the replica serves the call.
func TestDefect08AttemptTimeoutFailsOverFromHungLeader(t *testing.T) {
	c := newCluster()
	opts := baseOptions(c, clock.NewFake(epoch))
	opts.AttemptTimeout = 20 * time.Millisecond
	r := newRouter(t, c, opts)
	addNodes(t, r, node(1), node(2))
	lead, _ := r.Route("k")
	var leaderErr error
	err := r.Execute(t.Context(), "k", func(ctx context.Context, _ *client, n Node) error {
		if n == lead.Node {
			<-ctx.Done() // hung until the attempt's deadline
			leaderErr = ctx.Err()
			return leaderErr
		}
		return nil
	})
	if err != nil || !errors.Is(leaderErr, context.DeadlineExceeded) {
		t.Fatalf("Execute = %v, leader saw %v", err, leaderErr)
	}
	waitFor(t, "the hung leader to leave the ring", func() bool { return !isLive(r, lead.Node) })
}

// Defect 9a: a hung health check let probes pile up. Probes never overlap,
// and a check that never returns still marks the node down.
func TestDefect09HungCheckDoesNotPileUp(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	var inFlight, maxInFlight, calls atomic.Int32
	release := make(chan struct{})
	opts := baseOptions(c, clk)
	opts.Health = &Health[*client]{
		Interval: probeInterval, Timeout: probeTimeout, FailureThreshold: 3,
		Check: func(context.Context, *client, Node) error {
			calls.Add(1)
			if cur := inFlight.Add(1); cur > maxInFlight.Load() {
				maxInFlight.Store(cur)
			}
			defer inFlight.Add(-1)
			<-release // ignores its context: hung
			return nil
		},
	}
	r := newRouter(t, c, opts)
	t.Cleanup(func() { close(release) }) // runs before the router's Close
	n := node(1)
	addNodes(t, r, n)

	waitArmed(t, clk, probeInterval)
	clk.Advance(probeInterval)
	waitArmed(t, clk, probeTimeout) // the first probe is running
	clk.Advance(probeTimeout)       // failure 1: timeout
	for range 2 {                   // failures 2 and 3: still running
		waitArmed(t, clk, probeInterval)
		clk.Advance(probeInterval)
	}
	waitFor(t, "mark-down of the hung node", func() bool { return !isLive(r, n) })
	if calls.Load() != 1 || maxInFlight.Load() != 1 {
		t.Fatalf("checks started = %d, max concurrent = %d; want 1 and 1", calls.Load(), maxInFlight.Load())
	}
}

// Defect 9b: failure counts survived a node's removal.
func TestDefect09FailureCountResetsOnRemoval(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	p := newProber()
	r := newRouter(t, c, healthOptions(c, clk, p, 2))
	n := node(1)
	addNodes(t, r, n)
	probe(t, clk, p, errUnhealthy) // 1 of 2
	waitArmed(t, clk, probeInterval)
	if err := r.RemoveNode(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	addNodes(t, r, n)
	probe(t, clk, p, errUnhealthy) // 1 of 2 again, not 2 of 2
	waitArmed(t, clk, probeInterval)
	if !isLive(r, n) {
		t.Fatal("a failure from before the removal counted against the re-added node")
	}
}

// Defect 9c: no jitter, so nodes that failed together retried in lockstep.
func TestDefect09ReconnectsAreJittered(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	opts := baseOptions(c, clk)
	opts.Rand = rand.NewPCG(1, 2)
	r := newRouter(t, c, opts)
	a, b := node(1), node(2)
	addNodes(t, r, a, b)
	c.setRefuse(a.ID(), -1)
	c.setRefuse(b.ID(), -1)
	r.MarkDown(a)
	r.MarkDown(b)
	blockUntil(t, clk, 2)
	first, _ := clk.NextDeadline()
	clk.Set(first)
	// Settled means both loops are waiting again: the one that fired has
	// failed and re-armed, the other is still pending. In lockstep both
	// fire at `first`, so two timers are armed only after both connected
	// (4 connects); waiting for the count alone could look before the
	// second loop ran and pass on lockstep retries.
	waitFor(t, "the earlier reconnect to fail and re-arm", func() bool {
		return c.connectCount(a.ID())+c.connectCount(b.ID()) >= 3 && clk.Waiters() == 2
	})
	if got := c.connectCount(a.ID()) + c.connectCount(b.ID()); got != 3 {
		t.Fatalf("%d connects at the first reconnect instant: the nodes retry in lockstep", got)
	}
}

// Defect 10: no closed state; AddNode after Close restarted everything.
func TestDefect10ClosedRouterRefusesEverything(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	r, err := New(baseOptions(c, clk))
	if err != nil {
		t.Fatal(err)
	}
	addNodes(t, r, node(1))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := r.AddNode(t.Context(), node(2)); !errors.Is(err, ErrClosed) {
		t.Fatalf("AddNode after Close = %v", err)
	}
	if c.connectCount(node(2).ID()) != 0 {
		t.Fatal("AddNode after Close connected")
	}
	if err := r.RemoveNode(t.Context(), node(1)); !errors.Is(err, ErrClosed) {
		t.Errorf("RemoveNode = %v", err)
	}
	if _, err := r.Route("k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Route = %v", err)
	}
	if _, err := r.RouteAll("k", 1); !errors.Is(err, ErrClosed) {
		t.Errorf("RouteAll = %v", err)
	}
	fn := func(context.Context, *client, Node) error { return nil }
	if err := r.Execute(t.Context(), "k", fn); !errors.Is(err, ErrClosed) {
		t.Errorf("Execute = %v", err)
	}
	if _, err := r.ExecuteAll(t.Context(), "k", fn); !errors.Is(err, ErrClosed) {
		t.Errorf("ExecuteAll = %v", err)
	}
	r.MarkDown(node(1))
	if clk.Waiters() != 0 || c.openCount() != 0 || errcode.Of(ErrClosed) != "ROUTER.CLOSED" {
		t.Fatalf("timers = %d, open = %d", clk.Waiters(), c.openCount())
	}
}

// Defect 2, for the first connect: RemoveNode while AddNode is connecting.
// AddNode reports the removal and the client it got is closed.
func TestDefect02RemoveNodeDuringAddNode(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	n := node(1)
	entered := make(chan struct{})
	release := make(chan struct{})
	c.setGate(func(context.Context, Node) error {
		close(entered)
		<-release // ignores its context, then succeeds
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- r.AddNode(t.Context(), n) }()
	<-entered
	if err := r.RemoveNode(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; !errors.Is(err, ErrNodeRemoved) || errcode.Of(err) != "ROUTER.NODE_REMOVED" {
		t.Fatalf("AddNode = %v, want ErrNodeRemoved", err)
	}
	if isLive(r, n) || c.openCount() != 0 {
		t.Fatalf("live = %v, open = %d", r.LiveNodes(), c.openCount())
	}
}
