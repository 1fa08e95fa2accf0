package zone_test

import (
	"slices"
	"testing"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/zone"
)

type qa struct{ V uint8 }
type qb struct{ V uint16 }
type qc struct{ V uint32 }

// TestQueriesLeaveOutWhatIsNotSimulated: each of a module's query
// constructors walks the entities this node simulates, never a simulation
// ghost or a frozen entity, though the module named neither marker.
func TestQueriesLeaveOutWhatIsNotSimulated(t *testing.T) {
	var a *ecs.Store[qa]
	var b *ecs.Store[qb]
	var c *ecs.Store[qc]
	rt, err := zone.New(zone.Config{}, moduleFunc(func(r *zone.Runtime) error {
		var err error
		if a, err = zone.Register(r, zone.Spec[qa]{Name: "q.a", Local: true}); err != nil {
			return err
		}
		if b, err = zone.Register(r, zone.Spec[qb]{Name: "q.b", Local: true}); err != nil {
			return err
		}
		c, err = zone.Register(r, zone.Spec[qc]{Name: "q.c", Local: true})
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	pos := rt.Positions()
	ids := make([]ecs.ID, 3) // simulated, ghost, frozen
	for i := range ids {
		id, err := rt.NewID()
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.World().CreateEntity(id); err != nil {
			t.Fatal(err)
		}
		_ = a.Add(id, qa{})
		_ = b.Add(id, qb{})
		_ = c.Add(id, qc{})
		_ = pos.Add(id, zone.Position{})
		ids[i] = id
	}
	_ = rt.Ghosts().Add(ids[1], zone.Ghost{})
	_ = rt.Frozen().Add(ids[2], zone.Frozen{})

	want := ids[:1]
	for _, q := range []struct {
		name string
		each func(fn func(ecs.ID))
	}{
		{"Query1", func(fn func(ecs.ID)) { zone.Query1(rt, a).Each(func(id ecs.ID, _ *qa) { fn(id) }) }},
		{"Query2", func(fn func(ecs.ID)) { zone.Query2(rt, a, b).Each(func(id ecs.ID, _ *qa, _ *qb) { fn(id) }) }},
		{"Query3", func(fn func(ecs.ID)) {
			zone.Query3(rt, a, b, c).Each(func(id ecs.ID, _ *qa, _ *qb, _ *qc) { fn(id) })
		}},
		{"Query4", func(fn func(ecs.ID)) {
			zone.Query4(rt, pos, a, b, c).Each(func(id ecs.ID, _ *zone.Position, _ *qa, _ *qb, _ *qc) { fn(id) })
		}},
	} {
		var got []ecs.ID
		q.each(func(id ecs.ID) { got = append(got, id) })
		if !slices.Equal(got, want) {
			t.Errorf("%s walked %v, want only the simulated %v (ghost %d, frozen %d)", q.name, got, want, ids[1], ids[2])
		}
	}
	// The raw ecs query, for contrast, walks all three: the hole the
	// constructors close.
	if n := ecs.NewQuery1(a).Count(); n != 3 {
		t.Fatalf("ecs.NewQuery1 counted %d, want 3", n)
	}
}
