package zonetest_test

import (
	"math"
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// start runs two wander nodes on an 8 km torus split in two bands of
// rows, the wanderers spawned around the corner where the seams meet, so
// that many stand near the border between the nodes. ttl 0 keeps the
// harness default.
func start(t *testing.T, ttl time.Duration) *zonetest.Cluster {
	t.Helper()
	g := cells.GridConfig{RegionEdge: 2048}
	g.World.Width, g.World.Height = 8192, 8192
	return zonetest.Start(t, zonetest.Config{
		Nodes: 2, Grid: g, TTL: ttl,
		Module: func(int, string) (zone.Module, error) {
			return wander.New(wander.Config{Seed: 7, Entities: 60, Accounts: 6, Area: 500})
		},
	})
}

func tickOf(n *zonetest.Node) uint64 { return n.Runtime.World().CurrentTick().N }

func TestStepNodesHaltAndResume(t *testing.T) {
	c := start(t, 0)
	a, b := c.Nodes[0], c.Nodes[1]
	c.StepSync(2)
	ta, tb := tickOf(a), tickOf(b)
	c.StepNodes(a.Name)
	if tickOf(a) != ta+1 || tickOf(b) != tb {
		t.Fatalf("StepNodes(%s): ticks %d, %d; want %d, %d", a.Name, tickOf(a), tickOf(b), ta+1, tb)
	}
	c.Halt(b.Name)
	c.Step()
	c.StepNodes(a.Name, b.Name)
	if tickOf(a) != ta+3 || tickOf(b) != tb {
		t.Fatalf("%s halted: ticks %d, %d; want %d, %d", b.Name, tickOf(a), tickOf(b), ta+3, tb)
	}
	c.Resume(b.Name)
	c.StepSync(1)
	if tickOf(a) != ta+4 || tickOf(b) != tb+1 {
		t.Fatalf("%s resumed: ticks %d, %d; want %d, %d", b.Name, tickOf(a), tickOf(b), ta+4, tb+1)
	}
}

// TestGhost reads, on each node, the render ghosts of the other's
// wanderers: their source and epoch are what the simulating node holds,
// their position at most a tick's walk behind (the node stepped later in a
// round has applied the other's update of this round; the earlier one, of
// the round before), with float32 rounding.
func TestGhost(t *testing.T) {
	c := start(t, 0)
	c.StepSync(6)
	step := wander.Config{}.WithDefaults().Speed * c.Nodes[0].Runtime.World().TickInterval().Seconds()
	seen := 0
	for _, owner := range c.Nodes {
		for _, other := range c.Nodes {
			if owner == other {
				continue
			}
			owner.Runtime.Positions().Each(func(id ecs.ID, p *zone.Position) {
				if !owner.Runtime.Simulated(id) {
					return
				}
				g, ok := c.Ghost(other.Name, id)
				if !ok {
					return
				}
				seen++
				epoch, _ := owner.Runtime.Epoch(id)
				if g.Source != owner.Name || g.Epoch != epoch || !g.HasPos {
					t.Errorf("%s's ghost of %d: %+v, want source %s, epoch %d, a position", other.Name, id, g, owner.Name, epoch)
				}
				if d := math.Hypot(g.Pos.X-p.X, g.Pos.Y-p.Y); d > step+0.01 {
					t.Errorf("%s's ghost of %d stands at %v, %s has it at %v", other.Name, id, g.Pos, owner.Name, p.Pos)
				}
			})
		}
	}
	if seen == 0 {
		t.Fatal("no render ghost on either node: the test shows nothing")
	}
	if _, ok := c.Ghost(c.Nodes[0].Name, ecs.ID(1)); ok {
		t.Fatal("a ghost of an entity nobody has")
	}
}

func TestCutAndHealPeers(t *testing.T) {
	c := start(t, 0)
	a, b := c.Nodes[0], c.Nodes[1]
	c.CutPeers(a.Name, b.Name)
	if !zonetest.Poll(30*time.Second, func() bool { return !a.Link.Connected(b.Name) && !b.Link.Connected(a.Name) }) {
		t.Fatal("still connected after CutPeers")
	}
	c.HealPeers(a.Name, b.Name)
	c.WaitConnected()
	c.StepSync(2)
}

// TestCutEtcd: a node cut from etcd loses its lease and is fenced; the
// other goes on.
func TestCutEtcd(t *testing.T) {
	t.Parallel() // waits out a lease TTL on a cluster of its own
	c := start(t, 2*time.Second)
	a, b := c.Nodes[0], c.Nodes[1]
	lease := b.Ownership.Lease()
	c.CutEtcd(b.Name)
	fenced := func() bool {
		select {
		case <-b.Ownership.Fenced():
			return true
		default:
			return false
		}
	}
	if !zonetest.Poll(30*time.Second, func() bool { return fenced() && !c.Accepts(b.Name, lease) }) {
		t.Fatalf("%s cut from etcd: fenced %v, lease accepted %v", b.Name, fenced(), c.Accepts(b.Name, lease))
	}
	if !b.Runtime.Fenced() || a.Runtime.Fenced() {
		t.Fatalf("runtimes fenced: %s %v, %s %v; want only %s", a.Name, a.Runtime.Fenced(), b.Name, b.Runtime.Fenced(), b.Name)
	}
	c.Step()
}

// TestKill: a killed node drops off the link, its lease runs out, and the
// cluster steps and syncs without it.
func TestKill(t *testing.T) {
	t.Parallel() // waits out a lease TTL on a cluster of its own
	c := start(t, 2*time.Second)
	a, b := c.Nodes[0], c.Nodes[1]
	c.StepSync(2)
	lease, tb := b.Ownership.Lease(), tickOf(b)
	c.Kill(b.Name)
	c.Kill(b.Name) // idempotent
	if !zonetest.Poll(30*time.Second, func() bool { return !a.Link.Connected(b.Name) && !c.Accepts(b.Name, lease) }) {
		t.Fatalf("%s killed: still connected %v, lease accepted %v", b.Name, a.Link.Connected(b.Name), c.Accepts(b.Name, lease))
	}
	c.StepSync(3)
	if tickOf(b) != tb {
		t.Fatalf("killed %s stepped: tick %d, was %d", b.Name, tickOf(b), tb)
	}
}

// startMemory is start on Config.Memory: the same two wander nodes on
// zonesim's in-memory network, no etcd and no link.
func startMemory(t *testing.T) *zonetest.Cluster {
	t.Helper()
	g := cells.GridConfig{RegionEdge: 2048}
	g.World.Width, g.World.Height = 8192, 8192
	return zonetest.Start(t, zonetest.Config{
		Nodes: 2, Grid: g, Memory: true,
		Module: func(int, string) (zone.Module, error) {
			return wander.New(wander.Config{Seed: 7, Entities: 60, Accounts: 6, Area: 500})
		},
	})
}

// TestMemory: a Config.Memory cluster steps like the real one (StepNodes,
// Halt, Resume), replicates so that each node holds ghosts of the other's
// wanderers with their owner's source and epoch, installs an applied
// table on every node at once, and fences a node cut from etcd or killed
// at once; two runs send the same messages (the network's trace).
func TestMemory(t *testing.T) {
	c := startMemory(t)
	a, b := c.Nodes[0], c.Nodes[1]
	if c.Memory == nil || a.Link != nil || a.Ownership != nil || c.Etcd != nil {
		t.Fatalf("a memory cluster with a link %v, ownership %v, etcd %v", a.Link, a.Ownership, c.Etcd)
	}
	c.StepSync(6)
	ghosts := 0
	b.Runtime.Positions().Each(func(id ecs.ID, _ *zone.Position) {
		if !b.Runtime.Simulated(id) {
			return
		}
		if g, ok := c.Ghost(a.Name, id); ok {
			ghosts++
			if e, _ := b.Runtime.Epoch(id); g.Source != b.Name || g.Epoch != e {
				t.Errorf("%s's ghost of %d: %+v, want source %s, epoch %d", a.Name, id, g, b.Name, e)
			}
		}
	})
	if ghosts == 0 {
		t.Fatalf("%s holds no ghost of %s's wanderers", a.Name, b.Name)
	}

	ta, tb := tickOf(a), tickOf(b)
	c.StepNodes(a.Name)
	c.Halt(b.Name)
	c.Step()
	c.Resume(b.Name)
	c.StepSync(1)
	if tickOf(a) != ta+3 || tickOf(b) != tb+1 {
		t.Fatalf("ticks %d, %d; want %d, %d", tickOf(a), tickOf(b), ta+3, tb+1)
	}

	next, err := a.Runtime.Table().WithOwners(a.Runtime.Table().Version()+1, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Apply(next)
	if a.Runtime.Table().Version() != next.Version() || b.Runtime.Table().Version() != next.Version() {
		t.Fatalf("tables v%d, v%d after Apply(v%d)", a.Runtime.Table().Version(), b.Runtime.Table().Version(), next.Version())
	}

	lease := int64(b.Number) // zonesim.NewLeases: node i holds lease i+1
	if !c.Accepts(b.Name, lease) {
		t.Fatalf("%s's lease is not %d", b.Name, lease)
	}
	c.CutEtcd(b.Name)
	if !b.Runtime.Fenced() || a.Runtime.Fenced() || c.Accepts(b.Name, lease) {
		t.Fatalf("%s cut from etcd: fenced %v (%s %v), lease accepted %v", b.Name, b.Runtime.Fenced(), a.Name, a.Runtime.Fenced(), c.Accepts(b.Name, lease))
	}
	c.Kill(b.Name)
	tb = tickOf(b)
	c.StepSync(2)
	if tickOf(b) != tb {
		t.Fatalf("killed %s stepped", b.Name)
	}

	d := startMemory(t)
	d.StepSync(6)
	e := startMemory(t)
	e.StepSync(6)
	if d.Memory.Trace() != e.Memory.Trace() {
		t.Fatalf("two runs of one memory cluster: traces %016x and %016x", d.Memory.Trace(), e.Memory.Trace())
	}
}
