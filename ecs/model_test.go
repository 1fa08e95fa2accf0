package ecs_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/ecs"
)

// The model is the naive version the optimised World is checked against: a
// map of entities to a map of components, and a plain list of queued
// changes.
type modelOp struct {
	kind string // add, remove, destroy, evict
	comp int
	id   ecs.ID
	val  int
}

type model struct {
	alive     map[ecs.ID]bool // value: leaving
	comps     [3]map[ecs.ID]int
	deferring bool
	queue     []modelOp
	destroyed []ecs.ID
	forgot    []ecs.ID
}

func newModel() *model {
	m := &model{alive: map[ecs.ID]bool{}}
	for i := range m.comps {
		m.comps[i] = map[ecs.ID]int{}
	}
	return m
}

func (m *model) create(id ecs.ID) bool {
	if _, ok := m.alive[id]; ok {
		return false
	}
	m.alive[id] = false
	return true
}

func (m *model) add(c int, id ecs.ID, v int) bool {
	if _, ok := m.alive[id]; !ok {
		return false
	}
	if _, has := m.comps[c][id]; has || !m.deferring {
		m.comps[c][id] = v
		return true
	}
	m.queue = append(m.queue, modelOp{kind: "add", comp: c, id: id, val: v})
	return true
}

func (m *model) remove(c int, id ecs.ID) bool {
	if _, ok := m.alive[id]; !ok {
		return false
	}
	_, has := m.comps[c][id]
	if m.deferring {
		m.queue = append(m.queue, modelOp{kind: "remove", comp: c, id: id})
		return has
	}
	delete(m.comps[c], id)
	return has
}

func (m *model) leave(kind string, id ecs.ID) bool {
	leaving, ok := m.alive[id]
	if !ok {
		return false
	}
	if leaving {
		return true
	}
	m.alive[id] = true
	m.queue = append(m.queue, modelOp{kind: kind, id: id})
	if !m.deferring {
		m.flush()
	}
	return true
}

func (m *model) flush() {
	for _, o := range m.queue {
		_, ok := m.alive[o.id]
		switch o.kind {
		case "add":
			if ok {
				m.comps[o.comp][o.id] = o.val
			}
		case "remove":
			delete(m.comps[o.comp], o.id)
		case "destroy", "evict":
			if o.kind == "destroy" {
				m.destroyed = append(m.destroyed, o.id)
			}
			for c := range m.comps {
				delete(m.comps[c], o.id)
			}
			delete(m.alive, o.id)
			m.forgot = append(m.forgot, o.id)
		}
	}
	m.queue = nil
}

type subject struct {
	f         *fixture
	destroyed []ecs.ID
	forgot    []ecs.ID
}

func (s *subject) add(c int, id ecs.ID, v int) error {
	switch c {
	case 0:
		return s.f.pos.Add(id, Pos{X: float64(v)})
	case 1:
		return s.f.vel.Add(id, Vel{DX: float64(v)})
	default:
		return s.f.health.Add(id, Health{HP: v})
	}
}

func (s *subject) remove(c int, id ecs.ID) bool {
	switch c {
	case 0:
		return s.f.pos.Remove(id)
	case 1:
		return s.f.vel.Remove(id)
	default:
		return s.f.health.Remove(id)
	}
}

func (s *subject) get(c int, id ecs.ID) (int, bool) {
	switch c {
	case 0:
		p, ok := s.f.pos.Get(id)
		if !ok {
			return 0, false
		}
		return int(p.X), true
	case 1:
		p, ok := s.f.vel.Get(id)
		if !ok {
			return 0, false
		}
		return int(p.DX), true
	default:
		p, ok := s.f.health.Get(id)
		if !ok {
			return 0, false
		}
		return p.HP, true
	}
}

const modelIDs = 24

