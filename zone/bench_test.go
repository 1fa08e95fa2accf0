//go:build unix

package zone_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonelink"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// The distribution benchmarks (scripts/bench-zone runs them and writes
// docs/bench/zone.md). They build their cluster themselves rather than
// with zonetest, for two reasons: link bytes are counted on the TCP
// connections (every byte a node writes to a socket: TLS records of the
// gRPC frames, acknowledgements and pings included), which needs the dial
// and the listener in our hands; and the process CPU time they read covers
// only the nodes and their links, without the etcd member, coord clients
// and fault-injecting network a zonetest cluster adds. The territory is a
// fixed region table (no lease: nothing fences), which is all a runtime
// reads from coord between table changes.

// benchBoot is every runtime's boot time: the runs mint the same ids.
var benchBoot = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// cpuNow is the process's user+system CPU time (getrusage): every
// goroutine of the process, the link's and the GC's included.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fixedTerritory is a region table that never changes and a lease that is
// never lost.
type fixedTerritory struct{ t *cells.Table }

func (f fixedTerritory) Table() *cells.Table     { return f.t }
func (f fixedTerritory) Fenced() <-chan struct{} { return nil }

// countedConn counts the bytes written to a connection.
type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// countedListener counts what the accepted connections write.
type countedListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countedConn{Conn: c, n: l.n}, nil
}

// benchNode is one node of a benchmark cluster.
type benchNode struct {
	name string
	rt   *zone.Runtime
	mod  zone.Module
	// written is every byte this node wrote to its sockets: on the
	// connections it dialed and on those its peers dialed to it.
	written atomic.Int64
}

type benchCluster struct{ nodes []*benchNode }

// quadrants gives the four nodes one quarter of the grid each, as 2 × 2
// blocks of regions: node (col·2/cols) + 2·(row·2/rows). The four quarters
// meet at the centre of the torus.
func quadrants(g cells.Grid, names []string) (*cells.Table, error) {
	owners := make([]string, g.Regions())
	for r := range owners {
		col, row := g.Coords(cells.RegionID(r))
		owners[r] = names[(col*2/g.Cols()+2*(row*2/g.Rows()))%len(names)]
	}
	return cells.NewTable(g, 1, owners)
}

// checkerboard gives the four nodes alternate regions, node (col mod 2) +
// 2·(row mod 2), so that every region border is a border between nodes.
func checkerboard(g cells.Grid, names []string) (*cells.Table, error) {
	owners := make([]string, g.Regions())
	for r := range owners {
		col, row := g.Coords(cells.RegionID(r))
		owners[r] = names[(col%2+2*(row%2))%len(names)]
	}
	return cells.NewTable(g, 1, owners)
}

