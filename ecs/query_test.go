package ecs_test

import (
	"slices"
	"testing"

	"github.com/shardwise/shardwise/ecs"
)

func collect2(q *ecs.Query2[Pos, Vel]) []ecs.ID {
	var out []ecs.ID
	q.Each(func(id ecs.ID, _ *Pos, _ *Vel) { out = append(out, id) })
	slices.Sort(out)
	return out
}

func TestQueryNegativeTerms(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	// 1: pos+vel; 2: pos+vel+ghost; 3: pos only; 4: pos+vel+frozen; 5: vel only;
	// 6: pos+vel+health
	f.spawn(t, 1, &Pos{}, &Vel{}, nil)
	f.spawn(t, 2, &Pos{}, &Vel{}, nil)
	_ = f.ghost.Add(2, Ghost{})
	f.spawn(t, 3, &Pos{}, nil, nil)
	f.spawn(t, 4, &Pos{}, &Vel{}, nil)
	_ = f.frozen.Add(4, Frozen{})
	f.spawn(t, 5, nil, &Vel{}, nil)
	f.spawn(t, 6, &Pos{}, &Vel{}, &Health{1})

	cases := []struct {
		name string
		q    *ecs.Query2[Pos, Vel]
		want []ecs.ID
	}{
		{"positive only", ecs.NewQuery2(f.pos, f.vel), []ecs.ID{1, 2, 4, 6}},
		{"without ghost", ecs.NewQuery2(f.pos, f.vel).Without(f.ghost), []ecs.ID{1, 4, 6}},
		{"without ghost, frozen", ecs.NewQuery2(f.pos, f.vel).Without(f.ghost, f.frozen), []ecs.ID{1, 6}},
		{"with health", ecs.NewQuery2(f.pos, f.vel).With(f.health), []ecs.ID{6}},
		{"with health without health", ecs.NewQuery2(f.pos, f.vel).With(f.health).Without(f.health), nil},
	}
	for _, c := range cases {
		if got := collect2(c.q); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
		if n := c.q.Count(); n != len(c.want) {
			t.Errorf("%s: Count = %d, want %d", c.name, n, len(c.want))
		}
	}

	var one []ecs.ID
	ecs.NewQuery1(f.pos).Without(f.vel).Each(func(id ecs.ID, _ *Pos) { one = append(one, id) })
	if !slices.Equal(one, []ecs.ID{3}) {
		t.Errorf("Query1 pos without vel = %v", one)
	}
	var three []ecs.ID
	ecs.NewQuery3(f.pos, f.vel, f.health).Without(f.ghost).Each(func(id ecs.ID, _ *Pos, _ *Vel, h *Health) {
		three = append(three, id)
		h.HP = 42
	})
	if !slices.Equal(three, []ecs.ID{6}) {
		t.Errorf("Query3 = %v", three)
	}
	if h, _ := f.health.Get(6); h.HP != 42 {
		t.Error("write through a query pointer was lost")
	}
}

// TestQueryDriverChoiceIsInvisible checks that whichever store drives the
// walk (the smallest), the pointers handed out belong to the entity named.
func TestQueryDriverChoiceIsInvisible(t *testing.T) {
	for _, sizes := range [][3]int{{5, 50, 500}, {500, 5, 50}, {50, 500, 5}} {
		f := newFixture(t, ecs.Config{})
		for i := 1; i <= 600; i++ {
			id := ecs.ID(i)
			_ = f.w.CreateEntity(id)
			if i <= sizes[0] || i%7 == 0 {
				_ = f.pos.Add(id, Pos{X: float64(i)})
			}
			if i <= sizes[1] || i%7 == 0 {
				_ = f.vel.Add(id, Vel{DX: float64(i)})
			}
			if i <= sizes[2] || i%7 == 0 {
				_ = f.health.Add(id, Health{HP: i})
			}
		}
		n := 0
		ecs.NewQuery3(f.pos, f.vel, f.health).Each(func(id ecs.ID, p *Pos, v *Vel, h *Health) {
			n++
			if p.X != float64(id) || v.DX != float64(id) || h.HP != int(id) {
				t.Fatalf("sizes %v: entity %d got %v %v %v", sizes, id, *p, *v, *h)
			}
		})
		m := 0
		ecs.NewQuery2(f.vel, f.pos).Each(func(id ecs.ID, v *Vel, p *Pos) {
			m++
			if p.X != float64(id) || v.DX != float64(id) {
				t.Fatalf("sizes %v: entity %d got %v %v", sizes, id, *p, *v)
			}
		})
		want := 0
		for i := 1; i <= 600; i++ {
			if (i <= min(sizes[0], sizes[1], sizes[2])) || i%7 == 0 {
				want++
			}
		}
		if n != want {
			t.Fatalf("sizes %v: query3 visited %d, want %d", sizes, n, want)
		}
		if m < n {
			t.Fatalf("sizes %v: query2 visited %d < %d", sizes, m, n)
		}
	}
}

