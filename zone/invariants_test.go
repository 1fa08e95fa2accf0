package zone_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// TestEachInvariantCheckFires plants a breach of each runtime invariant
// the checks cover and requires the check to name it: a check that
// cannot fire checks nothing. The scene: zone-0's viewer by the border
// with zone-1, and X, zone-1's, standing in zone-0's interaction band
// (zone-0 holds a render ghost and a simulation ghost of it).
func TestEachInvariantCheckFires(t *testing.T) {
	viewerAt, xAt := torus.Pos{X: 1000, Y: 4056}, torus.Pos{X: 1000, Y: 4100}
	for _, tc := range []struct {
		name      string
		invariant int
		plant     func(t *testing.T, c *zonetest.Cluster, viewer, x ecs.ID) error
	}{
		{"a simulated entity frozen with no handoff", 5, func(t *testing.T, c *zonetest.Cluster, viewer, _ ecs.ID) error {
			c.Nodes[0].Runtime.Breach("frozen", viewer)
			return c.Nodes[0].Runtime.CheckInvariants()
		}},
		{"a render ghost without its source", 6, func(t *testing.T, c *zonetest.Cluster, _, x ecs.ID) error {
			c.Nodes[0].Runtime.Breach("source", x)
			return c.Nodes[0].Runtime.CheckInvariants()
		}},
		{"a ghost parked from a peer that does not send it", 6, func(t *testing.T, c *zonetest.Cluster, _, x ecs.ID) error {
			c.Nodes[0].Runtime.Breach("parked", x)
			return c.Nodes[0].Runtime.CheckInvariants()
		}},
		{"a record simulated with no entity here", 12, func(t *testing.T, c *zonetest.Cluster, _, _ ecs.ID) error {
			c.Nodes[0].Runtime.Breach("phase", ecs.ID(1<<40))
			return c.Nodes[0].Runtime.CheckInvariants()
		}},
		{"a table index that disagrees with its record", 13, func(t *testing.T, c *zonetest.Cluster, viewer, _ ecs.ID) error {
			c.Nodes[0].Runtime.Breach("index", viewer)
			return c.Nodes[0].Runtime.CheckInvariants()
		}},
		{"a transition refused for the phase it found", 14, func(t *testing.T, c *zonetest.Cluster, viewer, _ ecs.ID) error {
			c.Nodes[0].Runtime.Breach("refused", viewer)
			return c.Nodes[0].Runtime.CheckInvariants()
		}},
		{"a simulation ghost outside the band", 7, func(t *testing.T, c *zonetest.Cluster, _, x ecs.ID) error {
			c.Nodes[0].Runtime.Breach("band", x)
			return c.Nodes[0].Runtime.CheckInvariants()
		}},
		{"a simulated entity moved past the margin unmarked", 8, func(t *testing.T, c *zonetest.Cluster, viewer, _ ecs.ID) error {
			// A module that moves an entity over a border without marking
			// the chunk change (MarkMoved) breaks its contract: the runtime
			// never learns that it stands in zone-1's region.
			p, _ := c.Nodes[0].Runtime.Positions().Get(viewer)
			p.Pos = torus.Pos{X: 1000, Y: 4200}
			return c.Nodes[0].Runtime.CheckInvariants()
		}},
		{"one entity simulated on two nodes", 1, func(t *testing.T, c *zonetest.Cluster, _, x ecs.ID) error {
			r := c.Nodes[0].Runtime
			// The id is free on zone-0 once its simulation ghost is evicted.
			if !r.ClaimID(x) {
				t.Fatal("zone-0 does not free X's id")
			}
			if err := errors.Join(r.World().CreateEntity(x), r.Positions().Add(x, zone.Position{Pos: viewerAt})); err != nil {
				t.Fatal(err)
			}
			return c.CheckOneSimulator()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := zonetest.Start(t, zonetest.Config{Nodes: 2, Grid: clusterGrid(),
				Module: func(int, string) (zone.Module, error) {
					return &pacers{accounts: 1, specs: []Pace{{Centre: viewerAt}, {Centre: xAt}}}, nil
				}})
			viewer, _ := zone.DerivedID(0)
			x, _ := zone.DerivedID(1)
			if _, ok := c.Nodes[0].Runtime.Viewer(account.ID(1)); !ok || !c.Nodes[1].Runtime.Simulated(x) {
				t.Fatal("the scene is not the one meant: the viewer is not zone-0's or X not zone-1's")
			}
			c.StepSync(10) // checked after every tick: no breach so far
			if !c.Nodes[0].Runtime.Ghosts().Has(x) {
				t.Fatal("zone-0 holds no simulation ghost of X")
			}
			err := tc.plant(t, c, viewer, x)
			var ie *zone.InvariantError
			switch {
			case err == nil:
				t.Fatalf("the check missed the breach")
			case tc.invariant == 1 && strings.Contains(err.Error(), "runtime invariant 1:"):
			case tc.invariant != 1 && errors.As(err, &ie) && ie.Invariant == tc.invariant && errors.Is(err, zone.ErrInvariant):
			default:
				t.Fatalf("the check reports %v; want a breach of invariant %d", err, tc.invariant)
			}
			t.Log(err)
		})
	}
}

// BenchmarkCheckInvariants measures CheckInvariants on zone-0 of four
// nodes meeting at one corner, with 2,000 entities standing within 150 m
// of it (every node holds render and simulation ghosts of the others')
// and 8 viewers.
func BenchmarkCheckInvariants(b *testing.B) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var specs []Pace
	for i := range 8 {
		specs = append(specs, Pace{Centre: torus.Pos{X: 4096 + float64(i%2*2-1)*60, Y: 4096 + float64(i/2%2*2-1)*60 + float64(i/4)*5}})
	}
	for range 2000 {
		specs = append(specs, Pace{Centre: torus.Pos{X: 4096 + (rnd.Float64()*2-1)*150, Y: 4096 + (rnd.Float64()*2-1)*150}})
	}
	c := zonetest.Start(b, zonetest.Config{Grid: clusterGrid(), Table: fourWays,
		Module: func(int, string) (zone.Module, error) { return &pacers{specs: specs, accounts: 8}, nil }})
	c.StepSync(10)
	r := c.Nodes[0].Runtime
	b.ReportAllocs()
	for b.Loop() {
		if err := r.CheckInvariants(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(r.World().Len()), "entities")
	b.ReportMetric(float64(r.RenderGhosts()), "ghosts")
}