// startBenchCluster starts n runtimes over the real link (mutual TLS on
// 127.0.0.1), each the owner of its regions in the table, and waits until
// every node is connected to every other. Everything is closed at cleanup.
func startBenchCluster(b *testing.B, n int, gc cells.GridConfig, table func(cells.Grid, []string) (*cells.Table, error), mod func(i int) (zone.Module, error)) *benchCluster {
	b.Helper()
	grid, err := cells.NewGrid(gc)
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("zone-%d", i)
	}
	t, err := table(grid, names)
	if err != nil {
		b.Fatal(err)
	}
	ca, err := link.NewCA("bench", time.Now().Add(-time.Hour), 24*time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	c := &benchCluster{}
	links := make([]*link.Node, n)
	addrs := make([]string, n)
	for i, name := range names {
		node := &benchNode{name: name}
		c.nodes = append(c.nodes, node)
		nc, err := ca.Issue(name, time.Now().Add(-time.Hour), 24*time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		cert, err := nc.TLSCertificate()
		if err != nil {
			b.Fatal(err)
		}
		var d net.Dialer
		l, err := link.New(link.Config{
			Certificate: cert, ClusterCA: ca.Pool(), Seed: uint64(i + 1),
			BackoffMin: 5 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
			Dial: func(ctx context.Context, addr string) (net.Conn, error) {
				conn, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					return nil, err
				}
				return countedConn{Conn: conn, n: &node.written}, nil
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Close() }) // after the runtime's Close (cleanups run last first)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Serve(countedListener{Listener: lis, n: &node.written}); err != nil {
			b.Fatal(err)
		}
		links[i], addrs[i] = l, lis.Addr().String()
	}
	for i, l := range links {
		for j := range links {
			if i != j {
				if err := l.AddPeer(names[j], addrs[j]); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for i, node := range c.nodes {
		m, err := mod(i)
		if err != nil {
			b.Fatal(err)
		}
		rt, err := zone.New(zone.Config{
			Name: node.name, Node: i + 1, Grid: gc, Territory: fixedTerritory{t},
			Transport: zonelink.NewLinkTransport(links[i]), Clock: clock.NewFake(benchBoot),
		}, m)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = rt.Close() })
		node.rt, node.mod = rt, m
	}
	for i, l := range links {
		for j := range links {
			if i != j && !zonetest.Poll(30*time.Second, func() bool { return l.Connected(names[j]) }) {
				b.Fatalf("%s never connected to %s", names[i], names[j])
			}
		}
	}
	return c
}

// tick steps every node once, then waits until everything they sent has
// arrived (it is applied at the receivers' next step), as
// zonetest.Cluster.StepSync does: the cluster runs in lockstep. The nodes
// step last index first: a node drains its inbox at the start of its step,
// so a batch node 0 sends reaches every other node at its next tick, never
// in the same one (which would fold two of node 0's updates into one
// client batch when the link happens to be quick).
func (c *benchCluster) tick(b *testing.B) {
	for i := len(c.nodes) - 1; i >= 0; i-- {
		c.nodes[i].rt.Step()
	}
	if !zonetest.Poll(10*time.Second, c.synced) {
		b.Fatal("messages still in flight after 10s")
	}
}

func (c *benchCluster) synced() bool {
	rts := make([]*zone.Runtime, len(c.nodes))
	for i, n := range c.nodes {
		rts[i] = n.rt
	}
	return zonetest.Delivered(rts)
}

func (c *benchCluster) written() int64 {
	var n int64
	for _, node := range c.nodes {
		n += node.written.Load()
	}
	return n
}

func (c *benchCluster) stats() zone.ClusterStats {
	var s zone.ClusterStats
	for _, n := range c.nodes {
		t := n.rt.ClusterStats()
		s.Batches += t.Batches
		s.Entries += t.Entries
		s.Snapshots += t.Snapshots
		s.Forwards += t.Forwards
		s.Subscribes += t.Subscribes
		s.Refused += t.Refused
		s.SendErrors += t.SendErrors
		s.Gaps += t.Gaps
	}
	return s
}

func (c *benchCluster) ghosts() int {
	g := 0
	for _, n := range c.nodes {
		g += n.rt.RenderGhosts()
	}
	return g
}

// attachViewers attaches a sink for every account on the node its viewer
// stands on, as a gateway would.
func (c *benchCluster) attachViewers(b *testing.B, accounts int, sink func(a account.ID) *countSink) {
	b.Helper()
	for a := account.ID(1); a <= account.ID(accounts); a++ {
		found := false
		for _, n := range c.nodes {
			if _, ok := n.rt.Viewer(a); ok {
				n.rt.Attach(a, sink(a))
				found = true
			}
		}
		if !found {
			b.Fatalf("account %d has a viewer on no node", a)
		}
	}
}

// countSink is a client that counts what it is delivered.
type countSink struct{ batches, bytes int }

func (s *countSink) Deliver(_ uint64, frames [][]byte) {
	s.batches++
	for _, f := range frames {
		s.bytes += len(f)
	}
}

func newCountSink(account.ID) *countSink { return &countSink{} }

// skipShort skips a benchmark whose scene takes seconds to build.
func skipShort(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 20,000-entity world (seconds of setup per run); not run with -short")
	}
}

// distributionGrid is a 16 km torus of 4 km regions (4 × 4), split into
// quadrants of 2 × 2 regions, one per node; distributionWorld spawns the
// wanderers in a 4 km square centred where the four quadrants meet, so
// each node holds a quarter of the crowd and every node borders the
// others inside it (the density is BenchmarkWorld's: 20,000 in 16 km²).
func distributionGrid() cells.GridConfig {
	g := cells.GridConfig{RegionEdge: 4096}
	g.World.Width, g.World.Height = 16384, 16384
	return g.WithDefaults()
}

func distributionWorld() wander.Config {
	return wander.Config{Seed: 1, Entities: 20_000, Accounts: 2_000, Area: 4000, Centre: torus.Pos{X: 8192, Y: 8192}}
}

// benchWarmTicks are run before the measured ticks: subscriptions,
// snapshots and the views' first bursts settle.
const benchWarmTicks = 20

