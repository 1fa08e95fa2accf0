package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/hashring"
)

func TestNodeID(t *testing.T) {
	if got := (Node{Host: "10.0.0.1", Port: 6379}).ID(); got != "10.0.0.1:6379" {
		t.Fatalf("ID = %q", got)
	}
}

func TestOptionsValidateNamesFieldAndValue(t *testing.T) {
	c := newCluster()
	ok := func() Options[*client] { return Options[*client]{Connect: c.Connect} }
	cases := []struct {
		field  string
		mutate func(*Options[*client])
	}{
		{"Connect", func(o *Options[*client]) { o.Connect = nil }},
		{"Vnodes", func(o *Options[*client]) { o.Vnodes = -1 }},
		{"Vnodes", func(o *Options[*client]) { o.Vnodes = hashring.MaxVNodes + 1 }},
		{"Replicas", func(o *Options[*client]) { o.Replicas = -1 }},
		{"Retry.MaxRetries", func(o *Options[*client]) { o.Retry = &Retry{MaxRetries: -1} }},
		{"Retry.BaseDelay", func(o *Options[*client]) { o.Retry = &Retry{BaseDelay: -time.Second} }},
		{"Retry.MaxDelay", func(o *Options[*client]) { o.Retry = &Retry{MaxDelay: -time.Second} }},
		{"Retry.MaxDelay", func(o *Options[*client]) { o.Retry = &Retry{BaseDelay: time.Second, MaxDelay: time.Millisecond} }},
		{"Health.Check", func(o *Options[*client]) { o.Health = &Health[*client]{} }},
		{"Health.Interval", func(o *Options[*client]) {
			o.Health = &Health[*client]{Check: func(context.Context, *client, Node) error { return nil }, Interval: -1}
		}},
		{"Health.Timeout", func(o *Options[*client]) {
			o.Health = &Health[*client]{Check: func(context.Context, *client, Node) error { return nil }, Timeout: -1}
		}},
		{"Health.FailureThreshold", func(o *Options[*client]) {
			o.Health = &Health[*client]{Check: func(context.Context, *client, Node) error { return nil }, FailureThreshold: -1}
		}},
		{"Hash", func(o *Options[*client]) { o.Hash = hashring.XXHash; o.Placement = RingPlacement(nil) }},
		{"AttemptTimeout", func(o *Options[*client]) { o.AttemptTimeout = -1 }},
		{"CloseTimeout", func(o *Options[*client]) { o.CloseTimeout = -1 }},
	}
	for _, tc := range cases {
		o := ok()
		tc.mutate(&o)
		_, err := New(o)
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: New error = %v, want a ConfigError for that field", tc.field, err)
			continue
		}
		if !errors.Is(err, errcode.ErrConfigInvalid) || errcode.Of(err) != errcode.ConfigInvalid {
			t.Errorf("%s: error %v is not CONFIG.INVALID", tc.field, err)
		}
	}
	if err := ok().Validate(); err != nil {
		t.Fatalf("minimal options: %v", err)
	}
}

func TestDefaultsAreTheSpecs(t *testing.T) {
	c := newCluster()
	o := Options[*client]{Connect: c.Connect, Health: &Health[*client]{Check: func(context.Context, *client, Node) error { return nil }}}.withDefaults()
	if o.Vnodes != 100 || o.Replicas != 3 {
		t.Errorf("vnodes, replicas = %d, %d; want 100, 3", o.Vnodes, o.Replicas)
	}
	if *o.Retry != (Retry{MaxRetries: 5, BaseDelay: 200 * time.Millisecond, MaxDelay: 10 * time.Second}) {
		t.Errorf("retry = %+v", *o.Retry)
	}
	h := o.Health
	if h.Interval != 5*time.Second || h.Timeout != 2*time.Second || h.FailureThreshold != 2 {
		t.Errorf("health = %s %s %d", h.Interval, h.Timeout, h.FailureThreshold)
	}
	if !o.ShouldMarkDown(errors.New("any"), Node{}) {
		t.Error("ShouldMarkDown default must say yes")
	}
}

func TestEmptyRouterHasNoNodes(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	if _, err := r.Route("k"); !errors.Is(err, ErrNoNodes) {
		t.Errorf("Route: %v", err)
	}
	if _, err := r.RouteAll("k", 2); !errors.Is(err, ErrNoNodes) {
		t.Errorf("RouteAll: %v", err)
	}
	if err := r.Execute(t.Context(), "k", func(context.Context, *client, Node) error { return nil }); !errors.Is(err, ErrNoNodes) {
		t.Errorf("Execute: %v", err)
	}
	if _, err := r.ExecuteAll(t.Context(), "k", func(context.Context, *client, Node) error { return nil }); !errors.Is(err, ErrNoNodes) {
		t.Errorf("ExecuteAll: %v", err)
	}
	if errcode.Of(ErrNoNodes) != "ROUTER.NO_NODES" {
		t.Errorf("code = %q", errcode.Of(ErrNoNodes))
	}
}

