package ecs_test

import (
	"testing"

	"github.com/shardwise/shardwise/ecs"
)

const benchEntities = 20_000

// benchWorld holds 20k entities, all with Pos and Vel, half with Health,
// one in ten a Ghost.
func benchWorld(b *testing.B) *fixture {
	f := newFixture(b, ecs.Config{})
	for i := 1; i <= benchEntities; i++ {
		id := ecs.ID(i)
		f.spawn(b, id, &Pos{X: float64(i)}, &Vel{DX: 1, DY: 0.5}, nil)
		if i%2 == 0 {
			_ = f.health.Add(id, Health{HP: 100})
		}
		if i%10 == 0 {
			_ = f.ghost.Add(id, Ghost{})
		}
	}
	return f
}

// BenchmarkQuery2Iterate20k moves 20k entities: one op = one full pass.
func BenchmarkQuery2Iterate20k(b *testing.B) {
	f := benchWorld(b)
	q := ecs.NewQuery2(f.pos, f.vel)
	b.ReportAllocs()
	for b.Loop() {
		q.Each(func(_ ecs.ID, p *Pos, v *Vel) {
			p.X += v.DX
			p.Y += v.DY
		})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchEntities, "ns/entity")
}

// BenchmarkQuery2Without20k is the same pass with a negative term.
func BenchmarkQuery2Without20k(b *testing.B) {
	f := benchWorld(b)
	q := ecs.NewQuery2(f.pos, f.vel).Without(f.ghost)
	b.ReportAllocs()
	for b.Loop() {
		q.Each(func(_ ecs.ID, p *Pos, v *Vel) {
			p.X += v.DX
			p.Y += v.DY
		})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchEntities, "ns/entity")
}

// BenchmarkQuery3Iterate20k walks the 10k entities with all three.
func BenchmarkQuery3Iterate20k(b *testing.B) {
	f := benchWorld(b)
	q := ecs.NewQuery3(f.pos, f.vel, f.health).Without(f.ghost)
	b.ReportAllocs()
	for b.Loop() {
		q.Each(func(_ ecs.ID, p *Pos, v *Vel, h *Health) {
			p.X += v.DX
			if h.HP > 0 {
				h.HP--
			}
		})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchEntities, "ns/entity")
}

// BenchmarkNaiveMapIterate20k is the peer: the same pass over a
// map-of-maps world (the shape the model test uses), for the ratio.
func BenchmarkNaiveMapIterate20k(b *testing.B) {
	pos := make(map[ecs.ID]*Pos, benchEntities)
	vel := make(map[ecs.ID]*Vel, benchEntities)
	for i := 1; i <= benchEntities; i++ {
		pos[ecs.ID(i)] = &Pos{X: float64(i)}
		vel[ecs.ID(i)] = &Vel{DX: 1, DY: 0.5}
	}
	b.ReportAllocs()
	for b.Loop() {
		for id, p := range pos {
			if v, ok := vel[id]; ok {
				p.X += v.DX
				p.Y += v.DY
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchEntities, "ns/entity")
}

// BenchmarkStepThreeSystems20k is one tick: move, a negative-term decay, and
// a dirty mark on every 8th entity, with the moved log drained at tick end.
func BenchmarkStepThreeSystems20k(b *testing.B) {
	f := benchWorld(b)
	move := ecs.NewQuery2(f.pos, f.vel).Without(f.ghost)
	decay := ecs.NewQuery1(f.health).Without(f.ghost)
	_ = f.w.AddSystem(ecs.System{Name: "move", Run: func(w *ecs.World, t ecs.Tick) {
		move.Each(func(id ecs.ID, p *Pos, v *Vel) {
			p.X += v.DX
			if uint64(id)%8 == t.N%8 {
				f.pos.MarkDirty(id)
				w.MarkMoved(id)
			}
		})
	}})
	_ = f.w.AddSystem(ecs.System{Name: "decay", Run: func(*ecs.World, ecs.Tick) {
		decay.Each(func(_ ecs.ID, h *Health) { h.HP = (h.HP + 1) % 100 })
	}})
	drained := 0
	f.w.OnTickEnd(func(w *ecs.World, _ ecs.Tick) {
		w.DrainMoved(func(ecs.ID) { drained++ })
		f.pos.DrainDirty(func(ecs.ID) { drained++ })
	})
	f.w.Step() // warm the logs' backing arrays
	b.ReportAllocs()
	for b.Loop() {
		f.w.Step()
	}
}

func BenchmarkGet(b *testing.B) {
	f := benchWorld(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i = i%benchEntities + 1
		p, _ := f.pos.Get(ecs.ID(i))
		p.Y++
	}
}

func BenchmarkCreateAddDestroy(b *testing.B) {
	f := benchWorld(b)
	b.ReportAllocs()
	id := ecs.ID(1 << 40)
	for b.Loop() {
		id++
		_ = f.w.CreateEntity(id)
		_ = f.pos.Add(id, Pos{})
		_ = f.vel.Add(id, Vel{})
		_ = f.w.Destroy(id)
	}
}

// TestIterationAllocatesNothing is the allocation claim as a test (a count,
// not a timing): a warm query pass allocates zero times.
func TestIterationAllocatesNothing(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	for i := 1; i <= 1000; i++ {
		f.spawn(t, ecs.ID(i), &Pos{}, &Vel{DX: 1}, &Health{1})
	}
	q2 := ecs.NewQuery2(f.pos, f.vel).Without(f.ghost)
	q3 := ecs.NewQuery3(f.pos, f.vel, f.health).Without(f.ghost)
	allocs := testing.AllocsPerRun(20, func() {
		q2.Each(func(_ ecs.ID, p *Pos, v *Vel) { p.X += v.DX })
		q3.Each(func(_ ecs.ID, p *Pos, _ *Vel, h *Health) { p.Y += float64(h.HP) })
	})
	if allocs != 0 {
		t.Fatalf("query pass allocated %v times", allocs)
	}
}
