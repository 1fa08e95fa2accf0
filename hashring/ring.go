package hashring

import (
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/shardwise/shardwise/errcode"
)

// MaxVNodes is the largest vnode count Add accepts for one node. It keeps a
// typo (100000000 for 100) from building a ring that exhausts memory; the
// TypeScript router's own defaults are 100 to a few hundred.
const MaxVNodes = 1 << 16

// maxSalt bounds the salting of one vnode label. With a 32-bit hash and a
// million points, one salted label collides with probability about 2⁻¹², so
// a legitimate ring never gets near the bound; a hash with a tiny range (a
// test double, a broken function) gets ErrNoFreePoint instead of a hang.
const maxSalt = 1024

// ErrNoFreePoint is returned by Add when a vnode found no free point on the
// ring within the bounded number of salted labels. It means the hash function
// has too small a range for the number of points asked for.
var ErrNoFreePoint = errcode.New("HASHRING.NO_FREE_POINT", "hashring: no free ring point for a vnode")

// Ring is a consistent-hash ring with virtual nodes.
//
// The zero value is an empty ring that uses SHA1. A Ring is safe for
// concurrent use: writers (Add, Remove) serialise on a mutex and publish a
// new immutable snapshot; readers load the current snapshot with one atomic
// read and never wait for a writer.
type Ring struct {
	hash HashFunc
	mu   sync.Mutex // serialises writers; readers never take it
	snap atomic.Pointer[snapshot]
}

// snapshot is one immutable state of the ring. It is never modified after
// it is published.
type snapshot struct {
	// points holds every vnode point with its owner, sorted by hash,
	// without duplicate hashes. Hash and owner sit side by side so a
	// lookup touches one cache line for both.
	points []point
	// ids lists the nodes in insertion order; vnodes is parallel to it.
	ids    []string
	vnodes []int
	// pos maps a node id to its position in ids.
	pos map[string]int32
	// bucket[j] is the number of points whose top bits (hash >> shift)
	// are below j, for j in 0 … 1<<(32-shift). It narrows the search for
	// a hash to the few points that share its top bits.
	bucket []int32
	shift  uint
	// slots answers most lookups with one memory access: slots[j] says who
	// leads every hash of bucket j when that bucket holds at most one
	// point. nil when the ring is empty or has too many nodes for uint16.
	slots []slot
}

// slot is the precomputed answer for one bucket: a hash below limit is led
// by o1, any other by o2. A bucket with no point has o1 == o2 (the owner of
// the next point clockwise); a bucket with one point p has limit p, o1 its
// owner and o2 the owner of the point after it. A bucket with two or more
// points is marked crowded and searched instead.
type slot struct {
	limit  uint32
	o1, o2 uint16
}

// crowded marks a slot whose bucket holds two or more points; it is also
// why slots are only built for rings of fewer than 65535 nodes.
const crowded = 1<<16 - 1

// point is one vnode on the ring: its hash and the position in ids of the
// node that owns it.
type point struct {
	hash  uint32
	owner int32
}

// New returns an empty ring that hashes with hash, or with SHA1 when hash is
// nil.
func New(hash HashFunc) *Ring {
	return &Ring{hash: hash}
}

func (r *Ring) hashOf(key string) uint32 {
	if r.hash == nil {
		return SHA1(key)
	}
	return r.hash(key)
}

// Add puts node id on the ring with vnodes points. vnodes outside
// 1 … MaxVNodes is a CONFIG.INVALID error, checked before anything else.
// Adding an id that is already present returns nil and changes nothing (its
// vnode count stays what it was). When a point is taken, by any node
// including id itself, the label is salted ("<id>-<i>#1", "#2", …) until a
// free point is found; existing points never move. If the hash cannot find a
// free point within a bounded number of salts Add returns ErrNoFreePoint and
// the ring is unchanged.
func (r *Ring) Add(id string, vnodes int) error {
	if vnodes < 1 || vnodes > MaxVNodes {
		return errcode.Config("vnodes", vnodes, "must be between 1 and "+strconv.Itoa(MaxVNodes))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	if old.has(id) {
		return nil
	}
	fresh, err := r.placeVNodes(old, id, vnodes)
	if err != nil {
		return err
	}
	r.snap.Store(old.with(id, vnodes, fresh))
	return nil
}

// placeVNodes computes the points of a new node, in label order, against the
// points already on the ring and those it has placed itself.
func (r *Ring) placeVNodes(old *snapshot, id string, vnodes int) ([]uint32, error) {
	fresh := make([]uint32, 0, vnodes)
	mine := make(map[uint32]struct{}, vnodes)
	taken := func(p uint32) bool {
		if _, ok := mine[p]; ok {
			return true
		}
		return old.contains(p)
	}
	for i := range vnodes {
		label := id + "-" + strconv.Itoa(i)
		p := r.hashOf(label)
		for salt := 1; taken(p); salt++ {
			if salt > maxSalt {
				return nil, ErrNoFreePoint.Wrap("node %q vnode %d: %d salted labels all collide", id, i, maxSalt)
			}
			p = r.hashOf(label + "#" + strconv.Itoa(salt))
		}
		mine[p] = struct{}{}
		fresh = append(fresh, p)
	}
	return fresh, nil
}

// Remove takes node id and all its points off the ring. Removing an absent
// id does nothing.
func (r *Ring) Remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	if !old.has(id) {
		return
	}
	r.snap.Store(old.without(id))
}

