package ecs_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/errcode"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		cfg   ecs.Config
		field string
	}{
		{"negative interval", ecs.Config{TickInterval: -1}, "TickInterval"},
		{"negative catch-up", ecs.Config{MaxCatchUpSteps: -2}, "MaxCatchUpSteps"},
	}
	for _, c := range cases {
		_, err := ecs.New(c.cfg)
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: err = %v, want config error on %s", c.name, err, c.field)
		}
	}
	w, err := ecs.New(ecs.Config{})
	if err != nil || w.TickInterval() != ecs.DefaultTickInterval {
		t.Fatalf("zero config: %v, interval %v", err, w.TickInterval())
	}
}

func TestCreateEntity(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	if err := f.w.CreateEntity(7); err != nil {
		t.Fatal(err)
	}
	err := f.w.CreateEntity(7)
	if !errors.Is(err, ecs.ErrAlive) || errcode.Of(err) != "ECS.ENTITY_ALIVE" {
		t.Fatalf("second create: %v", err)
	}
	var ee *ecs.EntityError
	if !errors.As(err, &ee) || ee.ID != 7 || ee.Op != "create" {
		t.Fatalf("EntityError = %+v", ee)
	}
	if !f.w.Alive(7) || f.w.Len() != 1 {
		t.Fatal("entity 7 not alive")
	}
	// An id that left may come back (a handoff returning).
	if err := f.w.Evict(7); err != nil {
		t.Fatal(err)
	}
	if err := f.w.CreateEntity(7); err != nil {
		t.Fatalf("re-create after evict: %v", err)
	}
}

func TestStoreBasics(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	f.spawn(t, 1, &Pos{1, 1}, nil, nil)
	f.spawn(t, 2, &Pos{2, 2}, &Vel{1, 0}, nil)
	f.spawn(t, 3, &Pos{3, 3}, nil, nil)

	if p, ok := f.pos.Get(2); !ok || *p != (Pos{2, 2}) {
		t.Fatalf("Get(2) = %v %v", p, ok)
	}
	if err := f.pos.Add(2, Pos{9, 9}); err != nil {
		t.Fatal(err)
	}
	if p, _ := f.pos.Get(2); *p != (Pos{9, 9}) {
		t.Fatalf("replace: %v", *p)
	}
	if !f.pos.Remove(1) || f.pos.Remove(1) {
		t.Fatal("Remove should report presence once")
	}
	// Swap-remove kept the others addressable.
	if p, ok := f.pos.Get(3); !ok || *p != (Pos{3, 3}) {
		t.Fatalf("Get(3) after remove = %v %v", p, ok)
	}
	if f.pos.Len() != 2 || f.pos.Has(1) || !f.w.Alive(1) {
		t.Fatal("remove of a component must not remove the entity")
	}
	err := f.pos.Add(99, Pos{})
	if !errors.Is(err, ecs.ErrNotAlive) {
		t.Fatalf("Add to unknown entity: %v", err)
	}
	if err := f.pos.AddAny(3, Vel{}); !errors.Is(err, ecs.ErrWrongType) {
		t.Fatalf("AddAny wrong type: %v", err)
	}
	if err := f.pos.AddAny(3, Pos{4, 4}); err != nil {
		t.Fatal(err)
	}
	if v, ok := f.pos.GetAny(3); !ok || v.(Pos) != (Pos{4, 4}) {
		t.Fatalf("GetAny = %v", v)
	}
}

func TestRegistry(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	if _, err := ecs.Register[Pos](f.w, ecs.ComponentSpec{Name: "other"}); !errors.Is(err, ecs.ErrDuplicateComponent) {
		t.Fatalf("same type twice: %v", err)
	}
	type Other struct{}
	if _, err := ecs.Register[Other](f.w, ecs.ComponentSpec{Name: "pos"}); !errors.Is(err, ecs.ErrDuplicateComponent) {
		t.Fatalf("same name twice: %v", err)
	}
	if _, err := ecs.Register[Other](f.w, ecs.ComponentSpec{}); !errors.Is(err, ecs.ErrDuplicateComponent) {
		t.Fatalf("empty name: %v", err)
	}
	var names []string
	for _, c := range f.w.Components() {
		names = append(names, c.Type().Name)
	}
	if !slices.Equal(names, []string{"pos", "vel", "health", "ghost", "frozen"}) {
		t.Fatalf("Components() names = %v", names)
	}
	c, ok := f.w.ComponentNamed("health")
	if !ok || c.Type().Meta != "owner+party" || c.Type().ID != 2 {
		t.Fatalf("ComponentNamed = %+v", c.Type())
	}
	s, ok := ecs.StoreOf[Vel](f.w)
	if !ok || s != f.vel {
		t.Fatal("StoreOf[Vel] is not the registered store")
	}
	// Registries are per World.
	w2 := must(ecs.New(ecs.Config{}))
	if _, ok := ecs.StoreOf[Vel](w2); ok {
		t.Fatal("a fresh World sees another World's component")
	}
}