// The router must place keys exactly where a hashring with the same nodes,
// weights and order does: that is what keeps it compatible with the
// TypeScript router.
func TestRouteMatchesTheRing(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	nodes := []Node{node(1), {Host: "10.0.0.2", Port: 6379, Vnodes: 200}, node(3)}
	addNodes(t, r, nodes...)
	ring := hashring.New(nil)
	for _, n := range []struct {
		id string
		v  int
	}{{"10.0.0.1:6379", 100}, {"10.0.0.2:6379", 200}, {"10.0.0.3:6379", 100}} {
		if err := ring.Add(n.id, n.v); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2000 {
		key := fmt.Sprintf("key:%d", i)
		rt, err := r.Route(key)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ring.Get(key)
		if rt.Node.ID() != want || rt.Client.node.ID() != want {
			t.Fatalf("%s: routed to %s (client of %s), ring says %s", key, rt.Node.ID(), rt.Client.node.ID(), want)
		}
		all, err := r.RouteAll(key, 3)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(all))
		for j, a := range all {
			got[j] = a.Node.ID()
		}
		if wantAll := ring.GetN(key, 3); !slices.Equal(got, wantAll) {
			t.Fatalf("%s: RouteAll = %v, ring = %v", key, got, wantAll)
		}
	}
	if got := r.LiveNodes()[1].Vnodes; got != 200 {
		t.Errorf("weighted node has %d vnodes", got)
	}
	if got := r.LiveNodes()[0].Vnodes; got != DefaultVnodes {
		t.Errorf("default node has %d vnodes", got)
	}
}

func TestRouteAllIsCappedByLiveNodes(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	addNodes(t, r, node(1), node(2))
	all, err := r.RouteAll("user:1", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Node.ID() == all[1].Node.ID() {
		t.Fatalf("RouteAll = %v, want the 2 distinct live nodes", all)
	}
	lead, _ := r.Route("user:1")
	if all[0].Node != lead.Node {
		t.Fatalf("RouteAll does not start with the leader: %v vs %v", all[0].Node, lead.Node)
	}
}

func TestAddNodeRetriesWithBackoffThenJoins(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	r := newRouter(t, c, baseOptions(c, clk))
	n := node(1)
	c.setRefuse(n.ID(), 2)
	done := make(chan error, 1)
	go func() { done <- r.AddNode(t.Context(), n) }()

	// zeroSource: delay(n) = nominal − nominal/2 = 50 ms, then 100 ms.
	for i, d := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond} {
		waitArmed(t, clk, d)
		if got := c.connectCount(n.ID()); got != i+1 {
			t.Fatalf("before retry %d: %d connects", i+1, got)
		}
		clk.Advance(d)
	}
	if err := <-done; err != nil {
		t.Fatalf("AddNode: %v", err)
	}
	if c.connectCount(n.ID()) != 3 || !isLive(r, n) {
		t.Fatalf("connects = %d, live = %v", c.connectCount(n.ID()), isLive(r, n))
	}
}

func TestAddNodeGivesUpAfterMaxRetries(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	r := newRouter(t, c, baseOptions(c, clk))
	n := node(1)
	c.setRefuse(n.ID(), -1)
	done := make(chan error, 1)
	go func() { done <- r.AddNode(t.Context(), n) }()
	for _, d := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond} {
		waitArmed(t, clk, d)
		clk.Advance(d)
	}
	err := <-done
	var ce *ConnectError
	if !errors.As(err, &ce) || ce.Attempts != 3 || !errors.Is(err, errRefused) || errcode.Of(err) != "ROUTER.CONNECT_FAILED" {
		t.Fatalf("AddNode error = %v, want a ConnectError after 3 attempts", err)
	}
	if isLive(r, n) {
		t.Fatal("failed node is live")
	}
	// Nothing was left registered: a new AddNode connects again.
	c.setRefuse(n.ID(), 0)
	addNodes(t, r, n)
	if c.connectCount(n.ID()) != 4 {
		t.Fatalf("connects = %d, want 4", c.connectCount(n.ID()))
	}
}

