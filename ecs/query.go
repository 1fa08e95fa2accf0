package ecs

// A query walks the entities that have every required component and none
// of the excluded ones. Build it once (at system setup) and call Each every
// tick: Each allocates nothing. The smallest required typed store drives the
// walk; the others are probed through the entity's slot, without touching
// the id map.
//
// Each defers structural changes made by its callback until the iteration
// (or, inside a tick, the tick's systems) ends, so the pointers it hands out
// stay valid for the whole callback.

// filter holds the untyped terms shared by every query arity, as pointers
// to the stores' sparse arrays: probing them is a bounds check and a load,
// with no interface call per entity.
type filter struct {
	with    []*[]uint32
	without []*[]uint32
}

func (f *filter) addWith(cs []Component) {
	for _, c := range cs {
		f.with = append(f.with, c.sparseRef())
	}
}

func (f *filter) addWithout(cs []Component) {
	for _, c := range cs {
		f.without = append(f.without, c.sparseRef())
	}
}

func (f *filter) admits(sl uint32) bool {
	for _, ref := range f.with {
		sp := *ref
		if int(sl) >= len(sp) || sp[sl] == 0 {
			return false
		}
	}
	for _, ref := range f.without {
		sp := *ref
		if int(sl) < len(sp) && sp[sl] != 0 {
			return false
		}
	}
	return true
}

// Query1 walks entities with A.
type Query1[A any] struct {
	a *Store[A]
	filter
}

// NewQuery1 returns a query over entities with A.
func NewQuery1[A any](a *Store[A]) *Query1[A] { return &Query1[A]{a: a} }

// With adds required component types whose values the callback does not need.
func (q *Query1[A]) With(cs ...Component) *Query1[A] { q.addWith(cs); return q }

// Without excludes entities that have any of cs (a Ghost or Frozen marker).
func (q *Query1[A]) Without(cs ...Component) *Query1[A] {
	q.addWithout(cs)
	return q
}

// Each calls fn for every matching entity.
func (q *Query1[A]) Each(fn func(id ID, a *A)) {
	w := q.a.w
	w.deferDepth++
	defer w.endIteration()
	a := q.a
	for i := range a.dense {
		if q.admits(a.slots[i]) {
			fn(a.ids[i], &a.dense[i])
		}
	}
}

// Count returns how many entities match.
func (q *Query1[A]) Count() int {
	n := 0
	for i := range q.a.dense {
		if q.admits(q.a.slots[i]) {
			n++
		}
	}
	return n
}

// Query2 walks entities with A and B.
type Query2[A, B any] struct {
	a *Store[A]
	b *Store[B]
	filter
}

// NewQuery2 returns a query over entities with A and B.
func NewQuery2[A, B any](a *Store[A], b *Store[B]) *Query2[A, B] { return &Query2[A, B]{a: a, b: b} }

// With adds required component types whose values the callback does not need.
func (q *Query2[A, B]) With(cs ...Component) *Query2[A, B] { q.addWith(cs); return q }

// Without excludes entities that have any of cs.
func (q *Query2[A, B]) Without(cs ...Component) *Query2[A, B] {
	q.addWithout(cs)
	return q
}

// Each calls fn for every matching entity.
func (q *Query2[A, B]) Each(fn func(id ID, a *A, b *B)) {
	w := q.a.w
	w.deferDepth++
	defer w.endIteration()
	a, b := q.a, q.b
	if len(a.dense) <= len(b.dense) {
		for i := range a.dense {
			sl := a.slots[i]
			j, ok := b.denseOf(sl)
			if ok && q.admits(sl) {
				fn(a.ids[i], &a.dense[i], &b.dense[j])
			}
		}
		return
	}
	for j := range b.dense {
		sl := b.slots[j]
		i, ok := a.denseOf(sl)
		if ok && q.admits(sl) {
			fn(b.ids[j], &a.dense[i], &b.dense[j])
		}
	}
}

// Count returns how many entities match.
func (q *Query2[A, B]) Count() int {
	n := 0
	q.Each(func(ID, *A, *B) { n++ })
	return n
}

// Query3 walks entities with A, B and C.
type Query3[A, B, C any] struct {
	a *Store[A]
	b *Store[B]
	c *Store[C]
	filter
}