func TestDestroyRunsListenersThenForget(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	f.spawn(t, 1, &Pos{1, 2}, nil, &Health{5})
	var events []string
	f.w.OnDestroy(func(w *ecs.World, id ecs.ID) {
		p, ok := f.pos.Get(id)
		if !ok || *p != (Pos{1, 2}) {
			t.Errorf("listener cannot read the dying entity's components")
		}
		events = append(events, "destroy")
	})
	f.w.OnForget(func(id ecs.ID) {
		if f.w.Alive(id) {
			t.Errorf("forget hook ran while the entity is alive")
		}
		events = append(events, "forget")
	})
	if err := f.w.Destroy(1); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(events, []string{"destroy", "forget"}) {
		t.Fatalf("events = %v", events)
	}
	if f.w.Alive(1) || f.pos.Len() != 0 || f.health.Len() != 0 {
		t.Fatal("entity left traces")
	}
	if err := f.w.Destroy(1); !errors.Is(err, ecs.ErrNotAlive) {
		t.Fatalf("destroy twice: %v", err)
	}
}

func TestEvictFiresNoListeners(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	f.spawn(t, 1, &Pos{}, &Vel{}, &Health{3})
	f.spawn(t, 2, &Pos{}, nil, nil)
	destroyed, forgotten := 0, []ecs.ID{}
	f.w.OnDestroy(func(*ecs.World, ecs.ID) { destroyed++ })
	f.w.OnForget(func(id ecs.ID) { forgotten = append(forgotten, id) })
	f.w.MarkMoved(1)
	f.health.MarkDirty(1)

	if err := f.w.Evict(1); err != nil {
		t.Fatal(err)
	}
	if destroyed != 0 {
		t.Fatalf("evict ran %d destroy listeners", destroyed)
	}
	if !slices.Equal(forgotten, []ecs.ID{1}) {
		t.Fatalf("forget hooks saw %v", forgotten)
	}
	if f.w.Alive(1) || f.pos.Has(1) || f.vel.Len() != 0 || f.health.Len() != 0 {
		t.Fatal("evicted entity still in a store")
	}
	var moved, dirty []ecs.ID
	f.w.DrainMoved(func(id ecs.ID) { moved = append(moved, id) })
	f.health.DrainDirty(func(id ecs.ID) { dirty = append(dirty, id) })
	if len(moved) != 0 || len(dirty) != 0 {
		t.Fatalf("evicted entity left in logs: moved %v dirty %v", moved, dirty)
	}
	if err := f.w.Evict(1); !errors.Is(err, ecs.ErrNotAlive) {
		t.Fatalf("evict twice: %v", err)
	}
}

func TestDeferredDestroyDuringIteration(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	for i := range 10 {
		f.spawn(t, ecs.ID(i+1), &Pos{X: float64(i)}, &Vel{}, nil)
	}
	var listened []ecs.ID
	f.w.OnDestroy(func(_ *ecs.World, id ecs.ID) { listened = append(listened, id) })
	seen := 0
	q := ecs.NewQuery2(f.pos, f.vel)
	q.Each(func(id ecs.ID, p *Pos, v *Vel) {
		seen++
		// Destroy every entity, including ones not yet visited: the walk
		// must still visit all ten with valid pointers.
		if err := f.w.Destroy(id); err != nil {
			t.Fatal(err)
		}
		other := ecs.ID(10 - int(id) + 1)
		if err := f.w.Destroy(other); err != nil {
			t.Fatal(err)
		}
		if !f.w.Alive(id) || !f.w.Leaving(id) {
			t.Fatal("destroy applied inside the iteration")
		}
		p.X += 100 // pointer still valid
		if len(listened) != 0 {
			t.Fatal("listener ran inside the iteration")
		}
	})
	if seen != 10 {
		t.Fatalf("visited %d, want 10", seen)
	}
	if f.w.Len() != 0 || f.pos.Len() != 0 || len(listened) != 10 {
		t.Fatalf("after iteration: len %d, pos %d, listened %d", f.w.Len(), f.pos.Len(), len(listened))
	}
	// Each entity's listener ran once, in the order Destroy was first called.
	want := []ecs.ID{1, 10, 2, 9, 3, 8, 4, 7, 5, 6}
	if !slices.Equal(listened, want) {
		t.Fatalf("listener order %v, want %v", listened, want)
	}
}

