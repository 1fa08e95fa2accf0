// Package zonetest runs a cluster of zone nodes in one process, for this
// repository's tests and for users' tests of their own modules: N
// runtimes, each registered in coord through an embedded etcd (role
// "zone", a lease, the region table from etcd), connected pairwise over
// the real node link with mutual TLS, through a link/faulty network that
// can drop, delay, duplicate and cut.
//
// What it owns: the etcd member (unless given one), each node's coord
// client, Ownership, link node and Runtime, and a membership follower per
// cluster that answers each runtime's fence check (a peer's message is
// applied only while the lease it carries is the live lease of that
// peer). Everything it starts is stopped at the test's cleanup.
//
// The nodes are stepped by the test, one tick at a time (Step: each node
// in index order), on the test's goroutine. Sync waits until every message
// sent so far has arrived, so a test can run the cluster in lockstep
// (StepSync): a message sent during round T is applied by its receiver at
// the start of its next Step — in round T+1, or already in round T when
// the receiver comes later in the order and the message arrived first.
//
// Faults on one node: StepNodes steps a subset (the rest lag), Halt and
// Resume stop and restart a node's stepping (a stalled process, link and
// lease up), Kill stops it for good as a crash would (its lease runs
// out), CutEtcd cuts its coord client from etcd (it is fenced after the
// TTL), CutPeers and HealPeers cut and heal the link between two nodes.
// Ghost reads a node's render ghost of an entity: source, epoch, chunk and
// position. Each node's coord client reaches etcd through its own proxy,
// which is what CutEtcd cuts.
//
// Config.Memory runs the same API without etcd and without the link: the
// nodes talk over zonesim's in-memory network with no faults and hold
// their leases and table in zonesim's Leases and Territory. Every message
// sent in a round is delivered before the next round's steps, so a run is
// deterministic and costs no socket, no TLS and no wait; a test whose
// property is the protocol's, not the link's or etcd's, runs there.
package zonetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/link/faulty"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonecoord"
	"github.com/shardwise/shardwise/zone/zonelink"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// Poll calls cond until it holds or limit has passed, and reports whether
// it held: the one poll-with-a-deadline of the harness (what another
// goroutine or the link makes true cannot be waited on otherwise).
func Poll(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-time.After(time.Millisecond) // do not spin on a shared CPU
	}
	return true
}

// Delivered reports whether every control message and replication batch
// the runtimes sent one another so far has arrived (it is applied at the
// receiver's next Step), by their Progress counters.
func Delivered(rts []*zone.Runtime) bool {
	for _, a := range rts {
		pa := a.Progress()
		if pa.Queued != pa.Written {
			return false
		}
		for _, b := range rts {
			if a == b {
				continue
			}
			sent, got := pa.Sent[b.Name()], b.Progress().Received[a.Name()]
			if got.Control < sent.Control || got.Seq < sent.Seq {
				return false
			}
		}
	}
	return true
}

// Config describes a test cluster. Zero fields take the defaults
// documented on them.
type Config struct {
	// Nodes is how many zone nodes run. Default 4. They are named
	// "zone-0" … "zone-<N-1>", with node numbers 1 … N.
	Nodes int
	// Grid is the world and its regions. Default: an 8 km torus with
	// 2 km regions (16 regions).
	Grid cells.GridConfig
	// Table splits the regions between the node names. Default
	// cells.Uniform (contiguous bands of rows).
	Table func(grid cells.Grid, names []string) (*cells.Table, error)
	// Module builds node i's module. Required.
	Module func(i int, name string) (zone.Module, error)
	// Runtime, if set, adjusts node i's runtime configuration before New.
	Runtime func(i int, cfg *zone.Config)
	// Seed seeds the faulty network. Default 1.
	Seed uint64
	// Clock is every runtime's wall clock (entity ids). Default a
	// clock.Fake at 2026-01-01T00:00Z, so runs mint the same ids.
	Clock clock.Clock
	// TTL is each node's lease TTL. Default 6s: long enough that a
	// loaded CI machine (the race detector, other suites beside it) does
	// not let a lease lapse mid-test, which fences its node and breaks
	// whatever the test checks for a reason it does not name. A test of
	// lease loss revokes the lease, or sets a short TTL and cuts etcd off.
	TTL time.Duration
	// Etcd is an etcd member to use; default: a fresh embedded one,
	// closed at cleanup.
	Etcd *coord.Embedded
	// Logger receives the nodes' records. Default: discard, unless
	// SHARDWISE_TEST_LOG is set (then stderr).
	Logger *slog.Logger
	// Memory runs the nodes on zonesim's in-memory network instead of
	// etcd and the link (see the package doc): Node.Link, Ownership,
	// Coord and Addr and Cluster.Net, Etcd and Admin are nil or empty;
	// Apply installs the table on every node at once; Kill and CutEtcd
	// end the node's lease at once (its peers refuse it from then on,
	// where etcd would take the TTL); CutPeers and HealPeers cut and heal
	// the in-memory pair. Seed seeds the network; TTL and Etcd are not
	// used.
	Memory bool
}

