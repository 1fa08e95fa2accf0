package hashring

import (
	"math"
	"sync"

	"github.com/shardwise/shardwise/errcode"
)

// DefaultLoadFactor is the bounded-load factor used when 0 is given: no node
// holds more than 25% above the mean load.
const DefaultLoadFactor = 1.25

// BoundedLoad assigns keys with consistent hashing with bounded loads
// (Mirrokni, Thorup and Zadimoghaddam, "Consistent Hashing with Bounded
// Loads", 2018). It counts how many assignments each node holds; a key goes
// to its ring leader unless the leader is full, and otherwise to the next
// node clockwise that has room. A node is full when its load has reached
//
//	capacity = ⌈factor × (total + 1) / nodes⌉
//
// where total counts the assignments held and nodes is the ring's Len. The
// factor is above 1, so the capacities add up to more than total and some
// node always has room: every key is placed, and no node ever holds more than
// factor times the mean.
//
// Placement depends on the loads, so two processes agree only if they saw
// the same Acquire and Release calls: use it for one process's own choices
// (connections, jobs, sessions), not for a key → node mapping that other
// processes must compute. It is safe for concurrent use.
type BoundedLoad struct {
	ring   *Ring
	factor float64

	mu    sync.Mutex
	loads map[string]int
	total int
}

// NewBoundedLoad returns a load tracker over ring. factor 0 means
// DefaultLoadFactor; otherwise it must be finite and greater than 1. The
// ring may change afterwards: each choice uses its current nodes.
func NewBoundedLoad(ring *Ring, factor float64) (*BoundedLoad, error) {
	if ring == nil {
		return nil, errcode.Config("ring", ring, "must not be nil")
	}
	if factor == 0 {
		factor = DefaultLoadFactor
	}
	if !(factor > 1) || math.IsInf(factor, 1) {
		return nil, errcode.Config("factor", factor, "must be finite and greater than 1 (0 means 1.25)")
	}
	return &BoundedLoad{ring: ring, factor: factor, loads: make(map[string]int)}, nil
}

// Factor returns the load factor in force.
func (b *BoundedLoad) Factor() float64 { return b.factor }

// Acquire chooses the node for key, counts one more assignment on it and
// returns it. ok is false only when the ring is empty. Pair every successful
// Acquire with a Release of the returned id.
func (b *BoundedLoad) Acquire(key string) (id string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id, ok = b.pickLocked(key)
	if ok {
		b.loads[id]++
		b.total++
	}
	return id, ok
}

// Pick returns the node Acquire would choose for key now, without counting
// it.
func (b *BoundedLoad) Pick(key string) (id string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pickLocked(key)
}

// Release gives back one assignment held on id. Releasing a node that holds
// none does nothing. A node removed from the ring keeps its load until its
// assignments are released, because they are still real until then.
func (b *BoundedLoad) Release(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.loads[id] == 0 {
		return
	}
	b.loads[id]--
	b.total--
	if b.loads[id] == 0 {
		delete(b.loads, id)
	}
}

// Load returns the number of assignments id holds.
func (b *BoundedLoad) Load(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loads[id]
}

// Total returns the number of assignments held on all nodes.
func (b *BoundedLoad) Total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Capacity returns the load at which a node counts as full for the next
// choice, or 0 when the ring is empty.
func (b *BoundedLoad) Capacity() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.capacityLocked(b.ring.Len())
}

func (b *BoundedLoad) capacityLocked(nodes int) int {
	if nodes == 0 {
		return 0
	}
	return int(math.Ceil(b.factor * float64(b.total+1) / float64(nodes)))
}

func (b *BoundedLoad) pickLocked(key string) (string, bool) {
	limit := b.capacityLocked(b.ring.Len())
	id, ok := b.ring.GetWhere(key, func(id string) bool { return b.loads[id] < limit })
	if !ok {
		// Unreachable while the capacity argument holds, but the ring may
		// have changed between Len and the walk: fall back to the leader
		// rather than refuse a key.
		return b.ring.Get(key)
	}
	return id, ok
}