// BenchmarkDistribution is the cost of distribution: the same world —
// 20,000 wanderers, 2,000 of them the viewers of 2,000 accounts — on one
// node, and split over four nodes in this process that talk over the real
// link. One op is one cluster tick: every node steps, then the harness
// waits until every message sent has arrived. Reported per tick: the
// process CPU time (getrusage over the whole tick: all nodes' steps, the
// link goroutines, TLS, GC), the bytes written to the link's sockets,
// replication batches and entries, snapshots and account forwards, and
// the render ghosts held.
func BenchmarkDistribution(b *testing.B) {
	for _, nodes := range []int{1, 4} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			skipShort(b)
			cfg := distributionWorld()
			var c *benchCluster
			if nodes == 1 {
				// Alone, the node has no link: it runs as it would in
				// production.
				var err error
				if c, err = soloRuntime(b, distributionGrid(), cfg); err != nil {
					b.Fatal(err)
				}
			} else {
				c = startBenchCluster(b, nodes, distributionGrid(), quadrants, func(int) (zone.Module, error) { return wander.New(cfg) })
			}
			runMeasured(b, c, cfg.Accounts)
		})
	}
}

// soloRuntime is one node without a link, the whole world its own.
func soloRuntime(b *testing.B, gc cells.GridConfig, cfg wander.Config) (*benchCluster, error) {
	m, err := wander.New(cfg)
	if err != nil {
		return nil, err
	}
	rt, err := zone.New(zone.Config{Grid: gc, Clock: clock.NewFake(benchBoot)}, m)
	if err != nil {
		return nil, err
	}
	b.Cleanup(func() { _ = rt.Close() })
	return &benchCluster{nodes: []*benchNode{{name: rt.Name(), rt: rt, mod: m}}}, nil
}

// runMeasured warms c up, then runs the measured ticks and reports them.
func runMeasured(b *testing.B, c *benchCluster, accounts int) {
	sinks := make([]*countSink, 0, accounts)
	c.attachViewers(b, accounts, func(account.ID) *countSink {
		s := &countSink{}
		sinks = append(sinks, s)
		return s
	})
	for range benchWarmTicks {
		c.tick(b)
	}
	entities := 0
	for _, n := range c.nodes {
		entities += len(n.mod.(*wander.Module).Wanderers())
	}
	runtime.GC() // the setup's garbage is not the ticks' cost
	s0, w0, cpu0, start := c.stats(), c.written(), cpuNow(), time.Now()
	ghosts, ticks := 0, 0
	for b.Loop() {
		c.tick(b)
		ghosts += c.ghosts()
		ticks++
	}
	cpu, wall, w, s := cpuNow()-cpu0, time.Since(start), c.written()-w0, c.stats()
	n := float64(ticks)
	b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/tick")
	b.ReportMetric(float64(wall.Microseconds())/1000/n, "wall-ms/tick")
	b.ReportMetric(float64(w)/n, "link-B/tick")
	b.ReportMetric(float64(s.Batches-s0.Batches)/n, "batches/tick")
	b.ReportMetric(float64(s.Entries-s0.Entries)/n, "entries/tick")
	b.ReportMetric(float64(s.Snapshots-s0.Snapshots)/n, "snapshots/tick")
	b.ReportMetric(float64(s.Forwards-s0.Forwards)/n, "forwards/tick")
	b.ReportMetric(float64(ghosts)/n, "ghosts")
	b.ReportMetric(float64(entities), "entities")
	delivered := 0
	for _, s := range sinks {
		delivered += s.bytes
	}
	if delivered == 0 {
		b.Fatal("no client was delivered anything: the scene measures nothing")
	}
	if s.Refused+s.SendErrors+s.Gaps != 0 {
		b.Fatalf("the link lost or refused messages (refused %d, send errors %d, gaps %d): the numbers would be wrong", s.Refused, s.SendErrors, s.Gaps)
	}
}

// ---- messages per update ----

// Wire types of the probe module.
const (
	probeWirePosition = 1
	probeWireBeat     = 2
)

// beat is the probe's public state, changed every tick.
type beat struct{ N uint32 }

// placed is one entity of the probe module: where it stands and, for a
// viewer, the account whose view it carries (0: none).
type placed struct {
	key  uint64
	pos  torus.Pos
	acct account.ID
}

// probeModule places its entities exactly; the one with key 0 changes its
// public beat every tick. Viewers never move, so the beat is the only
// state that changes.
type probeModule struct {
	r      *zone.Runtime
	pos    *ecs.Store[zone.Position]
	beat   *ecs.Store[beat]
	entity []placed
	probe  ecs.ID
}