func TestAddNodeWhenPresentKeepsWeight(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	addNodes(t, r, Node{Host: "a", Port: 1, Vnodes: 50})
	addNodes(t, r, Node{Host: "a", Port: 1, Vnodes: 300})
	if got := r.LiveNodes(); len(got) != 1 || got[0].Vnodes != 50 {
		t.Fatalf("live = %v", got)
	}
	if c.connectCount("a:1") != 1 {
		t.Fatalf("connects = %d", c.connectCount("a:1"))
	}
}

func TestRemoveNodeLeavesRingAndClosesClient(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	addNodes(t, r, node(1), node(2))
	if err := r.RemoveNode(t.Context(), Node{Host: node(1).Host, Port: node(1).Port, Vnodes: 999}); err != nil {
		t.Fatal(err)
	}
	if isLive(r, node(1)) || c.openCount() != 1 {
		t.Fatalf("live = %v, open clients = %d", r.LiveNodes(), c.openCount())
	}
	for i := range 200 {
		if rt, _ := r.Route(fmt.Sprint(i)); rt.Node.ID() != node(2).ID() {
			t.Fatalf("key routed to %s after removal", rt.Node.ID())
		}
	}
	if err := r.RemoveNode(t.Context(), node(9)); err != nil {
		t.Fatalf("removing an unknown node: %v", err)
	}
}

func TestMarkDownReconnectsWithBackoffAndOriginalWeight(t *testing.T) {
	c := newCluster()
	clk := clock.NewFake(epoch)
	opts := baseOptions(c, clk)
	logs := &logRecorder{}
	opts.Logger = slog.New(logs)
	r := newRouter(t, c, opts)
	heavy := Node{Host: "10.0.0.2", Port: 6379, Vnodes: 250}
	addNodes(t, r, node(1), heavy, node(3))
	before := routes(t, r, 500)

	c.setRefuse(heavy.ID(), -1)
	r.MarkDown(heavy)
	if isLive(r, heavy) {
		t.Fatal("marked-down node still live")
	}
	waitOpen(t, c, 2)
	// Backoff doubles from the base to the max: with zero jitter draws the
	// waits are nominal − nominal/2 of 100, 200, 400, 800, 1000, 1000 ms.
	for i, nominal := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		d := (nominal - nominal/2) * time.Millisecond
		waitArmed(t, clk, d)
		if got := c.connectCount(heavy.ID()); got != 1+i {
			t.Fatalf("before reconnect %d: %d connects", i+1, got)
		}
		if i == 5 {
			c.setRefuse(heavy.ID(), 0)
		}
		clk.Advance(d)
	}
	waitFor(t, "rejoin", func() bool { return isLive(r, heavy) })
	var got Node
	for _, l := range r.LiveNodes() {
		if l.ID() == heavy.ID() {
			got = l
		}
	}
	if got.Vnodes != 250 {
		t.Fatalf("rejoined with %d vnodes, want the original 250", got.Vnodes)
	}
	if after := routes(t, r, 500); !slices.Equal(before, after) {
		t.Fatal("placement after rejoin differs from before the mark-down")
	}
	rt, _ := r.RouteAll("x", 3)
	for _, x := range rt {
		if x.Node.ID() == heavy.ID() && x.Client.gen != 7 {
			t.Fatalf("rejoined node routes to client generation %d, want the 7th connect", x.Client.gen)
		}
	}
	if n := logs.count("router: node marked down", heavy.ID()); n != 1 {
		t.Errorf("%d mark-down events", n)
	}
	if n := logs.count("router: reconnect attempt", heavy.ID()); n != 6 {
		t.Errorf("%d reconnect-attempt events, want 6", n)
	}
	if n := logs.count("router: node rejoined", heavy.ID()); n != 1 {
		t.Errorf("%d rejoin events", n)
	}
	if v := metricValue(t, r.metrics.reconnects.WithLabelValues(heavy.ID())); v != 6 {
		t.Errorf("reconnect attempts metric = %v", v)
	}
	if v := metricValue(t, r.metrics.markDowns.WithLabelValues(heavy.ID(), ReasonManual)); v != 1 {
		t.Errorf("mark-downs metric = %v", v)
	}
}

func waitOpen(t *testing.T, c *cluster, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d open clients", n), func() bool { return c.openCount() == n })
}

// routes returns the leader of n keys.
func routes(t *testing.T, r *Router[*client], n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		rt, err := r.Route(fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = rt.Node.ID()
	}
	return out
}