// Has reports whether id is on the ring.
func (r *Ring) Has(id string) bool { return r.snap.Load().has(id) }

// IDs returns the nodes in the order they were added. The slice is a copy.
func (r *Ring) IDs() []string {
	s := r.snap.Load()
	if s == nil {
		return []string{}
	}
	return slices.Clone(s.ids)
}

// Len returns the number of nodes (not points) on the ring.
func (r *Ring) Len() int {
	s := r.snap.Load()
	if s == nil {
		return 0
	}
	return len(s.ids)
}

// Points returns the number of vnode points on the ring.
func (r *Ring) Points() int {
	s := r.snap.Load()
	if s == nil {
		return 0
	}
	return len(s.points)
}

// VNodes returns the vnode count id was added with, which is its weight: a
// node's share of keys is about its vnodes over the total.
func (r *Ring) VNodes(id string) (int, bool) {
	s := r.snap.Load()
	if !s.has(id) {
		return 0, false
	}
	return s.vnodes[s.pos[id]], true
}

// Get returns the leader of key: the node owning the first point strictly
// greater than the key's hash, wrapping past the largest point to the
// smallest. ok is false when the ring is empty. Get does not allocate (given
// a hash function that does not) and runs in O(log points).
func (r *Ring) Get(key string) (id string, ok bool) {
	s := r.snap.Load()
	if s == nil || len(s.points) == 0 {
		return "", false
	}
	return s.ids[s.leader(r.hashOf(key))], true
}

// GetN returns up to n distinct owners of key, leader first, walking
// clockwise from the leader's point and keeping each node the first time it
// is met. It never returns more than Len nodes; n < 1 or an empty ring gives
// an empty slice.
func (r *Ring) GetN(key string, n int) []string {
	return r.AppendN(nil, key, n)
}

// AppendN appends to dst what GetN(key, n) returns, so a caller that reuses
// dst looks up replicas without allocating.
func (r *Ring) AppendN(dst []string, key string, n int) []string {
	if dst == nil {
		dst = []string{}
	}
	s := r.snap.Load()
	if s == nil || len(s.points) == 0 || n < 1 {
		return dst
	}
	n = min(n, len(s.ids))
	start := len(dst)
	s.walk(s.successor(r.hashOf(key)), func(owner int32) bool {
		dst = append(dst, s.ids[owner])
		return len(dst)-start < n
	})
	return dst
}

// GetWhere returns the first node clockwise from key's leader (the leader
// itself included) for which accept returns true, visiting each node once.
// ok is false when the ring is empty or no node is accepted. It is the
// building block of BoundedLoad and of any other "leader unless it is full"
// policy.
func (r *Ring) GetWhere(key string, accept func(id string) bool) (id string, ok bool) {
	s := r.snap.Load()
	if s == nil || len(s.points) == 0 {
		return "", false
	}
	s.walk(s.successor(r.hashOf(key)), func(owner int32) bool {
		if accept(s.ids[owner]) {
			id, ok = s.ids[owner], true
			return false
		}
		return true
	})
	return id, ok
}

func (s *snapshot) has(id string) bool {
	if s == nil {
		return false
	}
	_, ok := s.pos[id]
	return ok
}

// contains reports whether p is a point on the ring.
func (s *snapshot) contains(p uint32) bool {
	if s == nil || len(s.points) == 0 {
		return false
	}
	i := s.successor(p) // first point > p, wrapped
	j := i - 1
	if j < 0 {
		j = len(s.points) - 1
	}
	return s.points[j].hash == p
}