// NewQuery3 returns a query over entities with A, B and C.
func NewQuery3[A, B, C any](a *Store[A], b *Store[B], c *Store[C]) *Query3[A, B, C] {
	return &Query3[A, B, C]{a: a, b: b, c: c}
}

// With adds required component types whose values the callback does not need.
func (q *Query3[A, B, C]) With(cs ...Component) *Query3[A, B, C] {
	q.addWith(cs)
	return q
}

// Without excludes entities that have any of cs.
func (q *Query3[A, B, C]) Without(cs ...Component) *Query3[A, B, C] {
	q.addWithout(cs)
	return q
}

// Each calls fn for every matching entity.
func (q *Query3[A, B, C]) Each(fn func(id ID, a *A, b *B, c *C)) {
	w := q.a.w
	w.deferDepth++
	defer w.endIteration()
	a, b, c := q.a, q.b, q.c
	// Drive by the smallest store; probe the other two by slot.
	na, nb, nc := len(a.dense), len(b.dense), len(c.dense)
	switch {
	case na <= nb && na <= nc:
		for i := range a.dense {
			sl := a.slots[i]
			j, ok1 := b.denseOf(sl)
			k, ok2 := c.denseOf(sl)
			if ok1 && ok2 && q.admits(sl) {
				fn(a.ids[i], &a.dense[i], &b.dense[j], &c.dense[k])
			}
		}
	case nb <= nc:
		for j := range b.dense {
			sl := b.slots[j]
			i, ok1 := a.denseOf(sl)
			k, ok2 := c.denseOf(sl)
			if ok1 && ok2 && q.admits(sl) {
				fn(b.ids[j], &a.dense[i], &b.dense[j], &c.dense[k])
			}
		}
	default:
		for k := range c.dense {
			sl := c.slots[k]
			i, ok1 := a.denseOf(sl)
			j, ok2 := b.denseOf(sl)
			if ok1 && ok2 && q.admits(sl) {
				fn(c.ids[k], &a.dense[i], &b.dense[j], &c.dense[k])
			}
		}
	}
}

// Count returns how many entities match.
func (q *Query3[A, B, C]) Count() int {
	n := 0
	q.Each(func(ID, *A, *B, *C) { n++ })
	return n
}

// Query4 walks entities with A, B, C and D.
type Query4[A, B, C, D any] struct {
	a *Store[A]
	b *Store[B]
	c *Store[C]
	d *Store[D]
	filter
}

// NewQuery4 returns a query over entities with A, B, C and D.
func NewQuery4[A, B, C, D any](a *Store[A], b *Store[B], c *Store[C], d *Store[D]) *Query4[A, B, C, D] {
	return &Query4[A, B, C, D]{a: a, b: b, c: c, d: d}
}

// With adds required component types whose values the callback does not need.
func (q *Query4[A, B, C, D]) With(cs ...Component) *Query4[A, B, C, D] {
	q.addWith(cs)
	return q
}

// Without excludes entities that have any of cs.
func (q *Query4[A, B, C, D]) Without(cs ...Component) *Query4[A, B, C, D] {
	q.addWithout(cs)
	return q
}

// Each calls fn for every matching entity.
func (q *Query4[A, B, C, D]) Each(fn func(id ID, a *A, b *B, c *C, d *D)) {
	w := q.a.w
	w.deferDepth++
	defer w.endIteration()
	a, b, c, d := q.a, q.b, q.c, q.d
	// Drive by the smallest store (its slots and ids arrays); probe all
	// four by slot. Probing the driver too costs a load and keeps one loop.
	slots, ids := a.slots, a.ids
	if len(b.slots) < len(slots) {
		slots, ids = b.slots, b.ids
	}
	if len(c.slots) < len(slots) {
		slots, ids = c.slots, c.ids
	}
	if len(d.slots) < len(slots) {
		slots, ids = d.slots, d.ids
	}
	for x, sl := range slots {
		i, ok1 := a.denseOf(sl)
		j, ok2 := b.denseOf(sl)
		k, ok3 := c.denseOf(sl)
		l, ok4 := d.denseOf(sl)
		if ok1 && ok2 && ok3 && ok4 && q.admits(sl) {
			fn(ids[x], &a.dense[i], &b.dense[j], &c.dense[k], &d.dense[l])
		}
	}
}

// Count returns how many entities match.
func (q *Query4[A, B, C, D]) Count() int {
	n := 0
	q.Each(func(ID, *A, *B, *C, *D) { n++ })
	return n
}
