package ecs_test

import (
	"fmt"

	"github.com/shardwise/shardwise/ecs"
)

func Example() {
	type Position struct{ X, Y float64 }
	type Velocity struct{ DX, DY float64 }
	type GhostMarker struct{}

	w, _ := ecs.New(ecs.Config{})
	pos, _ := ecs.Register[Position](w, ecs.ComponentSpec{Name: "position"})
	vel, _ := ecs.Register[Velocity](w, ecs.ComponentSpec{Name: "velocity"})
	ghost, _ := ecs.Register[GhostMarker](w, ecs.ComponentSpec{Name: "ghost"})

	for id := ecs.ID(1); id <= 3; id++ {
		_ = w.CreateEntity(id)
		_ = pos.Add(id, Position{})
		_ = vel.Add(id, Velocity{DX: float64(id)})
	}
	_ = ghost.Add(3, GhostMarker{}) // a replica: no system may move it

	move := ecs.NewQuery2(pos, vel).Without(ghost)
	_ = w.AddSystem(ecs.System{Name: "move", Run: func(w *ecs.World, t ecs.Tick) {
		move.Each(func(id ecs.ID, p *Position, v *Velocity) { p.X += v.DX })
	}})
	w.OnDestroy(func(_ *ecs.World, id ecs.ID) { fmt.Println("vanish", id) })

	w.Step()
	w.Step()
	_ = w.Evict(3)   // handed over: no vanish
	_ = w.Destroy(2) // died: vanish
	pos.Each(func(id ecs.ID, p *Position) { fmt.Println(id, p.X) })
	// Output:
	// vanish 2
	// 1 2
}
