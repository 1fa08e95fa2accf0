package interest

import (
	"cmp"
	"slices"
)

// Entity is the constraint on entity ids: any uint64-based id type, such as
// entityid.ID.
type Entity interface{ ~uint64 }

// VanishReason says why an entity left a subscriber's view.
type VanishReason uint8

// Vanish reasons. The zero value is OutOfSight: the entity still exists, the
// subscriber just stopped seeing it.
const (
	OutOfSight VanishReason = iota
	Gone                    // removed from the world (despawned, logged out)
	Death                   // died
)

// String names the reason.
func (r VanishReason) String() string {
	switch r {
	case OutOfSight:
		return "out-of-sight"
	case Gone:
		return "gone"
	case Death:
		return "death"
	}
	return "unknown"
}

// Vanished is one entity leaving one subscriber's view.
type Vanished[E Entity] struct {
	Entity E
	Reason VanishReason
}

// Delivery is what one subscriber must be told after a tick. Appeared and
// Vanished are disjoint and sorted by entity id.
type Delivery[S comparable, E Entity] struct {
	Subscriber S
	Appeared   []E
	Vanished   []Vanished[E]
}

// placement is where an entity stands: its chunk, its slot in the chunk's
// resident list, and that list (a pointer, so observer queries need one map
// lookup, not two).
type placement[E Entity] struct {
	chunk ChunkPos // inline: the same-chunk check must not chase rl
	slot  int32
	rl    *residentList[E]
}

// residentList is one chunk's residents, plus a cached pointer to the
// chunk's subscriber list (nil while nobody holds the chunk), kept current
// by the chunkGained/chunkLost notifications, and a copy of that list's
// slice header (obs == subs.subs, kept current by subscribersChanged), so
// an observer query loads the indices without chasing subs.
type residentList[E Entity] struct {
	chunk ChunkPos
	ents  []E
	obs   []int32
	subs  *chunkSubscribers
}

func (rl *residentList[E]) subscribers() []int32 { return rl.obs }

// event is one raw appear (+1) or vanish (−1) before folding at Drain.
type event[E Entity] struct {
	entity E
	delta  int8
	reason VanishReason
}

// Visibility tracks which entities stand in which chunk and turns moves,
// removals and subscription changes into appear/vanish events per
// subscriber. Events are folded at Drain, so an appear and a vanish of the
// same entity for the same subscriber within one tick cancel. Not safe for
// concurrent use.
type Visibility[S comparable, E Entity] struct {
	subs *Subscriptions[S]

	residents chunkTable[*residentList[E]]
	freeLists []*residentList[E]
	where     placeTable[E]

	pending [][]event[E] // by dense subscriber index
	touched []int32
	marks   []uint32 // by dense subscriber index; see move
	stamp   uint32

	deliveries []Delivery[S, E]
	appeared   []E
	vanished   []Vanished[E]
}

// NewVisibility returns an empty visibility that follows subs: a chunk sent
// to a subscriber appears its residents to it, an unsent one vanishes them.
func NewVisibility[S comparable, E Entity](subs *Subscriptions[S]) *Visibility[S, E] {
	v := &Visibility[S, E]{
		subs: subs,
	}
	subs.addListener(v)
	return v
}

// Reindex records that e now stands in chunk c and reports whether its
// chunk changed. The first Reindex of an entity is a transition from
// nothing: every subscriber of c sees it appear. Moving inside a chunk is
// silent; moving between chunks appears it to subscribers of the new chunk
// that do not hold the old one and vanishes it (OutOfSight) for the
// reverse; subscribers holding both see nothing.
func (v *Visibility[S, E]) Reindex(e E, c ChunkPos) bool {
	if !v.subs.plant.rawReindex {
		c = v.subs.world.NormaliseChunk(c)
	}
	p, known := v.where.get(e)
	if known && p.chunk == c {
		return false
	}
	if !known {
		rl := v.place(e, c)
		for _, i := range rl.subscribers() {
			v.push(i, event[E]{entity: e, delta: +1})
		}
		return true
	}
	old := p.rl.subscribers() // read before unplace may recycle the list
	v.unplace(e, p)
	rl := v.place(e, c)
	v.move(e, old, rl.subscribers())
	return true
}

