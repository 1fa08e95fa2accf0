package interest

import "math/bits"

// chunkTable is an open-addressing hash table from a normalised chunk to a
// value: linear probing over a power-of-two array, kept at most half full,
// with backward-shift deletion (no tombstones, so probe chains never decay).
//
// It replaces map[ChunkPos]*T on the per-tick paths (resident lookups for
// area queries, the resident list of the chunk an entity moves into, the
// subscriber list of a chunk being sent): Go hashes a 12-byte struct key
// through the generic memhash path, while a ChunkPos mixes in three
// multiplies. The zero value of V means "absent", so no parallel occupancy
// array is needed: callers never store it (pointer tables store non-nil
// pointers; Subscriptions stores encoded slots that start at 1). Not safe for
// concurrent use.
type chunkTable[V comparable] struct {
	keys  []ChunkPos
	vals  []V
	n     int
	shift uint8 // 64 − log2(len(keys)): the hash's top bits pick the slot
}

const chunkTableMinSize = 16

// slot returns the home slot of c.
func (t *chunkTable[V]) slot(c ChunkPos) int {
	h := uint64(uint32(c.X))*0x9e3779b97f4a7c15 ^
		uint64(uint32(c.Y))*0xc2b2ae3d27d4eb4f ^
		uint64(uint32(c.Slab))*0x165667b19e3779f9
	// Fibonacci hashing: the multiply spreads the low-entropy chunk
	// coordinates into the top bits, which the shift keeps.
	return int((h * 0x9e3779b97f4a7c15) >> t.shift)
}

// get returns the value stored for c, or the zero value.
func (t *chunkTable[V]) get(c ChunkPos) V {
	var zero V
	if t.n == 0 {
		return zero
	}
	mask := len(t.keys) - 1
	for i := t.slot(c); ; i = (i + 1) & mask {
		v := t.vals[i]
		if v == zero {
			return zero
		}
		if t.keys[i] == c {
			return v
		}
	}
}

// put stores v (not the zero value) for c, replacing any previous value.
func (t *chunkTable[V]) put(c ChunkPos, v V) {
	var zero V
	if v == zero {
		panic("interest: chunkTable.put of the zero value")
	}
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	mask := len(t.keys) - 1
	for i := t.slot(c); ; i = (i + 1) & mask {
		if t.vals[i] == zero {
			t.keys[i], t.vals[i] = c, v
			t.n++
			return
		}
		if t.keys[i] == c {
			t.vals[i] = v
			return
		}
	}
}

// del removes c and reports whether it was present.
func (t *chunkTable[V]) del(c ChunkPos) bool {
	var zero V
	if t.n == 0 {
		return false
	}
	mask := len(t.keys) - 1
	i := t.slot(c)
	for {
		if t.vals[i] == zero {
			return false
		}
		if t.keys[i] == c {
			break
		}
		i = (i + 1) & mask
	}
	// Backward-shift: pull later members of the probe run into the hole
	// when their home slot does not lie cyclically in (hole, j].
	hole := i
	for j := (hole + 1) & mask; t.vals[j] != zero; j = (j + 1) & mask {
		home := t.slot(t.keys[j])
		if (j-home)&mask >= (j-hole)&mask {
			t.keys[hole], t.vals[hole] = t.keys[j], t.vals[j]
			hole = j
		}
	}
	t.keys[hole], t.vals[hole] = ChunkPos{}, zero
	t.n--
	return true
}

// len returns the number of stored chunks.
func (t *chunkTable[V]) len() int { return t.n }

// all yields every stored chunk and value, in slot order (deterministic
// for a given history of operations; callers that produce output sort).
// The table must not change during the iteration.
func (t *chunkTable[V]) all(yield func(ChunkPos, V) bool) {
	var zero V
	if t.n == 0 {
		return
	}
	for i, v := range t.vals {
		if v != zero && !yield(t.keys[i], v) {
			return
		}
	}
}

// reset empties the table, keeping its storage.
func (t *chunkTable[V]) reset() {
	if t.n == 0 {
		return
	}
	clear(t.keys)
	clear(t.vals)
	t.n = 0
}

func (t *chunkTable[V]) grow() {
	var zero V
	size := max(chunkTableMinSize, 2*len(t.keys))
	oldKeys, oldVals := t.keys, t.vals
	t.keys = make([]ChunkPos, size)
	t.vals = make([]V, size)
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	t.n = 0
	for i, v := range oldVals {
		if v != zero {
			t.put(oldKeys[i], v)
		}
	}
}