func check(t *testing.T, where string, m *model, s *subject) {
	t.Helper()
	f := s.f
	if f.w.Len() != len(m.alive) {
		t.Fatalf("%s: Len %d, model %d", where, f.w.Len(), len(m.alive))
	}
	for i := 1; i <= modelIDs; i++ {
		id := ecs.ID(i)
		leaving, alive := m.alive[id]
		if f.w.Alive(id) != alive || f.w.Leaving(id) != (alive && leaving) {
			t.Fatalf("%s: entity %d alive=%v leaving=%v, model alive=%v leaving=%v",
				where, id, f.w.Alive(id), f.w.Leaving(id), alive, leaving)
		}
		for c := range 3 {
			v, ok := s.get(c, id)
			mv, mok := m.comps[c][id]
			if ok != mok || v != mv {
				t.Fatalf("%s: entity %d comp %d = (%d,%v), model (%d,%v)", where, id, c, v, ok, mv, mok)
			}
		}
	}
	for c, n := range []int{f.pos.Len(), f.vel.Len(), f.health.Len()} {
		if n != len(m.comps[c]) {
			t.Fatalf("%s: comp %d Len %d, model %d", where, c, n, len(m.comps[c]))
		}
	}
	var got []ecs.ID
	ecs.NewQuery2(f.pos, f.vel).Without(f.health).Each(func(id ecs.ID, p *Pos, v *Vel) {
		if int(p.X) != m.comps[0][id] || int(v.DX) != m.comps[1][id] {
			t.Fatalf("%s: query values for %d differ from the model", where, id)
		}
		got = append(got, id)
	})
	slices.Sort(got)
	var want []ecs.ID
	for _, id := range slices.Sorted(maps.Keys(m.comps[0])) {
		_, v := m.comps[1][id]
		_, h := m.comps[2][id]
		if v && !h {
			want = append(want, id)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: query pos,vel without health = %v, model %v", where, got, want)
	}
	if !slices.Equal(s.destroyed, m.destroyed) || !slices.Equal(s.forgot, m.forgot) {
		t.Fatalf("%s: listeners %v / forget %v, model %v / %v", where, s.destroyed, s.forgot, m.destroyed, m.forgot)
	}
}

// TestPropertyWorldMatchesModel runs random operation sequences, some
// inside a tick (deferred), against the World and the model, comparing
// every observable after every operation.
func TestPropertyWorldMatchesModel(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0xec5))
		f := newFixture(t, ecs.Config{})
		s := &subject{f: f}
		f.w.OnDestroy(func(_ *ecs.World, id ecs.ID) { s.destroyed = append(s.destroyed, id) })
		f.w.OnForget(func(id ecs.ID) { s.forgot = append(s.forgot, id) })
		m := newModel()

		var batch func()
		if err := f.w.AddSystem(ecs.System{Name: "ops", Run: func(*ecs.World, ecs.Tick) { batch() }}); err != nil {
			t.Fatal(err)
		}
		step := 0
		one := func(deferred bool) {
			step++
			where := fmt.Sprintf("seed %d step %d", seed, step)
			id := ecs.ID(1 + rng.IntN(modelIDs))
			c := rng.IntN(3)
			switch r := rng.IntN(100); {
			case r < 20:
				if (f.w.CreateEntity(id) == nil) != m.create(id) {
					t.Fatalf("%s: create %d disagrees", where, id)
				}
			case r < 55:
				v := rng.IntN(1000)
				if (s.add(c, id, v) == nil) != m.add(c, id, v) {
					t.Fatalf("%s: add %d disagrees", where, id)
				}
			case r < 72:
				if s.remove(c, id) != m.remove(c, id) {
					t.Fatalf("%s: remove %d comp %d disagrees", where, id, c)
				}
			case r < 88:
				if (f.w.Destroy(id) == nil) != m.leave("destroy", id) {
					t.Fatalf("%s: destroy %d disagrees", where, id)
				}
			default:
				if (f.w.Evict(id) == nil) != m.leave("evict", id) {
					t.Fatalf("%s: evict %d disagrees", where, id)
				}
			}
			check(t, where, m, s)
		}
		for range 60 {
			if rng.IntN(3) == 0 {
				n := rng.IntN(12)
				batch = func() {
					for range n {
						one(true)
					}
				}
				m.deferring = true
				// The model applies its queue when the tick's systems end.
				f.w.Step()
				m.deferring = false
				m.flush()
				check(t, fmt.Sprintf("seed %d after tick", seed), m, s)
			} else {
				one(false)
			}
		}
	}
}