// move emits the symmetric difference of the two chunks' subscribers using
// generation marks instead of set lookups: within one move, marks[i] == a
// means "holds the old chunk (and, so far, not the new)", both means "holds
// both". Every move takes two fresh stamp values, so old marks never match.
func (v *Visibility[S, E]) move(e E, old, neu []int32) {
	if len(old) == 0 && len(neu) == 0 {
		return
	}
	if n := v.subs.indexCap(); len(v.marks) < n {
		v.marks = append(v.marks, make([]uint32, n-len(v.marks))...)
	}
	if v.stamp >= ^uint32(0)-2 {
		clear(v.marks)
		v.stamp = 0
	}
	a, both := v.stamp+1, v.stamp+2
	v.stamp += 2
	for _, i := range old {
		v.marks[i] = a
	}
	for _, i := range neu {
		if v.marks[i] == a {
			v.marks[i] = both
		} else {
			v.push(i, event[E]{entity: e, delta: +1})
		}
	}
	for _, i := range old {
		if v.marks[i] == a {
			v.push(i, event[E]{entity: e, delta: -1, reason: OutOfSight})
		}
	}
}

// Remove takes e out of the world view: every subscriber of its chunk sees
// it vanish with reason. It reports whether e was known.
func (v *Visibility[S, E]) Remove(e E, reason VanishReason) bool {
	p, ok := v.where.get(e)
	if !ok {
		return false
	}
	for _, i := range p.rl.subscribers() {
		v.push(i, event[E]{entity: e, delta: -1, reason: reason})
	}
	v.unplace(e, p)
	return true
}

// Evict takes e out of the index with no vanish: the entity still exists
// for its viewers, written elsewhere (a handoff). Pending events already
// recorded for e this tick stay. It reports whether e was known.
func (v *Visibility[S, E]) Evict(e E) bool {
	p, ok := v.where.get(e)
	if !ok {
		return false
	}
	v.unplace(e, p)
	return true
}

// Adopt indexes e in chunk c with no appear: the subscribers of c already
// see it (it was evicted by one writer and now stands here as a replica or
// under a new writer). An entity already indexed is moved as by Reindex.
func (v *Visibility[S, E]) Adopt(e E, c ChunkPos) {
	if _, known := v.where.get(e); known {
		v.Reindex(e, c)
		return
	}
	v.place(e, v.subs.world.NormaliseChunk(c))
}

// ChunkOf returns the chunk e was last indexed in.
func (v *Visibility[S, E]) ChunkOf(e E) (ChunkPos, bool) {
	if p, ok := v.where.get(e); ok {
		return p.chunk, true
	}
	return ChunkPos{}, false
}

// Len returns the number of indexed entities.
func (v *Visibility[S, E]) Len() int { return v.where.len() }

// AppendResidents appends the entities standing in c.
func (v *Visibility[S, E]) AppendResidents(dst []E, c ChunkPos) []E {
	if rl := v.residents.get(v.subs.world.NormaliseChunk(c)); rl != nil {
		dst = append(dst, rl.ents...)
	}
	return dst
}

// AppendObserversOf appends the subscribers holding e's chunk.
func (v *Visibility[S, E]) AppendObserversOf(dst []S, e E) []S {
	p, ok := v.where.get(e)
	if !ok {
		return dst
	}
	for _, i := range p.rl.subscribers() {
		dst = append(dst, v.subs.keyOf(i))
	}
	return dst
}

// AppendObserverIndices appends the dense indices of the subscribers
// holding e's chunk: the subscribers AppendObserversOf names, as indices
// that SubscriberAt turns back into keys. An index names its subscriber
// until the subscriber is forgotten; then it may be reused for another
// key. It lets a consumer (the outbox) keep per-subscriber state in slices.
func (v *Visibility[S, E]) AppendObserverIndices(dst []int32, e E) []int32 {
	p, ok := v.where.get(e)
	if !ok {
		return dst
	}
	return append(dst, p.rl.subscribers()...)
}

// SubscriberAt returns the key of dense subscriber index i (one handed out
// by AppendObserverIndices).
func (v *Visibility[S, E]) SubscriberAt(i int32) S { return v.subs.keyOf(i) }

// SubscriberEpoch returns a number that changes whenever a dense subscriber
// index is given to a key or taken from one (a new subscriber, a Forget).
// While it is unchanged, SubscriberAt(i) names the same key for every
// index handed out, so a consumer that cached what an index means needs no
// per-index check.
func (v *Visibility[S, E]) SubscriberEpoch() uint64 { return v.subs.epoch }

// ObserversOf returns the subscribers holding e's chunk.
func (v *Visibility[S, E]) ObserversOf(e E) []S { return v.AppendObserversOf(nil, e) }

// IsObservedBy reports whether subscriber key holds e's chunk.
func (v *Visibility[S, E]) IsObservedBy(e E, key S) bool {
	p, ok := v.where.get(e)
	return ok && v.subs.IsSent(key, p.chunk)
}

