package hashring

import (
	"maps"
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
//
// A snapshot shares everything a change does not touch with the one before
// it, so Add and Remove cost time and memory in proportion to the points of
// the node that changes (plus a few bytes per node and per chunk of points),
// not to the size of the ring, and Clone costs nothing.
type Ring struct {
	hash HashFunc
	mu   sync.Mutex // serialises writers; readers never take it
	snap atomic.Pointer[snapshot]
}

// snapshot is one immutable state of the ring. It is never modified after
// it is published, and neither is anything it points to, so later
// snapshots share its buckets, node records and salt records freely.
type snapshot struct {
	// buckets hold every vnode point with its owner, sorted by hash,
	// without duplicate hashes: bucket j has the points whose top bits
	// (hash >> shift) are j. There are 8 to 32 points per bucket on
	// average (the count doubles or halves with the ring), so a lookup
	// reads one bucket header and searches a few points, and a change
	// copies the header table and only the buckets it touches.
	buckets [][]point
	shift   uint
	points  int
	// first is the index of the first non-empty bucket (where a lookup
	// past the largest point wraps to).
	first int
	// pages answer most leader lookups with one memory access: page j
	// covers the hashes whose top bits (hash >> pshift) are j, cut into a
	// power of two of slots, two to four per point of the page. A slot
	// whose range holds at most one point knows the leader of every hash
	// in it; a crowded one sends the lookup to the buckets. A change
	// rebuilds only the pages whose answers it moves (the page of each
	// point it adds or removes, and those back to the point before it).
	// The page count follows the ring, 2 to 8 points a page up to
	// maxPageBits; changing it rebuilds every page, which only small rings
	// do. nil when the ring is empty.
	pages  [][]slot
	pshift uint

	// nodes is indexed by slot, the owner number stored in points. A
	// removed node's slot is nil and reused by a later Add, so slots never
	// shift and no point is rewritten when another node leaves.
	nodes []*node
	// ids[slot] is nodes[slot].id ("" for a free slot), kept flat so a
	// lookup reaches the answer without another pointer.
	ids []string
	// order lists the slots in insertion order.
	order []int32
	// pos maps a node id to its slot.
	pos map[string]int32
	// salted records every vnode label that had to be salted, with the
	// points its earlier labels found taken: what Without needs to know
	// whether a node's departure would change where another node's points
	// are when the ring is rebuilt.
	salted []salted
	// diverged is set once a Remove kept a point that was salted against
	// the node it removed: the ring then differs from a fresh build of its
	// nodes, and Without rebuilds instead of dropping points.
	diverged bool
}

// node is one node's record. Its points are sorted.
type node struct {
	id     string
	vnodes int
	points []uint32
}

// salted is one salted vnode label of the node in slot: tried lists the
// points its label and earlier salts hashed to, each already taken.
type salted struct {
	slot  int32
	tried []uint32
}

// slot is the precomputed leader of one slot's hashes: a hash below limit
// is led by o1, any other by o2. A slot with no point has o1 == o2 (the
// owner of the next point clockwise); a slot with one point p has limit p,
// o1 its owner and o2 the owner of the point after it; a slot with more is
// crowded.
type slot struct {
	limit  uint32
	o1, o2 int32
}

// crowded marks a slot whose range holds two or more points.
const crowded = -1

// maxPageBits caps the page table at 4096 pages: a 96 KiB header table
// copied by every change, and about 25 points a page at 100,000 points.
// Rings of more than 8 × 2048 points have the full table, so a ring never
// rebuilds all its pages once it is large.
const maxPageBits = 12

// point is one vnode on the ring: its hash and the slot of the node that
// owns it.
type point struct {
	hash  uint32
	owner int32
}

// Bucket sizes: the bucket count doubles when the ring averages more than
// bucketGrow points a bucket, and halves below bucketShrink. Doubling only
// re-slices sorted buckets (no point is copied); halving copies, and only a
// ring that lost three quarters of its points since it last resized does it.
const (
	bucketGrow   = 16
	bucketShrink = 4
	// maxBucketBits caps the header table at 2²⁰ buckets.
	maxBucketBits = 20
)

// New returns an empty ring that hashes with hash, or with SHA1 when hash is
// nil.
func New(hash HashFunc) *Ring {
	return &Ring{hash: hash}
}

// Clone returns a ring with the same nodes, points and hash as r. It costs
// O(1): the two rings share r's current snapshot, and a later change to
// either builds its own.
func (r *Ring) Clone() *Ring {
	c := &Ring{hash: r.hash}
	c.snap.Store(r.snap.Load())
	return c
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
	fresh, salts, err := r.placeVNodes(old.contains, id, vnodes)
	if err != nil {
		return err
	}
	r.snap.Store(old.with(id, vnodes, fresh, salts))
	return nil
}

// placeVNodes computes the points of a new node against the points already
// taken (by taken) and those it has placed itself. It returns them sorted,
// with a record of every label it salted.
func (r *Ring) placeVNodes(taken func(uint32) bool, id string, vnodes int) ([]uint32, [][]uint32, error) {
	fresh := make([]uint32, 0, vnodes)
	mine := make(map[uint32]struct{}, vnodes)
	isTaken := func(p uint32) bool {
		if _, ok := mine[p]; ok {
			return true
		}
		return taken(p)
	}
	var salts [][]uint32
	for i := range vnodes {
		label := id + "-" + strconv.Itoa(i)
		p := r.hashOf(label)
		var tried []uint32
		for salt := 1; isTaken(p); salt++ {
			if salt > maxSalt {
				return nil, nil, ErrNoFreePoint.Wrap("node %q vnode %d: %d salted labels all collide", id, i, maxSalt)
			}
			tried = append(tried, p)
			p = r.hashOf(label + "#" + strconv.Itoa(salt))
		}
		if tried != nil {
			salts = append(salts, tried)
		}
		mine[p] = struct{}{}
		fresh = append(fresh, p)
	}
	slices.Sort(fresh)
	return fresh, salts, nil
}

// Remove takes node id and all its points off the ring. Removing an absent
// id does nothing. Like the TypeScript ring's remove, it moves no other
// point: a later node's label that was salted because id held its point
// stays salted. So the ring depends on the history of Adds and Removes, as
// the TypeScript one does; Without gives the ring that depends only on the
// nodes and their order.
func (r *Ring) Remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	if !old.has(id) {
		return
	}
	moves := old.removalMovesOthers(id)
	ns := old.without(id)
	ns.diverged = old.diverged || moves
	r.snap.Store(ns)
}

