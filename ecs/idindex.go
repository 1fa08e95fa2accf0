package ecs

// idIndex maps alive entity ids to slots: an open-addressing hash table with
// linear probing and backward-shift deletion (no tombstones). Every
// component lookup by id goes through it, so it is built for that one job:
// a key and its value share one 16-byte cell, so a hit usually costs one
// cache miss (a Go map reads a control word and then a slot, two misses on
// a table this size), and the hash is one multiplication (snowflake ids
// differ mostly in their low bits, which Fibonacci hashing spreads).
//
// It also remembers the last id it found: systems and encoders look up
// the same entity in several stores one after another (position, then
// speed; has, audience, payload), and the second lookup is then free.
// That makes get a write, which is fine because one goroutine owns the
// World (reads from other goroutines were never allowed).
type idIndex struct {
	cells []idCell // len is a power of two, at most half full
	shift uint     // 64 − log2(len(cells))
	n     int
	last  idCell // the last hit; slot1 == 0 when none (reset by put/remove)
}

// idCell is one entry; slot1 is the slot + 1, so 0 marks an empty cell.
type idCell struct {
	id    ID
	slot1 uint32
}

const idIndexMinCells = 64

func (x *idIndex) home(id ID) int {
	return int((uint64(id) * 0x9e3779b97f4a7c15) >> x.shift)
}

// get returns id's slot.
func (x *idIndex) get(id ID) (uint32, bool) {
	if x.last.slot1 != 0 && x.last.id == id {
		return x.last.slot1 - 1, true
	}
	if len(x.cells) == 0 {
		return 0, false
	}
	mask := len(x.cells) - 1
	for i := x.home(id); ; i = (i + 1) & mask {
		c := &x.cells[i]
		if c.slot1 == 0 {
			return 0, false
		}
		if c.id == id {
			x.last = *c
			return c.slot1 - 1, true
		}
	}
}

// put sets id's slot, inserting id if it is absent.
func (x *idIndex) put(id ID, slot uint32) {
	x.last = idCell{}
	if (x.n+1)*2 > len(x.cells) {
		x.grow()
	}
	mask := len(x.cells) - 1
	for i := x.home(id); ; i = (i + 1) & mask {
		c := &x.cells[i]
		if c.slot1 == 0 {
			*c = idCell{id: id, slot1: slot + 1}
			x.n++
			return
		}
		if c.id == id {
			c.slot1 = slot + 1
			return
		}
	}
}

// remove deletes id if present. The cells after it in its probe run are
// shifted back so that every key stays reachable from its home without
// tombstones.
func (x *idIndex) remove(id ID) {
	x.last = idCell{}
	if len(x.cells) == 0 {
		return
	}
	mask := len(x.cells) - 1
	i := x.home(id)
	for {
		c := &x.cells[i]
		if c.slot1 == 0 {
			return
		}
		if c.id == id {
			break
		}
		i = (i + 1) & mask
	}
	x.n--
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		c := x.cells[j]
		if c.slot1 == 0 {
			break
		}
		// c may fill the hole at i unless its home lies cyclically in
		// (i, j]: then moving it before its home would hide it.
		h := x.home(c.id)
		if (j-h)&mask >= (j-i)&mask {
			x.cells[i] = c
			i = j
		}
	}
	x.cells[i] = idCell{}
}

func (x *idIndex) len() int { return x.n }

func (x *idIndex) grow() {
	old := x.cells
	size := max(idIndexMinCells, 2*len(old))
	x.cells = make([]idCell, size)
	x.shift = 64
	for s := size; s > 1; s >>= 1 {
		x.shift--
	}
	x.n = 0
	for _, c := range old {
		if c.slot1 != 0 {
			x.put(c.id, c.slot1-1)
		}
	}
}