func (m *probeModule) Setup(r *zone.Runtime) error {
	m.r, m.pos = r, r.Positions()
	if err := r.SyncPosition(probeWirePosition); err != nil {
		return err
	}
	var err error
	if m.beat, err = zone.Register(r, zone.Spec[beat]{Name: "probe.beat", Wire: probeWireBeat,
		Handoff: zone.FixedCodec[beat](),
		Encode:  func(dst []byte, v *beat) []byte { return binary.LittleEndian.AppendUint32(dst, v.N) },
	}); err != nil {
		return err
	}
	if m.probe, err = zone.DerivedID(0); err != nil {
		return err
	}
	if err := r.AddSystem(ecs.System{Name: "probe", Run: m.run}); err != nil {
		return err
	}
	for _, e := range m.entity {
		if r.Table().OwnerOf(e.pos) != r.Name() {
			continue
		}
		id, err := zone.DerivedID(e.key)
		if err != nil {
			return err
		}
		if err := r.World().CreateEntity(id); err != nil {
			return err
		}
		if err := m.pos.Add(id, zone.Position{Pos: e.pos}); err != nil {
			return err
		}
		if e.key == 0 {
			if err := m.beat.Add(id, beat{}); err != nil {
				return err
			}
		}
		r.World().MarkMoved(id)
		if e.acct != 0 {
			r.SetViewer(e.acct, id)
		}
	}
	return nil
}

func (m *probeModule) run(*ecs.World, ecs.Tick) {
	if v, ok := m.beat.Get(m.probe); ok && m.r.Simulated(m.probe) {
		v.N++
		m.beat.MarkDirty(m.probe)
	}
}

// fanoutScene places the probe on node 0 of an 8 km torus of 2 km regions
// split in quadrants (the four meet at 4096, 4096), 100 m from both of its
// quadrant's borders, so that only its own node may simulate anything in
// its chunk; and observers on nodes 1, 2, 3 (in that order, round robin
// over the first nodes of them), 4–49 m across the border, each in
// view of the probe (within 5 chunks) and of nothing else that changes.
func fanoutScene(observers, nodes int) []placed {
	const corner = 4096
	es := []placed{{key: 0, pos: torus.Pos{X: corner - 100, Y: corner - 100}}}
	// Quadrant offsets of nodes 1 (east), 2 (south) and 3 (south-east).
	across := [3][2]bool{{true, false}, {false, true}, {true, true}}
	slot := make([]int, nodes)
	for k := range observers {
		node := k % nodes
		i := slot[node]
		slot[node]++
		x, y := corner-146+float64(i%10)*5, corner-146+float64(i/10)*5
		if across[node][0] {
			x += 150
		}
		if across[node][1] {
			y += 150
		}
		es = append(es, placed{key: uint64(k + 1), pos: torus.Pos{X: x, Y: y}, acct: account.ID(k + 1)})
	}
	return es
}

// BenchmarkUpdateFanout is the cost of one public update against the
// number of remote observers: one entity on node 0 changes a public
// component every tick; 1, 10 or 100 observers stand on node 1, or 12
// observers are spread over 1, 2 or 3 nodes. One op is one cluster tick,
// so one update. Reported per update: replication batches (messages) and
// entries node 0 sent, the bytes node 0 wrote to its sockets, the nodes
// subscribed, and the batches the observers' clients were delivered (the
// fan-out to observers happens on their own node).
func BenchmarkUpdateFanout(b *testing.B) {
	cases := []struct{ observers, nodes int }{{1, 1}, {10, 1}, {100, 1}, {12, 1}, {12, 2}, {12, 3}}
	for _, tc := range cases {
		b.Run(fmt.Sprintf("observers=%d/nodes=%d", tc.observers, tc.nodes), func(b *testing.B) {
			scene := fanoutScene(tc.observers, tc.nodes)
			gc := cells.GridConfig{RegionEdge: 2048}
			gc.World.Width, gc.World.Height = 8192, 8192
			c := startBenchCluster(b, 4, gc.WithDefaults(), quadrants, func(int) (zone.Module, error) {
				return &probeModule{entity: scene}, nil
			})
			var sinks []*countSink
			c.attachViewers(b, tc.observers, func(account.ID) *countSink {
				s := &countSink{}
				sinks = append(sinks, s)
				return s
			})
			for range benchWarmTicks {
				c.tick(b)
			}
			src := c.nodes[0]
			if src.mod.(*probeModule).beat.Len() != 1 {
				b.Fatal("the probe is not on node 0")
			}
			s0, w0 := src.rt.ClusterStats(), src.written.Load()
			delivered0 := 0
			for _, s := range sinks {
				delivered0 += s.batches
			}
			ticks := 0
			for b.Loop() {
				c.tick(b)
				ticks++
			}
			s, w := src.rt.ClusterStats(), src.written.Load()
			delivered := -delivered0
			for _, s := range sinks {
				delivered += s.batches
			}
			n := float64(ticks)
			b.ReportMetric(float64(s.Batches-s0.Batches)/n, "msgs/update")
			b.ReportMetric(float64(s.Entries-s0.Entries)/n, "entries/update")
			b.ReportMetric(float64(w-w0)/n, "link-B/update")
			b.ReportMetric(float64(tc.nodes), "subscribed-nodes")
			b.ReportMetric(float64(delivered)/n, "client-batches/update")
			if delivered < ticks*tc.observers {
				for i, s := range sinks {
					b.Logf("sink %d: %d batches", i, s.batches)
				}
				b.Fatalf("observers were delivered %d batches in %d ticks, want %d each tick", delivered, ticks, tc.observers)
			}
		})
	}
}