// Without returns a ring without node id and leaves r unchanged. The ring
// it returns is exactly the one that adding r's other nodes, in their
// insertion order, to an empty ring builds: when a later node's label was
// salted because id held the point it hashed to, that label gets its
// unsalted point back. So every process with the same nodes in the same
// order has the same ring, whatever it added and removed before; the router
// relies on this.
//
// It costs the points of id, like Remove, except when a label was salted
// against id (with a 32-bit hash, about one removal in a thousand at
// 100,000 points) or a Remove has made r differ from a fresh build: then it
// rebuilds the ring from its nodes. (If r differs from a fresh build and
// no fresh build of its nodes exists, because a hash of tiny range runs
// out of salts, Without drops id's points as Remove does.)
func (r *Ring) Without(id string) *Ring {
	out := &Ring{hash: r.hash}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	switch {
	case old == nil, !old.has(id) && !old.diverged:
		out.snap.Store(old)
	case !old.has(id), old.diverged, old.removalMovesOthers(id):
		out.snap.Store(r.rebuildWithout(old, id))
	default:
		out.snap.Store(old.without(id))
	}
	return out
}

// Has reports whether id is on the ring.
func (r *Ring) Has(id string) bool { return r.snap.Load().has(id) }

// IDs returns the nodes in the order they were added. The slice is a copy.
func (r *Ring) IDs() []string {
	s := r.snap.Load()
	if s == nil {
		return []string{}
	}
	ids := make([]string, len(s.order))
	for i, slot := range s.order {
		ids[i] = s.ids[slot]
	}
	return ids
}

// Len returns the number of nodes (not points) on the ring.
func (r *Ring) Len() int {
	s := r.snap.Load()
	if s == nil {
		return 0
	}
	return len(s.order)
}

// Points returns the number of vnode points on the ring.
func (r *Ring) Points() int {
	s := r.snap.Load()
	if s == nil {
		return 0
	}
	return s.points
}

// VNodes returns the vnode count id was added with, which is its weight: a
// node's share of keys is about its vnodes over the total.
func (r *Ring) VNodes(id string) (int, bool) {
	s := r.snap.Load()
	if !s.has(id) {
		return 0, false
	}
	return s.nodes[s.pos[id]].vnodes, true
}