// successor returns the index of the first point strictly greater than h,
// or 0 when h is at or past the largest point. len(points) must be > 0.
func (s *snapshot) successor(h uint32) int {
	j := h >> s.shift // shift may be 32, which gives 0
	lo, hi := s.bucket[j], s.bucket[j+1]
	// Every point of bucket j lies in [lo, hi); the first point > h is
	// either among them or is the first point of a later bucket, at hi.
	// Buckets hold one or two points on average: scan those, and only
	// binary-search a crowded bucket (a skewed hash), to stay O(log n).
	for hi-lo > 4 {
		mid := int32(uint32(lo+hi) >> 1)
		if s.points[mid].hash <= h {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	for lo < hi && s.points[lo].hash <= h {
		lo++
	}
	if int(lo) == len(s.points) {
		return 0
	}
	return int(lo)
}

// leader returns the owner of the first point strictly greater than h,
// wrapping. len(points) must be > 0.
func (s *snapshot) leader(h uint32) int32 {
	if s.slots != nil {
		if sl := s.slots[h>>s.shift]; sl.o1 != crowded {
			if h < sl.limit {
				return int32(sl.o1)
			}
			return int32(sl.o2)
		}
	}
	return s.points[s.successor(h)].owner
}

// walk visits the distinct owners of the points from index i clockwise, at
// most one full turn, until visit returns false or every node was visited.
func (s *snapshot) walk(i int, visit func(owner int32) bool) {
	nodes := len(s.ids)
	// Small rings and short walks track the nodes seen in a stack array;
	// larger ones in a bitmap.
	var small [8]int32
	seenSmall := small[:0]
	var seenBits []uint64
	if nodes > len(small) {
		seenBits = make([]uint64, (nodes+63)/64)
	}
	found := 0
	for range len(s.points) {
		o := s.points[i].owner
		i++
		if i == len(s.points) {
			i = 0
		}
		if seenBits != nil {
			w, b := o>>6, uint64(1)<<(o&63)
			if seenBits[w]&b != 0 {
				continue
			}
			seenBits[w] |= b
		} else {
			if slices.Contains(seenSmall, o) {
				continue
			}
			seenSmall = append(seenSmall, o)
		}
		found++
		if !visit(o) || found == nodes {
			return
		}
	}
}

// with returns a new snapshot that has s's nodes plus id with the given
// points (unsorted, distinct, none already on the ring).
func (s *snapshot) with(id string, vnodes int, fresh []uint32) *snapshot {
	var old []point
	var ids []string
	var vn []int
	if s != nil {
		old, ids, vn = s.points, s.ids, s.vnodes
	}
	owner := int32(len(ids))
	fresh = slices.Clone(fresh)
	slices.Sort(fresh)
	points := make([]point, 0, len(old)+len(fresh))
	i, j := 0, 0
	for i < len(old) || j < len(fresh) {
		if j == len(fresh) || (i < len(old) && old[i].hash < fresh[j]) {
			points = append(points, old[i])
			i++
		} else {
			points = append(points, point{hash: fresh[j], owner: owner})
			j++
		}
	}
	return build(points, append(slices.Clip(ids), id), append(slices.Clip(vn), vnodes))
}

// without returns a new snapshot with id (which must be present) and its
// points removed; the owners of later nodes shift down by one.
func (s *snapshot) without(id string) *snapshot {
	gone := s.pos[id]
	points := make([]point, 0, len(s.points))
	for _, p := range s.points {
		switch {
		case p.owner == gone:
			continue
		case p.owner > gone:
			p.owner--
		}
		points = append(points, p)
	}
	ids := slices.Delete(slices.Clone(s.ids), int(gone), int(gone)+1)
	vn := slices.Delete(slices.Clone(s.vnodes), int(gone), int(gone)+1)
	return build(points, ids, vn)
}

// maxBucketBits caps the bucket index at 2²⁰ entries (4 MiB).
const maxBucketBits = 20

// build assembles a snapshot and its bucket index from sorted points.
func build(points []point, ids []string, vnodes []int) *snapshot {
	pos := make(map[string]int32, len(ids))
	for k, id := range ids {
		pos[id] = int32(k)
	}
	// Two to four buckets per point (2^b > 2 × points): over 90% of
	// buckets hold zero or one point and their slot answers a lookup in
	// one memory access; the index stays small enough to rebuild on every
	// Add.
	b := 0
	if len(points) > 1 {
		b = min(bits.Len(uint(len(points)))+1, maxBucketBits)
	}
	shift := uint(32 - b)
	bucket := make([]int32, 1<<b+1)
	k := 0
	for j := range bucket {
		for k < len(points) && uint64(points[k].hash)>>shift < uint64(j) {
			k++
		}
		bucket[j] = int32(k)
	}
	var slots []slot
	if len(points) > 0 && len(ids) < crowded {
		slots = make([]slot, len(bucket)-1)
		for j := range slots {
			lo, hi := int(bucket[j]), int(bucket[j+1])
			switch hi - lo {
			case 0:
				next := points[lo%len(points)].owner
				slots[j] = slot{limit: ^uint32(0), o1: uint16(next), o2: uint16(next)}
			case 1:
				slots[j] = slot{
					limit: points[lo].hash,
					o1:    uint16(points[lo].owner),
					o2:    uint16(points[(lo+1)%len(points)].owner),
				}
			default:
				slots[j] = slot{o1: crowded}
			}
		}
	}
	return &snapshot{points: points, ids: ids, vnodes: vnodes, pos: pos, bucket: bucket, shift: shift, slots: slots}
}