// Drain folds the events recorded since the last Drain into at most one
// Delivery per subscriber, ordered by when the subscriber first became
// known, with Appeared and Vanished disjoint and sorted. Subscribers whose
// events all cancelled get no delivery. The returned slices are owned by v
// and valid until the next Drain.
func (v *Visibility[S, E]) Drain() []Delivery[S, E] {
	v.deliveries = v.deliveries[:0]
	v.appeared = v.appeared[:0]
	v.vanished = v.vanished[:0]
	slices.Sort(v.touched)
	for _, i := range v.touched {
		evs := v.pending[i]
		// Stable: the last vanish of an entity gives the reason.
		slices.SortStableFunc(evs, func(a, b event[E]) int { return cmp.Compare(a.entity, b.entity) })
		a0, v0 := len(v.appeared), len(v.vanished)
		for j := 0; j < len(evs); {
			e := evs[j].entity
			var net int
			var reason VanishReason
			for ; j < len(evs) && evs[j].entity == e; j++ {
				net += int(evs[j].delta)
				if evs[j].delta < 0 {
					reason = evs[j].reason
				}
			}
			switch {
			case net > 0:
				v.appeared = append(v.appeared, e)
			case net < 0:
				v.vanished = append(v.vanished, Vanished[E]{Entity: e, Reason: reason})
			}
		}
		v.pending[i] = evs[:0]
		if len(v.appeared) == a0 && len(v.vanished) == v0 {
			continue
		}
		v.deliveries = append(v.deliveries, Delivery[S, E]{
			Subscriber: v.subs.keyOf(i),
			Appeared:   v.appeared[a0:len(v.appeared):len(v.appeared)],
			Vanished:   v.vanished[v0:len(v.vanished):len(v.vanished)],
		})
	}
	v.touched = v.touched[:0]
	return v.deliveries
}

func (v *Visibility[S, E]) push(i int32, ev event[E]) {
	if int(i) >= len(v.pending) {
		v.pending = append(v.pending, make([][]event[E], int(i)+1-len(v.pending))...)
	}
	if len(v.pending[i]) == 0 {
		v.touched = append(v.touched, i)
	}
	v.pending[i] = append(v.pending[i], ev)
}

func (v *Visibility[S, E]) place(e E, c ChunkPos) *residentList[E] {
	rl := v.residents.get(c)
	if rl == nil {
		if n := len(v.freeLists); n > 0 {
			rl = v.freeLists[n-1]
			v.freeLists = v.freeLists[:n-1]
		} else {
			rl = &residentList[E]{}
		}
		rl.chunk = c
		rl.subs = v.subs.chunks.get(c) // nil when nobody holds c
		rl.obs = nil
		if rl.subs != nil {
			rl.obs = rl.subs.subs
		}
		v.residents.put(c, rl)
	}
	v.where.put(e, placement[E]{chunk: c, slot: int32(len(rl.ents)), rl: rl})
	rl.ents = append(rl.ents, e)
	return rl
}

// unplace removes e from its resident list (swap-remove) and from where.
func (v *Visibility[S, E]) unplace(e E, p placement[E]) {
	rl := p.rl
	last := int32(len(rl.ents) - 1)
	if p.slot != last {
		moved := rl.ents[last]
		rl.ents[p.slot] = moved
		v.where.put(moved, placement[E]{chunk: rl.chunk, slot: p.slot, rl: rl})
	}
	rl.ents = rl.ents[:last]
	v.where.del(e)
	if last == 0 {
		v.residents.del(rl.chunk)
		rl.subs, rl.obs = nil, nil
		v.freeLists = append(v.freeLists, rl)
	}
}

func (v *Visibility[S, E]) chunkGained(c ChunkPos, cs *chunkSubscribers) {
	if rl := v.residents.get(c); rl != nil {
		rl.subs, rl.obs = cs, cs.subs
	}
}

func (v *Visibility[S, E]) subscribersChanged(c ChunkPos, cs *chunkSubscribers) {
	if rl := v.residents.get(c); rl != nil {
		rl.obs = cs.subs
	}
}

func (v *Visibility[S, E]) chunkLost(c ChunkPos) {
	if rl := v.residents.get(c); rl != nil {
		rl.subs, rl.obs = nil, nil
	}
}

func (v *Visibility[S, E]) chunkSent(i int32, c ChunkPos) {
	if rl := v.residents.get(c); rl != nil {
		for _, e := range rl.ents {
			v.push(i, event[E]{entity: e, delta: +1})
		}
	}
}

func (v *Visibility[S, E]) chunkUnsent(i int32, c ChunkPos) {
	if rl := v.residents.get(c); rl != nil {
		for _, e := range rl.ents {
			v.push(i, event[E]{entity: e, delta: -1, reason: OutOfSight})
		}
	}
}

func (v *Visibility[S, E]) subscriberForgotten(i int32) {
	if int(i) >= len(v.pending) || len(v.pending[i]) == 0 {
		return
	}
	v.pending[i] = v.pending[i][:0]
	if k := slices.Index(v.touched, i); k >= 0 {
		v.touched = slices.Delete(v.touched, k, k+1)
	}
}