func TestExecuteFailsOverToTheNextReplica(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	addNodes(t, r, node(1), node(2), node(3))
	owners, _ := r.RouteAll("user:1", 3)
	leader, second := owners[0].Node, owners[1].Node
	var tried []string
	err := r.Execute(t.Context(), "user:1", func(_ context.Context, cl *client, n Node) error {
		tried = append(tried, n.ID())
		if cl.node.ID() != n.ID() {
			t.Errorf("fn got the client of %s for node %s", cl.node.ID(), n.ID())
		}
		if n.ID() == leader.ID() {
			return errRefused
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if !slices.Equal(tried, []string{leader.ID(), second.ID()}) {
		t.Fatalf("tried %v, want leader then next replica", tried)
	}
	// The call skipped the leader at once; the placement without it is
	// published by the router's worker right after.
	if rt, _ := r.Route("user:1"); rt.Node == leader {
		t.Fatal("Route still answers with the failed leader")
	}
	waitFor(t, "the failed leader to leave the ring", func() bool { return !isLive(r, leader) })
	if v := metricValue(t, r.metrics.failovers); v != 1 {
		t.Errorf("failovers = %v", v)
	}
	if v := metricValue(t, r.metrics.markDowns.WithLabelValues(leader.ID(), ReasonExecute)); v != 1 {
		t.Errorf("mark-downs = %v", v)
	}
}

func TestExecuteFailsOnlyWhenEveryReplicaFailed(t *testing.T) {
	c := newCluster()
	opts := baseOptions(c, clock.NewFake(epoch))
	opts.Replicas = 2
	r := newRouter(t, c, opts)
	addNodes(t, r, node(1), node(2), node(3))
	calls := 0
	err := r.Execute(t.Context(), "k", func(_ context.Context, _ *client, n Node) error {
		calls++
		return fmt.Errorf("boom on %s: %w", n.ID(), errRefused)
	})
	var ee *ExecuteError
	if !errors.As(err, &ee) || len(ee.Failures) != 2 || calls != 2 {
		t.Fatalf("err = %v after %d calls, want an ExecuteError over the 2 replicas", err, calls)
	}
	if !errors.Is(err, ErrAllReplicasFailed) || !errors.Is(err, errRefused) || errcode.Of(err) != "ROUTER.ALL_REPLICAS_FAILED" {
		t.Fatalf("error chain of %v", err)
	}
	waitFor(t, "both tried nodes to leave the ring", func() bool { return len(r.LiveNodes()) == 1 })
}

func TestExecuteAllRunsOnLeaderAndReplicas(t *testing.T) {
	c := newCluster()
	opts := baseOptions(c, clock.NewFake(epoch))
	opts.Replicas = 2
	r := newRouter(t, c, opts)
	addNodes(t, r, node(1), node(2), node(3))
	owners, _ := r.RouteAll("user:1", 2)

	nodes, err := r.ExecuteAll(t.Context(), "user:1", func(context.Context, *client, Node) error { return nil })
	if err != nil || len(nodes) != 2 || nodes[0] != owners[0].Node || nodes[1] != owners[1].Node {
		t.Fatalf("ExecuteAll = %v, %v; want %v leader first", nodes, err, owners)
	}

	// One replica failing still succeeds, with the failed node marked down.
	nodes, err = r.ExecuteAll(t.Context(), "user:1", func(_ context.Context, _ *client, n Node) error {
		if n == owners[0].Node {
			return errRefused
		}
		return nil
	})
	if err != nil || len(nodes) != 1 || nodes[0] != owners[1].Node {
		t.Fatalf("partial ExecuteAll = %v, %v", nodes, err)
	}
	waitFor(t, "the failed leader to leave the ring", func() bool { return !isLive(r, owners[0].Node) })

	// All failing is an error.
	_, err = r.ExecuteAll(t.Context(), "user:1", func(context.Context, *client, Node) error { return errRefused })
	if !errors.Is(err, ErrAllReplicasFailed) {
		t.Fatalf("all failed: %v", err)
	}
}

func TestCollectorsRegisterAndCount(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	reg := prometheus.NewRegistry()
	for _, col := range r.Collectors() {
		if err := reg.Register(col); err != nil {
			t.Fatal(err)
		}
	}
	addNodes(t, r, node(1), node(2))
	if v := metricValue(t, r.metrics.liveNodes); v != 2 {
		t.Fatalf("live_nodes = %v", v)
	}
	rt, _ := r.Route("k")
	_ = r.Execute(t.Context(), "k", func(context.Context, *client, Node) error { return nil })
	if v := metricValue(t, r.metrics.routes.WithLabelValues(rt.Node.ID())); v != 2 {
		t.Fatalf("routes{%s} = %v", rt.Node.ID(), v)
	}
	r.MarkDown(node(1))
	if v := metricValue(t, r.metrics.liveNodes); v != 1 {
		t.Fatalf("live_nodes after mark-down = %v", v)
	}
	families, err := reg.Gather()
	if err != nil || len(families) < 4 {
		t.Fatalf("gather: %d families, %v", len(families), err)
	}
}