// Node is one zone node of the cluster.
type Node struct {
	Index     int
	Name      string
	Number    int
	Module    zone.Module
	Runtime   *zone.Runtime
	Ownership *zonecoord.Ownership
	Link      *link.Node
	Coord     *coord.Client
	Addr      string

	etcd    *testenv.TCPProxy // Coord's way to etcd: CutEtcd cuts it
	halted  bool              // Halt: not stepped until Resume
	killed  bool              // Kill: stopped for good
	etcdCut bool
}

// Cluster is a running test cluster.
type Cluster struct {
	tb     testing.TB
	Nodes  []*Node
	Net    *faulty.Network
	Etcd   *coord.Embedded
	Admin  *coord.Client // an operator's client: apply tables with it
	Grid   cells.Grid
	prefix string

	mu     sync.Mutex
	leases map[string]int64 // live members' leases, from the watch

	// Memory is the in-memory network of a Config.Memory cluster (nil
	// otherwise): a test may set its faults (zonesim.Network.SetFaults).
	Memory *zonesim.Network
	mem    *memory
}

// memory is a Config.Memory cluster's stand-in for etcd.
type memory struct {
	leases *zonesim.Leases
	terr   map[string]*zonesim.Territory
	tick   uint64
}

func (c Config) withDefaults() Config {
	if c.Nodes == 0 {
		c.Nodes = 4
	}
	if c.Grid == (cells.GridConfig{}) {
		c.Grid = cells.GridConfig{RegionEdge: 2048}
		c.Grid.World.Width, c.Grid.World.Height = 8000, 8000
	}
	c.Grid = c.Grid.WithDefaults()
	if c.Table == nil {
		c.Table = func(g cells.Grid, names []string) (*cells.Table, error) { return cells.Uniform(g, 1, names) }
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Clock == nil {
		c.Clock = clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	if c.TTL == 0 {
		c.TTL = 6 * time.Second
	}
	if c.Logger == nil {
		if os.Getenv("SHARDWISE_TEST_LOG") != "" {
			c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		} else {
			c.Logger = slog.New(slog.DiscardHandler)
		}
	}
	return c
}

// Start starts the cluster and waits until every node holds the table and
// is connected to every peer. It fails tb on any error.
func Start(tb testing.TB, cfg Config) *Cluster {
	tb.Helper()
	cfg = cfg.withDefaults()
	if cfg.Module == nil {
		tb.Fatal("zonetest: Config.Module is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	grid, err := cells.NewGrid(cfg.Grid)
	if err != nil {
		tb.Fatal(err)
	}
	if cfg.Memory {
		return startMemory(tb, cfg, grid)
	}
	c := &Cluster{tb: tb, Grid: grid, Etcd: cfg.Etcd, Net: faulty.New(cfg.Seed, nil),
		prefix: fmt.Sprintf("/zonetest/%d/", time.Now().UnixNano()), leases: make(map[string]int64)}
	if c.Etcd == nil {
		e, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{
			DataDir: tb.TempDir(), Heartbeat: 50 * time.Millisecond, Election: 500 * time.Millisecond, UnsafeNoFsync: true,
		})
		if err != nil {
			tb.Fatalf("zonetest: embedded etcd: %v", err)
		}
		tb.Cleanup(func() { _ = e.Close() })
		c.Etcd = e
	}
	c.Admin = c.connect(ctx, cfg.Logger)
	if err := c.watchMembers(); err != nil {
		tb.Fatal(err)
	}

	ca, err := link.NewCA("zonetest", time.Now().Add(-time.Hour), 24*time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	names := make([]string, cfg.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("zone-%d", i)
	}
	for i, name := range names {
		c.Nodes = append(c.Nodes, c.startLink(ca, i, name, cfg.Logger))
	}
	for _, a := range c.Nodes {
		for _, b := range c.Nodes {
			if a != b {
				if err := a.Link.AddPeer(b.Name, b.Addr); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
	for _, n := range c.Nodes {
		n.etcd = testenv.StartTCPProxy(tb, c.Etcd.Endpoints()[0])
		n.Coord = c.connectVia(ctx, cfg.Logger, n.etcd.Endpoint())
		own, err := zonecoord.Join(ctx, zonecoord.JoinConfig{Coord: n.Coord, Name: n.Name, TTL: cfg.TTL, Logger: cfg.Logger,
			Addrs: map[string]string{"link": n.Addr}})
		if err != nil {
			tb.Fatalf("zonetest: %s joins: %v", n.Name, err)
		}
		tb.Cleanup(func() { _ = own.Close() })
		n.Ownership = own
		n.Number = int(own.NodeID())
	}
	table, err := cfg.Table(grid, names)
	if err != nil {
		tb.Fatal(err)
	}
	c.Apply(table)
	for _, n := range c.Nodes {
		rc := zone.Config{
			Name: n.Name, Node: n.Number, Grid: cfg.Grid, Territory: n.Ownership, Transport: zonelink.NewLinkTransport(n.Link),
			Clock: cfg.Clock, Logger: cfg.Logger.With("node", n.Name), Accept: c.accept, LivePeers: c.livePeers,
		}
		if cfg.Runtime != nil {
			cfg.Runtime(n.Index, &rc)
		}
		mod, err := cfg.Module(n.Index, n.Name)
		if err != nil {
			tb.Fatal(err)
		}
		rt, err := zone.New(rc, mod)
		if err != nil {
			tb.Fatalf("zonetest: %s runtime: %v", n.Name, err)
		}
		tb.Cleanup(func() { _ = rt.Close() })
		n.Module, n.Runtime = mod, rt
	}
	c.WaitConnected()
	return c
}

func (c *Cluster) connect(ctx context.Context, log *slog.Logger) *coord.Client {
	return c.connectVia(ctx, log, c.Etcd.Endpoints()...)
}

// connectVia connects a coord client to etcd through endpoints.
func (c *Cluster) connectVia(ctx context.Context, log *slog.Logger, endpoints ...string) *coord.Client {
	cl, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: endpoints, Prefix: c.prefix, Logger: log, DialTimeout: 5 * time.Second})
	if err != nil {
		c.tb.Fatalf("zonetest: coord: %v", err)
	}
	c.tb.Cleanup(func() { _ = cl.Close() })
	return cl
}

func (c *Cluster) startLink(ca *link.CA, i int, name string, log *slog.Logger) *Node {
	nc, err := ca.Issue(name, time.Now().Add(-time.Hour), 24*time.Hour)
	if err != nil {
		c.tb.Fatal(err)
	}
	cert, err := nc.TLSCertificate()
	if err != nil {
		c.tb.Fatal(err)
	}
	l, err := link.New(link.Config{
		Certificate: cert, ClusterCA: ca.Pool(),
		BackoffMin: 5 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		AckTimeout: 500 * time.Millisecond,
		Seed:       uint64(i + 1), Logger: log.With("node", name),
		Dial:               c.Net.Dialer(name),
		StreamInterceptors: []grpc.StreamClientInterceptor{c.Net.StreamInterceptor(name)},
	})
	if err != nil {
		c.tb.Fatal(err)
	}
	c.tb.Cleanup(func() { _ = l.Close() })
	lis, err := c.Net.Listen(name, "127.0.0.1:0")
	if err != nil {
		c.tb.Fatal(err)
	}
	if err := l.Serve(lis); err != nil {
		c.tb.Fatal(err)
	}
	return &Node{Index: i, Name: name, Link: l, Addr: lis.Addr().String()}
}

// watchMembers keeps the live leases for the runtimes' fence check.
func (c *Cluster) watchMembers() error {
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := c.Admin.WatchMembers(ctx)
	if err != nil {
		cancel()
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range ch {
			c.mu.Lock()
			if ev.Kind == coord.MemberLeft {
				if c.leases[ev.Member.Name] == ev.Member.Lease {
					delete(c.leases, ev.Member.Name)
				}
			} else {
				c.leases[ev.Member.Name] = ev.Member.Lease
			}
			c.mu.Unlock()
		}
	}()
	c.tb.Cleanup(func() {
		cancel()
		<-done
	})
	return nil
}

// livePeers is every runtime's view of the live members (Config.LivePeers;
// a runtime leaves itself out).
func (c *Cluster) livePeers() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.leases)
}

// accept is every runtime's fence check: a message is applied only while
// the lease it carries is its sender's live lease.
func (c *Cluster) accept(peer string, lease int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leases[peer] == lease && lease != 0
}

// Apply stores a region table and waits until every node that is not
// fenced holds it.
func (c *Cluster) Apply(t *cells.Table) {
	c.tb.Helper()
	if c.mem != nil {
		for _, terr := range c.mem.terr {
			terr.Install(t)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Admin.ApplyRegions(ctx, t, coord.ApplyOptions{Force: true}); err != nil {
		c.tb.Fatalf("zonetest: apply table v%d: %v", t.Version(), err)
	}
	for _, n := range c.Nodes {
		if n.Ownership == nil || n.killed || n.etcdCut {
			continue
		}
		select {
		case <-n.Ownership.Fenced():
			continue
		default:
		}
		if err := n.Ownership.WaitVersion(ctx, t.Version()); err != nil {
			c.tb.Fatalf("zonetest: %s waits for table v%d: %v", n.Name, t.Version(), err)
		}
	}
	// Every node's lease must be known before messages flow.
	for _, n := range c.Nodes {
		if n.Ownership != nil && !n.killed && !n.etcdCut && !Poll(30*time.Second, func() bool { return c.accept(n.Name, n.Ownership.Lease()) }) {
			c.tb.Fatalf("zonetest: %s's lease never showed in the membership", n.Name)
		}
	}
}

// startMemory is Start for Config.Memory.
func startMemory(tb testing.TB, cfg Config, grid cells.Grid) *Cluster {
	tb.Helper()
	names := make([]string, cfg.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("zone-%d", i)
	}
	table, err := cfg.Table(grid, names)
	if err != nil {
		tb.Fatal(err)
	}
	c := &Cluster{tb: tb, Grid: grid, Memory: zonesim.NewNetwork(cfg.Seed, zonesim.Faults{}),
		mem: &memory{leases: zonesim.NewLeases(names), terr: make(map[string]*zonesim.Territory)}}
	for i, name := range names {
		n := &Node{Index: i, Name: name, Number: i + 1}
		terr := c.mem.leases.Territory(name, table)
		c.mem.terr[name] = terr
		rc := zone.Config{
			Name: name, Node: n.Number, Grid: cfg.Grid, Territory: terr, Transport: c.Memory.Endpoint(name),
			Clock: cfg.Clock, Logger: cfg.Logger.With("node", name),
			Accept: c.mem.leases.Accept, LivePeers: c.mem.leases.LivePeers(name),
		}
		if cfg.Runtime != nil {
			cfg.Runtime(i, &rc)
		}
		mod, err := cfg.Module(i, name)
		if err != nil {
			tb.Fatal(err)
		}
		rt, err := zone.New(rc, mod)
		if err != nil {
			tb.Fatalf("zonetest: %s runtime: %v", name, err)
		}
		tb.Cleanup(func() { _ = rt.Close() })
		n.Module, n.Runtime = mod, rt
		c.Nodes = append(c.Nodes, n)
	}
	return c
}

// WaitConnected waits until every node is connected to every peer.
func (c *Cluster) WaitConnected() {
	c.tb.Helper()
	if c.mem != nil {
		return // the in-memory network is always connected
	}
	for _, a := range c.Nodes {
		for _, b := range c.Nodes {
			if a != b && !Poll(30*time.Second, func() bool { return a.Link.Connected(b.Name) }) {
				c.tb.Fatalf("zonetest: %s never connected to %s", a.Name, b.Name)
			}
		}
	}
}

// Step runs one tick on every node, in index order, and checks the
// runtime invariants after each (Runtime.CheckInvariants) and, after
// all, that no entity is simulated on two nodes (CheckOneSimulator): a
// breach fails the test. Halted and killed nodes are not stepped.
func (c *Cluster) Step() {
	c.tb.Helper()
	c.step(c.Nodes)
}

func (c *Cluster) step(nodes []*Node) {
	c.tb.Helper()
	if c.mem != nil {
		// What was sent in the round before arrives before this one's
		// steps (a node not stepped takes it in at its next step).
		c.mem.tick++
		c.Memory.Deliver(c.mem.tick)
	}
	for _, n := range nodes {
		if n.halted || n.killed {
			continue
		}
		n.Runtime.Step()
		if err := n.Runtime.CheckInvariants(); err != nil {
			c.tb.Fatalf("zonetest: after %s's tick %d: %v", n.Name, n.Runtime.World().CurrentTick().N, err)
		}
	}
	if err := c.CheckOneSimulator(); err != nil {
		c.tb.Fatalf("zonetest: %v", err)
	}
}

// CheckOneSimulator checks runtime invariant 1 across the cluster: no
// entity with a position is simulated (Runtime.Simulated) on two nodes.
// A killed node simulates nothing.
func (c *Cluster) CheckOneSimulator() error {
	on := make(map[ecs.ID]string)
	var errs []error
	for _, n := range c.Nodes {
		if n.killed {
			continue
		}
		r := n.Runtime
		r.Positions().Each(func(id ecs.ID, _ *zone.Position) {
			if !r.Simulated(id) {
				return
			}
			if other, ok := on[id]; ok && len(errs) < 8 {
				errs = append(errs, fmt.Errorf("runtime invariant 1: entity %d is simulated on %s and on %s", id, other, n.Name))
			}
			on[id] = n.Name
		})
	}
	return errors.Join(errs...)
}

// Sync waits until every message the nodes sent so far has arrived at its
// receiver (it is applied at the receiver's next Step). It fails the test
// after limit. Under faults that drop messages Sync may never hold: poll
// for convergence instead.
func (c *Cluster) Sync(limit time.Duration) {
	c.tb.Helper()
	if !Poll(limit, c.synced) {
		c.tb.Fatalf("zonetest: messages still in flight after %v", limit)
	}
}

func (c *Cluster) synced() bool {
	if c.mem != nil {
		return true // every message sent is delivered before the next steps
	}
	rts := make([]*zone.Runtime, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		if !n.killed {
			rts = append(rts, n.Runtime)
		}
	}
	return Delivered(rts)
}

// StepSync steps every node n times, with a Sync after each tick.
func (c *Cluster) StepSync(n int) {
	c.tb.Helper()
	for range n {
		c.Step()
		c.Sync(10 * time.Second)
	}
}

// Node returns the node named name.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Synced reports, without waiting, whether every message the nodes sent so
// far has arrived (Sync's condition): for a test that steps under faults
// and polls with its own deadline, where Sync could wait for a message
// that was dropped.
func (c *Cluster) Synced() bool { return c.synced() }

// Accepts reports whether the runtimes' fence check accepts, now, a
// message from peer stamped with lease: false once the membership watch
// has seen that lease end (a revoke, an expiry).
func (c *Cluster) Accepts(peer string, lease int64) bool {
	if c.mem != nil {
		return c.mem.leases.Accept(peer, lease)
	}
	return c.accept(peer, lease)
}

// ---- faults and partial steps ----

// mustNode returns the node named name, failing the test when there is none.
func (c *Cluster) mustNode(name string) *Node {
	c.tb.Helper()
	n := c.Node(name)
	if n == nil {
		c.tb.Fatalf("zonetest: no node %q", name)
	}
	return n
}

// StepNodes runs one tick on the named nodes only, in index order, with
// Step's checks: the others lag behind by a tick (a slow node, or a test
// that orders deliveries by stepping one side first). A halted or killed
// node named is not stepped.
func (c *Cluster) StepNodes(names ...string) {
	c.tb.Helper()
	var nodes []*Node
	for _, n := range c.Nodes {
		for _, name := range names {
			if n.Name == name {
				nodes = append(nodes, n)
				break
			}
		}
	}
	if len(nodes) != len(names) {
		c.tb.Fatalf("zonetest: StepNodes(%q): not every name is a node", names)
	}
	c.step(nodes)
}

// Halt stops stepping the named node (Step, StepSync and StepNodes pass
// it over) until Resume: a stalled process, whose link and lease stay up,
// so its peers go on sending to it and its inbox fills.
func (c *Cluster) Halt(name string) { c.mustNode(name).halted = true }

// Resume lets a halted node be stepped again; its next Step applies what
// arrived meanwhile.
func (c *Cluster) Resume(name string) { c.mustNode(name).halted = false }

// Kill stops the named node for good, as a crash would: it is cut from
// etcd first, so its lease is not revoked but runs out after Config.TTL
// (then the membership drops it and its peers fence it), and its runtime,
// link, ownership and coord client are closed (its peers see the link go
// down). It is stepped and checked no more; Sync and Synced leave it out.
// Call it from the goroutine that steps the cluster.
func (c *Cluster) Kill(name string) {
	c.tb.Helper()
	n := c.mustNode(name)
	if n.killed {
		return
	}
	c.CutEtcd(name)
	n.killed = true
	if c.mem != nil {
		_ = n.Runtime.Close()
		return
	}
	_ = n.Runtime.Close()
	_ = n.Link.Close()
	_ = n.Ownership.Close()
	_ = n.Coord.Close()
}

// CutEtcd cuts the named node from etcd (its coord client only: the
// operator's client and the membership watch keep theirs), for good: its
// lease runs out after Config.TTL, coord gives it up a little before, and
// the node is fenced (Ownership.Fenced, Runtime.Fenced). Apply no longer
// waits for it.
func (c *Cluster) CutEtcd(name string) {
	n := c.mustNode(name)
	n.etcdCut = true
	if c.mem != nil {
		c.mem.leases.Lose(name)
		return
	}
	n.etcd.Cut()
}

// CutPeers cuts the link between nodes a and b, both directions: their
// connections close and no new one is made until HealPeers. Messages
// between them are lost meanwhile; the other pairs are untouched.
func (c *Cluster) CutPeers(a, b string) {
	c.mustNode(a)
	c.mustNode(b)
	if c.mem != nil {
		c.Memory.Cut(a, b)
		return
	}
	c.Net.Cut(a, b)
}

// HealPeers lets nodes a and b connect again (the link redials with its
// backoff).
func (c *Cluster) HealPeers(a, b string) {
	c.mustNode(a)
	c.mustNode(b)
	if c.mem != nil {
		c.Memory.Heal(a, b)
		return
	}
	c.Net.Heal(a, b)
}

// Ghost returns node's render ghost of entity id: the peer that sends
// it, its epoch, its chunk and its position (zone.Runtime.RenderGhost),
// and false when the node holds no render ghost of id.
func (c *Cluster) Ghost(node string, id ecs.ID) (zone.RenderGhost, bool) {
	c.tb.Helper()
	return c.mustNode(node).Runtime.RenderGhost(id)
}