func TestDeferredAddAndRemoveOrder(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	f.spawn(t, 1, &Pos{}, nil, nil)
	f.spawn(t, 2, &Pos{}, &Vel{1, 1}, nil)
	f.pos.Each(func(id ecs.ID, _ *Pos) {
		switch id {
		case 1:
			_ = f.vel.Add(1, Vel{5, 5})
			if f.vel.Has(1) {
				t.Fatal("add of a new component applied inside the iteration")
			}
			f.vel.Remove(1) // cancels the add queued before it
			_ = f.vel.Add(1, Vel{7, 7})
		case 2:
			_ = f.vel.Add(2, Vel{2, 2}) // replaces at once
			if v, _ := f.vel.Get(2); *v != (Vel{2, 2}) {
				t.Fatal("replacing an existing value must be immediate")
			}
			if !f.vel.Remove(2) || !f.vel.Has(2) {
				t.Fatal("deferred remove: reports presence, applies later")
			}
		}
	})
	if v, ok := f.vel.Get(1); !ok || *v != (Vel{7, 7}) {
		t.Fatalf("entity 1 vel = %v %v, want the last add", v, ok)
	}
	if f.vel.Has(2) {
		t.Fatal("entity 2 vel not removed")
	}
}

func TestDestroyListenerCascade(t *testing.T) {
	// A master's destroy listener destroys its pet; both go in one flush.
	f := newFixture(t, ecs.Config{})
	f.spawn(t, 1, &Pos{}, nil, nil)
	f.spawn(t, 2, &Pos{}, nil, nil)
	var order []ecs.ID
	f.w.OnDestroy(func(w *ecs.World, id ecs.ID) {
		order = append(order, id)
		if id == 1 {
			if err := w.Destroy(2); err != nil {
				t.Error(err)
			}
			if !w.Alive(2) {
				t.Error("cascade applied inside the listener")
			}
		}
	})
	if err := f.w.Destroy(1); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []ecs.ID{1, 2}) || f.w.Len() != 0 {
		t.Fatalf("order %v, len %d", order, f.w.Len())
	}
}

func TestMovedLog(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	for i := 1; i <= 4; i++ {
		f.spawn(t, ecs.ID(i), &Pos{}, nil, nil)
	}
	f.w.MarkMoved(3)
	f.w.MarkMoved(1)
	f.w.MarkMoved(3)
	f.w.MarkMoved(2)
	if f.w.MarkMoved(99) {
		t.Fatal("MarkMoved on an unknown entity reported true")
	}
	_ = f.w.Destroy(2)
	var got []ecs.ID
	f.w.DrainMoved(func(id ecs.ID) { got = append(got, id) })
	if !slices.Equal(got, []ecs.ID{3, 1}) {
		t.Fatalf("drain = %v, want [3 1]", got)
	}
	got = nil
	f.w.DrainMoved(func(id ecs.ID) { got = append(got, id) })
	if len(got) != 0 {
		t.Fatalf("second drain = %v", got)
	}
	// A slot reused by a new entity does not inherit an old mark.
	f.w.MarkMoved(4)
	_ = f.w.Destroy(4)
	f.spawn(t, 5, &Pos{}, nil, nil)
	f.w.DrainMoved(func(id ecs.ID) { got = append(got, id) })
	if len(got) != 0 {
		t.Fatalf("reused slot drained %v", got)
	}
}

func TestDirtyLogPerComponent(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	f.spawn(t, 1, &Pos{}, &Vel{}, &Health{1})
	f.spawn(t, 2, &Pos{}, nil, &Health{1})
	f.pos.MarkDirty(2)
	f.pos.MarkDirty(1)
	f.pos.MarkDirty(2)
	f.health.MarkDirty(1)
	if f.vel.MarkDirty(2) {
		t.Fatal("MarkDirty on a missing component reported true")
	}
	drain := func(c ecs.Component) []ecs.ID {
		var out []ecs.ID
		c.DrainDirty(func(id ecs.ID) { out = append(out, id) })
		return out
	}
	if got := drain(f.pos); !slices.Equal(got, []ecs.ID{2, 1}) {
		t.Fatalf("pos dirty = %v", got)
	}
	if got := drain(f.health); !slices.Equal(got, []ecs.ID{1}) {
		t.Fatalf("health dirty = %v", got)
	}
	if got := drain(f.vel); len(got) != 0 {
		t.Fatalf("vel dirty = %v", got)
	}
	// Removing the component drops its mark; re-adding needs a new mark.
	f.health.MarkDirty(2)
	f.health.Remove(2)
	_ = f.health.Add(2, Health{9})
	if got := drain(f.health); len(got) != 0 {
		t.Fatalf("removed component stayed dirty: %v", got)
	}
	f.health.MarkDirty(2)
	f.health.Remove(2)
	_ = f.health.Add(2, Health{9})
	f.health.MarkDirty(2)
	if got := drain(f.health); !slices.Equal(got, []ecs.ID{2}) {
		t.Fatalf("re-marked once, drained %v", got)
	}
}
