package ecs_test

import (
	"testing"

	"github.com/shardwise/shardwise/ecs"
)

type Pos struct{ X, Y float64 }
type Vel struct{ DX, DY float64 }
type Health struct{ HP int }
type Ghost struct{}
type Frozen struct{}

type fixture struct {
	w      *ecs.World
	pos    *ecs.Store[Pos]
	vel    *ecs.Store[Vel]
	health *ecs.Store[Health]
	ghost  *ecs.Store[Ghost]
	frozen *ecs.Store[Frozen]
}

// must is for fixture setup, where an error means the test itself is broken.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func newFixture(t testing.TB, cfg ecs.Config) *fixture {
	t.Helper()
	w := must(ecs.New(cfg))
	return &fixture{
		w:      w,
		pos:    must(ecs.Register[Pos](w, ecs.ComponentSpec{Name: "pos"})),
		vel:    must(ecs.Register[Vel](w, ecs.ComponentSpec{Name: "vel"})),
		health: must(ecs.Register[Health](w, ecs.ComponentSpec{Name: "health", Meta: "owner+party"})),
		ghost:  must(ecs.Register[Ghost](w, ecs.ComponentSpec{Name: "ghost"})),
		frozen: must(ecs.Register[Frozen](w, ecs.ComponentSpec{Name: "frozen"})),
	}
}

func (f *fixture) spawn(t testing.TB, id ecs.ID, p *Pos, v *Vel, h *Health) {
	t.Helper()
	if err := f.w.CreateEntity(id); err != nil {
		t.Fatal(err)
	}
	if p != nil {
		if err := f.pos.Add(id, *p); err != nil {
			t.Fatal(err)
		}
	}
	if v != nil {
		if err := f.vel.Add(id, *v); err != nil {
			t.Fatal(err)
		}
	}
	if h != nil {
		if err := f.health.Add(id, *h); err != nil {
			t.Fatal(err)
		}
	}
}
