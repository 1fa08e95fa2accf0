package zone_test

import (
	"errors"
	"testing"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// Claims of zone/doc.go that a review (issue 28) found false on layouts
// the other tests never tried, one test each.

// Stride walks an entity in a straight line: Start + Steps·Step, for Max
// steps, then it stands. Exact binary fractions keep every position
// exact, so a test can put an entity exactly on an edge.
type Stride struct {
	Start      torus.Pos
	Step       torus.Pos
	Steps, Max uint32
}

// striders is a test module: entity i (id zone.DerivedID(i)) strides as
// specs[i] says; each node creates those its table gives it. The module
// moves positions without marking them dirty, like the reference game
// (which resends positions only every 8th step), and marks a chunk change
// only (MarkMoved): the runtime must not need more to keep the margin.
type striders struct {
	specs  []Stride
	r      *zone.Runtime
	stride *ecs.Store[Stride]
	q      *ecs.Query2[zone.Position, Stride]
}

func (m *striders) Setup(r *zone.Runtime) error {
	m.r = r
	if err := r.SyncPosition(1); err != nil {
		return err
	}
	var err error
	if m.stride, err = zone.Register(r, zone.Spec[Stride]{Name: "test.stride", Handoff: zone.FixedCodec[Stride]()}); err != nil {
		return err
	}
	m.q = ecs.NewQuery2(r.Positions(), m.stride).Without(r.NotSimulated()...)
	if err := r.AddSystem(ecs.System{Name: "stride", Run: m.run}); err != nil {
		return err
	}
	for i, s := range m.specs {
		if r.Table().OwnerOf(s.Start) != r.Name() {
			continue
		}
		id, _ := zone.DerivedID(uint64(i))
		if err := errors.Join(
			r.World().CreateEntity(id),
			r.Positions().Add(id, zone.Position{Pos: s.Start}),
			m.stride.Add(id, s),
		); err != nil {
			return err
		}
		r.World().MarkMoved(id)
	}
	return nil
}

func (m *striders) run(w *ecs.World, _ ecs.Tick) {
	geo := m.r.Geometry()
	m.q.Each(func(id ecs.ID, p *zone.Position, s *Stride) {
		if s.Steps >= s.Max {
			return
		}
		s.Steps++
		n := float64(s.Steps)
		next := geo.Normalise(torus.Pos{X: s.Start.X + n*s.Step.X, Y: s.Start.Y + n*s.Step.Y})
		if geo.ChunkOf(next) != geo.ChunkOf(p.Pos) {
			w.MarkMoved(id)
		}
		p.Pos = next
	})
}

// simulatedOn returns the nodes that simulate id, and where the last of
// them holds it.
func simulatedOn(c *zonetest.Cluster, id ecs.ID) (on []string, at torus.Pos) {
	for _, n := range c.Nodes {
		if n.Runtime.Simulated(id) {
			on = append(on, n.Name)
			p, _ := n.Runtime.Positions().Get(id)
			at = p.Pos
		}
	}
	return on, at
}

// TestNoEntityIsSimulatedPastTheMargin: an entity walks east from zone-0
// over the border into zone-1 at 2 m a tick and enters the chunk beyond
// the margin (32 m, one chunk) exactly at its west edge, where it stands
// exactly the margin past the border: not yet to be handed over. At no
// tick after that may zone-0 simulate it farther past the border than
// the margin; it is handed over once, to zone-1.
func TestNoEntityIsSimulatedPastTheMargin(t *testing.T) {
	const border = 4096.0 // threeWays: zone-0 west of it, zone-1 east, both south of y 4096
	spec := Stride{Start: torus.Pos{X: border - 8, Y: 2000}, Step: torus.Pos{X: 2}, Max: 60}
	c := zonetest.Start(t, zonetest.Config{Nodes: 3, Grid: clusterGrid(), Table: threeWays,
		Module: func(int, string) (zone.Module, error) { return &striders{specs: []Stride{spec}}, nil }})
	margin := cells.DefaultBands(c.Grid).HandoffMargin
	geo := c.Nodes[0].Runtime.Geometry()
	if edge := geo.ChunkOrigin(geo.ChunkOf(torus.Pos{X: border + margin, Y: 2000})).X; edge != border+margin {
		t.Fatalf("the chunk beyond the margin starts at x %v, not at the margin's edge %v: the scene is not the one meant", edge, border+margin)
	}
	id, _ := zone.DerivedID(0)
	for tick := 1; tick <= int(spec.Max)+5; tick++ {
		c.StepSync(1)
		table := c.Nodes[0].Runtime.Table()
		on, at := simulatedOn(c, id)
		if len(on) > 1 {
			t.Fatalf("tick %d: the strider is simulated on %v", tick, on)
		}
		if len(on) == 1 {
			if to, ok := table.HandoffTarget(on[0], at, margin); ok {
				t.Fatalf("tick %d: the strider is simulated on %s at x %v, %v m past the border (margin %v m); its owner is %s",
					tick, on[0], at.X, at.X-border, margin, to)
			}
		}
	}
	on, at := simulatedOn(c, id)
	if st := totalHandoffs(c); len(on) != 1 || on[0] != "zone-1" || st.Acked != 1 {
		t.Fatalf("the strider ends simulated on %v at %v after handoffs %+v; want zone-1, after one handoff", on, at, st)
	}
}