func TestQuery1And3WithAndCount(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	f.spawn(t, 1, &Pos{}, &Vel{}, &Health{1})
	f.spawn(t, 2, &Pos{}, &Vel{}, &Health{1})
	_ = f.ghost.Add(2, Ghost{})
	f.spawn(t, 3, &Pos{}, nil, &Health{1})
	if n := ecs.NewQuery1(f.pos).With(f.vel).Count(); n != 2 {
		t.Fatalf("Query1 pos with vel = %d, want 2", n)
	}
	if n := ecs.NewQuery1(f.pos).With(f.health).Without(f.ghost, f.vel).Count(); n != 1 {
		t.Fatalf("Query1 pos with health without ghost, vel = %d, want 1", n)
	}
	if n := ecs.NewQuery3(f.pos, f.vel, f.health).With(f.ghost).Count(); n != 1 {
		t.Fatalf("Query3 with ghost = %d, want 1", n)
	}
	if n := ecs.NewQuery3(f.pos, f.vel, f.health).Count(); n != 2 {
		t.Fatalf("Query3 = %d, want 2", n)
	}
}

func TestEachEntityDefers(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	for i := 1; i <= 5; i++ {
		f.spawn(t, ecs.ID(i), nil, nil, nil)
	}
	var seen []ecs.ID
	f.w.EachEntity(func(id ecs.ID) {
		seen = append(seen, id)
		_ = f.w.Destroy(id)
		if !f.w.Alive(id) {
			t.Fatal("destroy applied during EachEntity")
		}
	})
	if len(seen) != 5 || f.w.Len() != 0 {
		t.Fatalf("seen %v, left %d", seen, f.w.Len())
	}
}

// Query4 matches a brute-force scan whichever of its four stores is the
// smallest (and so drives the walk), with the excluded term applied.
func TestQuery4MatchesABruteForceScan(t *testing.T) {
	type Tag struct{ N int }
	for drive := range 4 {
		f := newFixture(t, ecs.Config{})
		tag := must(ecs.Register[Tag](f.w, ecs.ComponentSpec{Name: "tag"}))
		has := func(store, i int) bool {
			if store == drive {
				return i%5 == 0 // the smallest store
			}
			return i%3 != 0 || i%5 == 0
		}
		for i := 1; i <= 300; i++ {
			id := ecs.ID(i)
			_ = f.w.CreateEntity(id)
			if has(0, i) {
				_ = f.pos.Add(id, Pos{X: float64(i)})
			}
			if has(1, i) {
				_ = f.vel.Add(id, Vel{DX: float64(i)})
			}
			if has(2, i) {
				_ = f.health.Add(id, Health{HP: i})
			}
			if has(3, i) {
				_ = tag.Add(id, Tag{N: i})
			}
			if i%4 == 0 {
				_ = f.ghost.Add(id, Ghost{})
			}
		}
		want := map[ecs.ID]bool{}
		for i := 1; i <= 300; i++ {
			if has(0, i) && has(1, i) && has(2, i) && has(3, i) && i%4 != 0 {
				want[ecs.ID(i)] = true
			}
		}
		got := map[ecs.ID]bool{}
		ecs.NewQuery4(f.pos, f.vel, f.health, tag).Without(f.ghost).Each(
			func(id ecs.ID, p *Pos, v *Vel, h *Health, g *Tag) {
				if p.X != float64(id) || v.DX != float64(id) || h.HP != int(id) || g.N != int(id) {
					t.Fatalf("drive %d: entity %d got %v %v %v %v", drive, id, *p, *v, *h, *g)
				}
				if got[id] {
					t.Fatalf("drive %d: entity %d twice", drive, id)
				}
				got[id] = true
			})
		if len(got) != len(want) || len(want) == 0 {
			t.Fatalf("drive %d: got %d entities, want %d", drive, len(got), len(want))
		}
		for id := range want {
			if !got[id] {
				t.Fatalf("drive %d: entity %d missing", drive, id)
			}
		}
		if n := ecs.NewQuery4(f.pos, f.vel, f.health, tag).With(f.ghost).Count(); n == 0 {
			t.Fatalf("drive %d: With(ghost) matched nothing", drive)
		}
	}
}