// Get returns the leader of key: the node owning the first point strictly
// greater than the key's hash, wrapping past the largest point to the
// smallest. ok is false when the ring is empty. Get does not allocate (given
// a hash function that does not) and runs in O(log points).
func (r *Ring) Get(key string) (id string, ok bool) {
	s := r.snap.Load()
	if s == nil || s.points == 0 {
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
	if s == nil || s.points == 0 || n < 1 {
		return dst
	}
	n = min(n, len(s.order))
	start := len(dst)
	b, i := s.successor(r.hashOf(key))
	s.walk(b, i, func(owner int32) bool {
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
	if s == nil || s.points == 0 {
		return "", false
	}
	b, i := s.successor(r.hashOf(key))
	s.walk(b, i, func(owner int32) bool {
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

// search returns the index of the first point of pts strictly greater than
// h, or len(pts).
func search(pts []point, h uint32) int {
	lo, hi := 0, len(pts)
	// Buckets hold a few points: scan those, and only binary-search a
	// crowded bucket (a skewed hash), to stay O(log n).
	for hi-lo > 8 {
		mid := int(uint(lo+hi) >> 1)
		if pts[mid].hash <= h {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	for lo < hi && pts[lo].hash <= h {
		lo++
	}
	return lo
}

// successor returns the position (bucket, index in bucket) of the first
// point strictly greater than h, wrapping to the first point when h is at or
// past the largest. The ring must have points.
func (s *snapshot) successor(h uint32) (int, int) {
	b := int(h >> s.shift) // shift may be 32, which gives 0
	if i := search(s.buckets[b], h); i < len(s.buckets[b]) {
		return b, i
	}
	for b++; b < len(s.buckets); b++ {
		if len(s.buckets[b]) > 0 {
			return b, 0
		}
	}
	return s.first, 0
}

// leader returns the slot of the node owning the first point strictly
// greater than h, wrapping. The ring must have points.
func (s *snapshot) leader(h uint32) int32 {
	pg := s.pages[uint64(h)>>s.pshift]
	k := uint(bits.TrailingZeros(uint(len(pg)))) // len is a power of two
	sl := pg[(uint64(h)&(1<<s.pshift-1))>>(s.pshift-k)]
	if sl.o1 != crowded {
		if h < sl.limit {
			return sl.o1
		}
		return sl.o2
	}
	b, i := s.successor(h)
	return s.buckets[b][i].owner
}

// before returns the position of the last point strictly below h,
// wrapping to the largest point when none is. The ring must have points.
func (s *snapshot) before(h uint32) (int, int) {
	b := int(h >> s.shift)
	pts := s.buckets[b]
	k := 0
	for k < len(pts) && pts[k].hash < h {
		k++
	}
	if k > 0 {
		return b, k - 1
	}
	for b--; ; b-- {
		if b < 0 {
			b = len(s.buckets) - 1
		}
		if n := len(s.buckets[b]); n > 0 {
			return b, n - 1
		}
	}
}

// markPages marks the pages whose answers change when point p is added or
// removed: p's own page and every page back to the one holding the point
// before p, whose trailing slots pointed past it. s has p's change applied
// and at least one point.
func (s *snapshot) markPages(dirty []bool, p uint32) {
	b, i := s.before(p)
	prev := s.buckets[b][i].hash
	to := int(uint64(p) >> s.pshift)
	j := int(uint64(prev) >> s.pshift)
	if prev == p || (j == to && prev > p) {
		// p is the only point, or the ring wraps from p's page round
		// to itself: every page changes.
		for k := range dirty {
			dirty[k] = true
		}
		return
	}
	for ; ; j = (j + 1) % len(dirty) {
		dirty[j] = true
		if j == to {
			return
		}
	}
}

// updatePages derives the pages of s (buckets final, points changed by
// changed) from those of old: it rebuilds the pages the change moves, or
// all of them when the ring has none yet or the page count changes.
func (s *snapshot) updatePages(old *snapshot, changed []uint32) {
	if s.points == 0 {
		s.pages = nil
		return
	}
	none := old == nil || old.pages == nil
	pb := uint(0)
	if !none {
		pb = 32 - old.pshift
	}
	for s.points > 8<<pb && pb < maxPageBits {
		pb++
	}
	for pb > 0 && s.points < 2<<pb {
		pb--
	}
	if none || 32-pb != old.pshift {
		s.pshift = 32 - pb
		s.buildAllPages()
		return
	}
	s.pshift = old.pshift
	s.pages = slices.Clone(old.pages)
	dirty := make([]bool, len(s.pages))
	for _, p := range changed {
		s.markPages(dirty, p)
	}
	var buf []point
	for j, d := range dirty {
		if d {
			buf = s.gather(j, buf[:0])
			s.pages[j] = make([]slot, 1<<pageSlotBits(len(buf), s.pshift))
			s.fillPage(j, buf, s.pages[j])
		}
	}
}

// buildAllPages builds every page at s.pshift, their slots in one block.
func (s *snapshot) buildAllPages() {
	n := 1 << (32 - s.pshift)
	counts := make([]int, n)
	for _, pts := range s.buckets {
		for _, p := range pts {
			counts[uint64(p.hash)>>s.pshift]++
		}
	}
	total := 0
	for _, c := range counts {
		total += 1 << pageSlotBits(c, s.pshift)
	}
	block := make([]slot, total)
	s.pages = make([][]slot, n)
	var buf []point
	for j := range s.pages {
		size := 1 << pageSlotBits(counts[j], s.pshift)
		s.pages[j], block = block[:size:size], block[size:]
		buf = s.gather(j, buf[:0])
		s.fillPage(j, buf, s.pages[j])
	}
}

// pageSlotBits is log2 of the slot count of a page of n points: the least
// power of two of at least 2n slots, capped so a slot is at least one hash
// wide.
func pageSlotBits(n int, pshift uint) uint {
	k := uint(0)
	for 1<<k < 2*n && k < pshift {
		k++
	}
	return k
}

// gather appends page j's points, in order, to buf.
func (s *snapshot) gather(j int, buf []point) []point {
	start := uint64(j) << s.pshift
	end := start + 1<<s.pshift
	for b := int(start >> s.shift); b < len(s.buckets) && uint64(b)<<s.shift < end; b++ {
		for _, p := range s.buckets[b] {
			if uint64(p.hash) >= start && uint64(p.hash) < end {
				buf = append(buf, p)
			}
		}
	}
	return buf
}

// fillPage computes the slots of page j, whose points are pts.
func (s *snapshot) fillPage(j int, pts []point, slots []slot) {
	start := uint64(j) << s.pshift
	end := start + 1<<s.pshift
	// The leader past the page's last point is the next point clockwise.
	nb, ni := s.successor(uint32(end - 1))
	after := s.buckets[nb][ni].owner
	next := func(i int) int32 {
		if i < len(pts) {
			return pts[i].owner
		}
		return after
	}
	width := (end - start) / uint64(len(slots))
	c := 0 // the first point of pts not yet behind the current slot
	for q := range slots {
		hi := start + uint64(q+1)*width
		n := 0
		for c+n < len(pts) && uint64(pts[c+n].hash) < hi {
			n++
		}
		switch n {
		case 0:
			o := next(c)
			slots[q] = slot{limit: ^uint32(0), o1: o, o2: o}
		case 1:
			slots[q] = slot{limit: pts[c].hash, o1: pts[c].owner, o2: next(c + 1)}
		default:
			slots[q] = slot{o1: crowded}
		}
		c += n
	}
}

// contains reports whether p is a point on the ring.
func (s *snapshot) contains(p uint32) bool {
	if s == nil || s.points == 0 {
		return false
	}
	pts := s.buckets[p>>s.shift]
	i := search(pts, p)
	return i > 0 && pts[i-1].hash == p
}

// walk visits the distinct owners of the points from position (b, i)
// clockwise, at most one full turn, until visit returns false or every node
// was visited.
func (s *snapshot) walk(b, i int, visit func(owner int32) bool) {
	nodes := len(s.order)
	// Small rings and short walks track the nodes seen in a stack array;
	// larger ones in a bitmap.
	var small [8]int32
	seenSmall := small[:0]
	var seenBits []uint64
	if nodes > len(small) {
		seenBits = make([]uint64, (len(s.nodes)+63)/64)
	}
	found := 0
	for range s.points {
		o := s.buckets[b][i].owner
		for i++; i == len(s.buckets[b]); i = 0 {
			if b++; b == len(s.buckets) {
				b = 0
			}
		}
		if seenBits != nil {
			w, bit := o>>6, uint64(1)<<(o&63)
			if seenBits[w]&bit != 0 {
				continue
			}
			seenBits[w] |= bit
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
// points (sorted, distinct, none already on the ring) and salt records.
func (s *snapshot) with(id string, vnodes int, fresh []uint32, salts [][]uint32) *snapshot {
	if s == nil {
		s = &snapshot{}
	}
	ns := &snapshot{
		nodes:    s.nodes,
		order:    append(slices.Clip(s.order), 0),
		pos:      maps.Clone(s.pos),
		salted:   slices.Clip(s.salted),
		points:   s.points + len(fresh),
		diverged: s.diverged,
	}
	if ns.pos == nil {
		ns.pos = make(map[string]int32, 1)
	}
	slot := int32(slices.Index(s.nodes, nil))
	if slot < 0 {
		slot = int32(len(s.nodes))
		ns.nodes = append(slices.Clip(s.nodes), nil)
		ns.ids = append(slices.Clip(s.ids), "")
	} else {
		ns.nodes = slices.Clone(s.nodes)
		ns.ids = slices.Clone(s.ids)
	}
	ns.nodes[slot] = &node{id: id, vnodes: vnodes, points: fresh}
	ns.ids[slot] = id
	ns.order[len(ns.order)-1] = slot
	ns.pos[id] = slot
	for _, tried := range salts {
		ns.salted = append(ns.salted, salted{slot: slot, tried: tried})
	}
	ns.buckets, ns.shift = insertPoints(s.buckets, s.shift, fresh, slot)
	ns.resize()
	ns.updatePages(s, fresh)
	return ns
}

// without returns a new snapshot with id (which must be present) and its
// points removed.
func (s *snapshot) without(id string) *snapshot {
	slot := s.pos[id]
	ns := &snapshot{
		nodes:  slices.Clone(s.nodes),
		order:  slices.DeleteFunc(slices.Clone(s.order), func(o int32) bool { return o == slot }),
		pos:    maps.Clone(s.pos),
		salted: slices.DeleteFunc(slices.Clone(s.salted), func(x salted) bool { return x.slot == slot }),
		points: s.points - len(s.nodes[slot].points),
	}
	gone := s.nodes[slot].points
	ns.ids = slices.Clone(s.ids)
	ns.nodes[slot], ns.ids[slot] = nil, ""
	// Trailing free slots are dropped, so the slot table (and the walk's
	// bitmap) never outgrows the most nodes the ring held at once.
	for len(ns.nodes) > 0 && ns.nodes[len(ns.nodes)-1] == nil {
		ns.nodes, ns.ids = ns.nodes[:len(ns.nodes)-1], ns.ids[:len(ns.ids)-1]
	}
	delete(ns.pos, id)
	ns.buckets, ns.shift = removePoints(s.buckets, s.shift, gone), s.shift
	ns.resize()
	ns.updatePages(s, gone)
	return ns
}

// removalMovesOthers reports whether removing id would leave a ring that
// differs from the one a fresh build of the other nodes gives: whether a
// label of another node was salted because it hashed onto one of id's
// points. Points never move, so a node that still holds a point held it
// when every later node was placed; a label of another node that tried one
// of id's points was therefore salted because of id.
func (s *snapshot) removalMovesOthers(id string) bool {
	slot := s.pos[id]
	mine := s.nodes[slot].points
	for _, x := range s.salted {
		if x.slot == slot {
			continue
		}
		for _, p := range x.tried {
			if _, ok := slices.BinarySearch(mine, p); ok {
				return true
			}
		}
	}
	return false
}

// rebuildWithout builds, from nothing, the ring of s's nodes other than id,
// added in their insertion order. For a ring that equals a fresh build it
// cannot run out of points: every label tries the same hashes as before
// against a set of taken points that is, node by node, no larger than it
// was, so it stops no later.
func (r *Ring) rebuildWithout(s *snapshot, id string) *snapshot {
	taken := make(map[uint32]struct{}, s.points)
	isTaken := func(p uint32) bool { _, ok := taken[p]; return ok }
	var all []point
	type placed struct {
		id     string
		vnodes int
		fresh  []uint32
		salts  [][]uint32
	}
	var nodes []placed
	for _, slot := range s.order {
		n := s.nodes[slot]
		if n.id == id {
			continue
		}
		fresh, salts, err := r.placeVNodes(isTaken, n.id, n.vnodes)
		if err != nil {
			// A ring built only by Add and Without cannot get here (see
			// above). One that Remove made differ from a fresh build can,
			// with a hash of tiny range: a fresh build of these nodes does
			// not exist. Drop id's points as Remove does, and stay marked.
			if !s.has(id) {
				return s
			}
			ns := s.without(id)
			ns.diverged = true
			return ns
		}
		for _, p := range fresh {
			taken[p] = struct{}{}
		}
		nodes = append(nodes, placed{n.id, n.vnodes, fresh, salts})
	}
	ns := &snapshot{pos: make(map[string]int32, len(nodes))}
	for i, n := range nodes {
		slot := int32(i)
		ns.nodes = append(ns.nodes, &node{id: n.id, vnodes: n.vnodes, points: n.fresh})
		ns.ids = append(ns.ids, n.id)
		ns.order = append(ns.order, slot)
		ns.pos[n.id] = slot
		for _, tried := range n.salts {
			ns.salted = append(ns.salted, salted{slot: slot, tried: tried})
		}
		for _, p := range n.fresh {
			all = append(all, point{hash: p, owner: slot})
		}
	}
	slices.SortFunc(all, func(a, b point) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return 0
	})
	ns.points = len(all)
	ns.buckets, ns.shift = [][]point{all}, 32
	ns.resize()
	ns.updatePages(nil, nil)
	return ns
}

// insertPoints returns the buckets with fresh (sorted, none present) added
// as points of owner. The header table is copied; untouched buckets are
// shared, touched ones copied. An empty ring starts with one bucket.
func insertPoints(buckets [][]point, shift uint, fresh []uint32, owner int32) ([][]point, uint) {
	if len(buckets) == 0 {
		buckets, shift = make([][]point, 1), 32
	} else {
		buckets = slices.Clone(buckets)
	}
	for f := 0; f < len(fresh); {
		b := fresh[f] >> shift
		end := f + 1
		for end < len(fresh) && fresh[end]>>shift == b {
			end++
		}
		old := buckets[b]
		merged := make([]point, 0, len(old)+end-f)
		i := 0
		for i < len(old) || f < end {
			if f == end || (i < len(old) && old[i].hash < fresh[f]) {
				merged = append(merged, old[i])
				i++
			} else {
				merged = append(merged, point{hash: fresh[f], owner: owner})
				f++
			}
		}
		buckets[b] = merged
	}
	return buckets, shift
}

// removePoints returns the buckets without the points gone (sorted, all
// present). The header table is copied; untouched buckets are shared.
func removePoints(buckets [][]point, shift uint, gone []uint32) [][]point {
	buckets = slices.Clone(buckets)
	for g := 0; g < len(gone); {
		b := gone[g] >> shift
		end := g + 1
		for end < len(gone) && gone[end]>>shift == b {
			end++
		}
		old := buckets[b]
		kept := make([]point, 0, len(old)-(end-g))
		for _, p := range old {
			if g < end && p.hash == gone[g] {
				g++
				continue
			}
			kept = append(kept, p)
		}
		buckets[b] = kept
	}
	return buckets
}

// resize doubles or halves the bucket count until the average bucket holds
// between bucketShrink and bucketGrow points, and sets first. It runs on a
// snapshot that is not yet published and whose header table is its own.
func (s *snapshot) resize() {
	for s.points > bucketGrow*len(s.buckets) && s.shift > 32-maxBucketBits {
		// Split every bucket in two on the next bit: sorted points make
		// that a re-slice.
		s.shift--
		split := make([][]point, 2*len(s.buckets))
		for j, pts := range s.buckets {
			k := 0
			for k < len(pts) && pts[k].hash>>s.shift == uint32(2*j) {
				k++
			}
			split[2*j], split[2*j+1] = pts[:k:k], pts[k:]
		}
		s.buckets = split
	}
	for len(s.buckets) > 1 && s.points < bucketShrink*len(s.buckets) {
		s.shift++
		joined := make([][]point, len(s.buckets)/2)
		for j := range joined {
			a, b := s.buckets[2*j], s.buckets[2*j+1]
			joined[j] = append(append(make([]point, 0, len(a)+len(b)), a...), b...)
		}
		s.buckets = joined
	}
	s.first = 0
	for s.first < len(s.buckets)-1 && len(s.buckets[s.first]) == 0 {
		s.first++
	}
}