// ---- render ghosts ----

// BenchmarkRenderGhosts measures what render ghosts cost and how many
// there are, at the default region edge (8 km) and bands: 20,000
// wanderers spread uniformly, 2,000 of them viewers, four nodes owning
// alternate regions, so that every region border is a node border (the
// case the band-share formula describes). world=16km is a 16 km torus,
// 2 × 2 regions, one per node: 78 entities per km², a view (11 × 11
// chunks, 0.12 km²) reaching about one viewer's worth of the world per
// point. world=128km is the default grid itself (cells.DefaultGridConfig):
// the same crowd 64 times thinner, so few views reach a border. One op is
// one cluster tick. Reported: render ghosts held over the cluster, their
// share of the entities simulated, the share of entities that stand within
// a view's reach (5 chunks) of another node's region, so that they would
// be ghosts if every chunk were watched, the bytes written to the link per
// ghost per simulated second (20 Hz), and the seed's band shares.
// Wanderers' secrets are never redrawn here: they are owner-only and
// forwarded by account, not ghost traffic.
func BenchmarkRenderGhosts(b *testing.B) {
	for _, km := range []int{16, 128} {
		b.Run(fmt.Sprintf("world=%dkm", km), func(b *testing.B) {
			skipShort(b)
			gc := cells.DefaultGridConfig()
			gc.World.Width, gc.World.Height = km*1000, km*1000
			cfg := wander.Config{Seed: 2, Entities: 20_000, Accounts: 2_000, SecretEvery: 1 << 30}
			c := startBenchCluster(b, 4, gc, checkerboard, func(int) (zone.Module, error) { return wander.New(cfg) })
			c.attachViewers(b, cfg.Accounts, newCountSink)
			for range benchWarmTicks {
				c.tick(b)
			}
			runtime.GC()
			s0, w0 := c.stats(), c.written()
			ghosts, ticks := 0, 0
			for b.Loop() {
				c.tick(b)
				ghosts += c.ghosts()
				ticks++
			}
			s, w := c.stats(), c.written()-w0
			reach := float64(interest.DefaultView().Radius) * c.nodes[0].rt.Geometry().ChunkEdge()
			table := c.nodes[0].rt.Table()
			entities, inReach := 0, 0
			for _, n := range c.nodes {
				for _, id := range n.mod.(*wander.Module).Wanderers() {
					p, ok := n.rt.Positions().Get(id)
					if !ok {
						continue
					}
					entities++
					if table.InForeignBand(p.Pos, reach) {
						inReach++
					}
				}
			}
			n := float64(ticks)
			mean := float64(ghosts) / n
			bands := cells.DefaultBands(c.nodes[0].rt.Grid())
			edge := c.nodes[0].rt.Grid().RegionEdge()
			b.ReportMetric(mean, "ghosts")
			b.ReportMetric(mean/float64(entities), "ghost-share")
			b.ReportMetric(float64(inReach)/float64(entities), "reach-share")
			b.ReportMetric(cells.BandShare(edge, reach), "reach-band-share")
			b.ReportMetric(cells.BandShare(edge, bands.Ghost), "ghost-band-share")
			b.ReportMetric(cells.BandShare(edge, bands.Interaction), "interaction-band-share")
			b.ReportMetric(float64(w)/n, "link-B/tick")
			b.ReportMetric(float64(s.Entries-s0.Entries)/n, "entries/tick")
			b.ReportMetric(float64(s.Snapshots-s0.Snapshots)/n, "snapshots/tick")
			if mean > 0 {
				b.ReportMetric(float64(w)/mean/(n*0.05), "B/s/ghost")
			}
			if s.Refused+s.SendErrors+s.Gaps != 0 {
				b.Fatalf("the link lost or refused messages (refused %d, send errors %d, gaps %d)", s.Refused, s.SendErrors, s.Gaps)
			}
		})
	}
}
