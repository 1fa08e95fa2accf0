package interest

import "math/bits"

// placeTable maps an entity to its placement: open addressing with linear
// probing over a power-of-two array kept at most half full, backward-shift
// deletion, and a nil resident-list pointer meaning "empty slot". It is the
// same scheme as chunkTable, keyed by the entity id.
//
// It replaces map[E]placement[E]: the outbox asks for an entity's observers
// once per dirty entity per tick (thousands of lookups into ~20,000
// entities), and a probe that lands on the key and the value in one
// 32-byte cell costs fewer cache misses than a Swiss-table group's control
// word, key and value. Not safe for concurrent use.
type placeTable[E Entity] struct {
	cells []placeCell[E]
	n     int
	shift uint8
}

type placeCell[E Entity] struct {
	e E
	p placement[E] // p.rl == nil: empty
}

func (t *placeTable[E]) slot(e E) int {
	return int((uint64(e) * 0x9e3779b97f4a7c15) >> t.shift)
}

// get returns e's placement and whether e is present.
func (t *placeTable[E]) get(e E) (placement[E], bool) {
	if t.n == 0 {
		return placement[E]{}, false
	}
	mask := len(t.cells) - 1
	for i := t.slot(e); ; i = (i + 1) & mask {
		c := &t.cells[i]
		if c.p.rl == nil {
			return placement[E]{}, false
		}
		if c.e == e {
			return c.p, true
		}
	}
}

// put stores p (p.rl non-nil) for e, replacing any previous placement.
func (t *placeTable[E]) put(e E, p placement[E]) {
	if p.rl == nil {
		panic("interest: placeTable.put without a resident list")
	}
	if 2*(t.n+1) > len(t.cells) {
		t.grow()
	}
	mask := len(t.cells) - 1
	for i := t.slot(e); ; i = (i + 1) & mask {
		c := &t.cells[i]
		if c.p.rl == nil {
			c.e, c.p = e, p
			t.n++
			return
		}
		if c.e == e {
			c.p = p
			return
		}
	}
}

// del removes e and reports whether it was present.
func (t *placeTable[E]) del(e E) bool {
	if t.n == 0 {
		return false
	}
	mask := len(t.cells) - 1
	i := t.slot(e)
	for {
		c := &t.cells[i]
		if c.p.rl == nil {
			return false
		}
		if c.e == e {
			break
		}
		i = (i + 1) & mask
	}
	hole := i
	for j := (hole + 1) & mask; t.cells[j].p.rl != nil; j = (j + 1) & mask {
		home := t.slot(t.cells[j].e)
		if (j-home)&mask >= (j-hole)&mask {
			t.cells[hole] = t.cells[j]
			hole = j
		}
	}
	t.cells[hole] = placeCell[E]{}
	t.n--
	return true
}

func (t *placeTable[E]) len() int { return t.n }

func (t *placeTable[E]) grow() {
	size := max(chunkTableMinSize, 2*len(t.cells))
	old := t.cells
	t.cells = make([]placeCell[E], size)
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	t.n = 0
	for i := range old {
		if old[i].p.rl != nil {
			t.put(old[i].e, old[i].p)
		}
	}
}
