package interest

import (
	"cmp"
	"slices"

	"github.com/shardwise/shardwise/torus"
)

// Hooks are the callbacks a Subscriptions fires. A nil field is skipped.
// Hooks run synchronously inside the call that caused them, in this order:
// FirstSubscriber before ChunkSent (whatever must exist for the chunk is
// prepared before anyone is told it was sent), and ChunkUnsent before
// LastSubscriber (everyone is told before the chunk may be torn down).
// A hook may read the Subscriptions but must not change it: the change that
// fired it is still in progress.
type Hooks[S comparable] struct {
	// FirstSubscriber fires when a chunk gains its first subscriber.
	FirstSubscriber func(c ChunkPos)
	// LastSubscriber fires when a chunk loses its last subscriber.
	LastSubscriber func(c ChunkPos)
	// ChunkSent fires when s newly holds c (MarkSent on an unsent chunk).
	ChunkSent func(s S, c ChunkPos)
	// ChunkUnsent fires when s stops holding c.
	ChunkUnsent func(s S, c ChunkPos)
}

// chunkListener is how Visibility follows subscriptions without the cost of
// turning a dense subscriber index back into a key on every event.
type chunkListener interface {
	chunkSent(sub int32, c ChunkPos)
	chunkUnsent(sub int32, c ChunkPos)
	subscriberForgotten(sub int32)
	// chunkGained and chunkLost bracket the life of a chunk's subscriber
	// list, so a listener may keep a pointer to it instead of looking the
	// chunk up on every query. The list is recycled after chunkLost.
	chunkGained(c ChunkPos, cs *chunkSubscribers)
	chunkLost(c ChunkPos)
	// subscribersChanged follows every change of cs.subs (an append or a
	// removal) before anything else runs, so a listener may also keep a
	// copy of the slice header itself (one pointer fewer per query).
	subscribersChanged(c ChunkPos, cs *chunkSubscribers)
}

// Manifest is a change to the chunks a subscriber announces it wants.
// With Reset, Added is the whole new announced set and Removed is ignored;
// chunks announced before and absent from Added are withdrawn.
type Manifest struct {
	Reset   bool
	Added   []ChunkPos
	Removed []ChunkPos
}

type subscriberState[S comparable] struct {
	key  S
	live bool
	// held: every chunk the subscriber announced (wants), with what it has
	// of it: announcedOnly, or sentBase + the slot of this subscriber in the
	// chunk's subscriber list (so that removal is O(1)) once it holds it.
	// One table for both sets keeps sent ⊆ announced by construction and
	// costs one probe where two maps cost two struct-key hashes.
	held chunkTable[int32]
	sent int // how many held values are sent
}

// Values of subscriberState.held (0 is the table's "absent").
const (
	announcedOnly int32 = 1
	sentBase      int32 = 2
)

func (st *subscriberState[S]) isSent(c ChunkPos) bool { return st.held.get(c) >= sentBase }

type chunkSubscribers struct {
	subs []int32 // dense subscriber indices, unordered
}

// Subscriptions records, per subscriber, the chunks it announced and the
// chunks it was sent, and per chunk who holds it. See the package doc for
// the invariants. Not safe for concurrent use: one goroutine owns it.
type Subscriptions[S comparable] struct {
	world torus.World

	index  map[S]int32
	states []subscriberState[S]
	// keys[i] == states[i].key: the outbox turns a dense index back into a
	// key once per observer per message, and a slice of bare keys keeps
	// those loads off the wide states.
	keys    []S
	freeIdx []int32
	// epoch changes whenever a dense index is given to a key or taken
	// from one (see Visibility.SubscriberEpoch).
	epoch uint64

	chunks     chunkTable[*chunkSubscribers]
	freeChunks []*chunkSubscribers
	columns    map[Column]int32

	hooks     []Hooks[S]
	listeners []chunkListener

	scratch    []ChunkPos
	scratchSet map[ChunkPos]struct{}

	// plant switches known bugs back on for the seam properties' bite
	// test (plant.go); zero in production.
	plant plantedBugs
}

// NewSubscriptions returns empty subscriptions over grid.
func NewSubscriptions[S comparable](world torus.World) *Subscriptions[S] {
	return &Subscriptions[S]{
		world:      world,
		index:      make(map[S]int32),
		columns:    make(map[Column]int32),
		scratchSet: make(map[ChunkPos]struct{}),
	}
}

// World returns the torus the keys are normalised on.
func (s *Subscriptions[S]) World() torus.World { return s.world }

// AddHooks registers another set of hooks. Hooks run in registration order.
func (s *Subscriptions[S]) AddHooks(h Hooks[S]) { s.hooks = append(s.hooks, h) }

func (s *Subscriptions[S]) addListener(l chunkListener) { s.listeners = append(s.listeners, l) }

// lookup returns the dense index of key, or -1.
func (s *Subscriptions[S]) lookup(key S) int32 {
	if i, ok := s.index[key]; ok {
		return i
	}
	return -1
}

func (s *Subscriptions[S]) ensure(key S) int32 {
	if i, ok := s.index[key]; ok {
		return i
	}
	var i int32
	if n := len(s.freeIdx); n > 0 {
		i = s.freeIdx[n-1]
		s.freeIdx = s.freeIdx[:n-1]
		st := &s.states[i]
		st.key, st.live = key, true
		s.keys[i] = key
	} else {
		i = int32(len(s.states))
		s.states = append(s.states, subscriberState[S]{key: key, live: true})
		s.keys = append(s.keys, key)
	}
	s.index[key] = i
	s.epoch++
	return i
}

// indexCap is one past the largest dense index ever handed out.
func (s *Subscriptions[S]) indexCap() int { return len(s.states) }

func (s *Subscriptions[S]) keyOf(i int32) S { return s.keys[i] }

// Apply applies a manifest for subscriber key.
func (s *Subscriptions[S]) Apply(key S, m Manifest) {
	if !m.Reset {
		for _, c := range m.Removed {
			s.Withdraw(key, c)
		}
		for _, c := range m.Added {
			s.Announce(key, c)
		}
		return
	}
	i := s.ensure(key)
	st := &s.states[i]
	clear(s.scratchSet)
	for _, c := range m.Added {
		s.scratchSet[s.world.NormaliseChunk(c)] = struct{}{}
	}
	// Withdraw in a fixed order so the hooks (and everything driven by
	// them, such as materialisation order) are deterministic.
	s.scratch = s.scratch[:0]
	for c := range st.held.all {
		if _, keep := s.scratchSet[c]; !keep {
			s.scratch = append(s.scratch, c)
		}
	}
	sortChunks(s.scratch)
	for _, c := range s.scratch {
		s.withdrawIdx(i, c)
	}
	for _, c := range m.Added {
		s.announceIdx(i, s.world.NormaliseChunk(c))
	}
}

// Announce records that key wants chunk c. It reports whether c was new.
func (s *Subscriptions[S]) Announce(key S, c ChunkPos) bool {
	return s.announceIdx(s.ensure(key), s.world.NormaliseChunk(c))
}

func (s *Subscriptions[S]) announceIdx(i int32, c ChunkPos) bool {
	st := &s.states[i]
	if st.held.get(c) != 0 {
		return false
	}
	st.held.put(c, announcedOnly)
	return true
}

// Withdraw records that key no longer wants c, unsending it if it was sent.
// It reports whether c was announced.
func (s *Subscriptions[S]) Withdraw(key S, c ChunkPos) bool {
	i := s.lookup(key)
	if i < 0 {
		return false
	}
	return s.withdrawIdx(i, s.world.NormaliseChunk(c))
}

func (s *Subscriptions[S]) withdrawIdx(i int32, c ChunkPos) bool {
	if s.states[i].held.get(c) == 0 {
		return false
	}
	s.unsendIdx(i, c)
	s.states[i].held.del(c)
	return true
}

// MarkSent records that chunk c was delivered to key, making key a
// subscriber of c. It is refused (false) when key has not announced c — a
// chunk withdrawn while it was being prepared must not subscribe — and is
// a no-op (false) when c is already sent, so a repeated mark never
// inflates a count. It reports whether key newly holds c.
func (s *Subscriptions[S]) MarkSent(key S, c ChunkPos) bool {
	i := s.lookup(key)
	if i < 0 {
		return false
	}
	if !s.plant.rawMarkSent {
		c = s.world.NormaliseChunk(c)
	}
	if s.states[i].held.get(c) != announcedOnly { // unannounced or already sent
		return false
	}
	cs := s.chunks.get(c)
	if cs == nil {
		if n := len(s.freeChunks); n > 0 {
			cs = s.freeChunks[n-1]
			s.freeChunks = s.freeChunks[:n-1]
		} else {
			cs = &chunkSubscribers{}
		}
		s.chunks.put(c, cs)
		for _, l := range s.listeners {
			l.chunkGained(c, cs)
		}
		for _, h := range s.hooks {
			if h.FirstSubscriber != nil {
				h.FirstSubscriber(c)
			}
		}
	}
	st := &s.states[i] // a hook may have grown states
	st.held.put(c, sentBase+int32(len(cs.subs)))
	st.sent++
	cs.subs = append(cs.subs, i)
	for _, l := range s.listeners {
		l.subscribersChanged(c, cs)
	}
	s.columns[ColumnOf(c)]++
	for _, h := range s.hooks {
		if h.ChunkSent != nil {
			h.ChunkSent(st.key, c)
		}
	}
	for _, l := range s.listeners {
		l.chunkSent(i, c)
	}
	return true
}

// Unsend records that key no longer holds c (c stays announced, so it is
// pending again). Unsending a chunk that was never sent changes nothing and
// reports false.
func (s *Subscriptions[S]) Unsend(key S, c ChunkPos) bool {
	i := s.lookup(key)
	if i < 0 {
		return false
	}
	return s.unsendIdx(i, s.world.NormaliseChunk(c))
}

func (s *Subscriptions[S]) unsendIdx(i int32, c ChunkPos) bool {
	st := &s.states[i]
	v := st.held.get(c)
	if v < sentBase {
		return false
	}
	slot := v - sentBase
	st.held.put(c, announcedOnly)
	st.sent--
	cs := s.chunks.get(c)
	last := int32(len(cs.subs) - 1)
	if slot != last {
		moved := cs.subs[last]
		cs.subs[slot] = moved
		s.states[moved].held.put(c, sentBase+slot)
	}
	cs.subs = cs.subs[:last]
	for _, l := range s.listeners {
		l.subscribersChanged(c, cs)
	}
	col := ColumnOf(c)
	if s.columns[col]--; s.columns[col] == 0 {
		delete(s.columns, col)
	}
	for _, l := range s.listeners {
		l.chunkUnsent(i, c)
	}
	for _, h := range s.hooks {
		if h.ChunkUnsent != nil {
			h.ChunkUnsent(st.key, c)
		}
	}
	if len(cs.subs) == 0 {
		for _, l := range s.listeners {
			l.chunkLost(c)
		}
		s.chunks.del(c)
		s.freeChunks = append(s.freeChunks, cs)
		for _, h := range s.hooks {
			if h.LastSubscriber != nil {
				h.LastSubscriber(c)
			}
		}
	}
	return true
}

// Forget removes key entirely: every sent chunk is unsent (firing the
// hooks), every announcement dropped, and anything still pending for key in
// a Visibility discarded, so a subscriber that comes back under the same key
// in the same tick starts from nothing.
func (s *Subscriptions[S]) Forget(key S) {
	i := s.lookup(key)
	if i < 0 {
		return
	}
	st := &s.states[i]
	s.scratch = s.scratch[:0]
	for c, v := range st.held.all {
		if v >= sentBase {
			s.scratch = append(s.scratch, c)
		}
	}
	sortChunks(s.scratch)
	for _, c := range s.scratch {
		s.unsendIdx(i, c)
	}
	for _, l := range s.listeners {
		l.subscriberForgotten(i)
	}
	st = &s.states[i]
	st.held.reset()
	var zero S
	st.key, st.live = zero, false
	s.keys[i] = zero
	delete(s.index, key)
	s.freeIdx = append(s.freeIdx, i)
	s.epoch++
}

// Len returns the number of known subscribers.
func (s *Subscriptions[S]) Len() int { return len(s.index) }

// IsAnnounced reports whether key announced c.
func (s *Subscriptions[S]) IsAnnounced(key S, c ChunkPos) bool {
	i := s.lookup(key)
	if i < 0 {
		return false
	}
	return s.states[i].held.get(s.world.NormaliseChunk(c)) != 0
}

// IsSent reports whether key holds c.
func (s *Subscriptions[S]) IsSent(key S, c ChunkPos) bool {
	i := s.lookup(key)
	if i < 0 {
		return false
	}
	return s.states[i].isSent(s.world.NormaliseChunk(c))
}

// AnnouncedCount and SentCount return the sizes of key's sets.
func (s *Subscriptions[S]) AnnouncedCount(key S) int {
	if i := s.lookup(key); i >= 0 {
		return s.states[i].held.len()
	}
	return 0
}

// SentCount returns how many chunks key holds. Because sent ⊆ announced,
// AnnouncedCount − SentCount chunks are pending.
func (s *Subscriptions[S]) SentCount(key S) int {
	if i := s.lookup(key); i >= 0 {
		return s.states[i].sent
	}
	return 0
}

// AppendUnsent appends the chunks key announced but does not hold yet, in
// a fixed order (slab, y, x), and returns the extended slice. It is O(1)
// when nothing is pending (the steady state), so calling it every tick is
// fine.
func (s *Subscriptions[S]) AppendUnsent(dst []ChunkPos, key S) []ChunkPos {
	i := s.lookup(key)
	if i < 0 {
		return dst
	}
	st := &s.states[i]
	if st.sent == st.held.len() { // sent ⊆ announced: nothing pending
		return dst
	}
	start := len(dst)
	for c, v := range st.held.all {
		if v == announcedOnly {
			dst = append(dst, c)
		}
	}
	sortChunks(dst[start:])
	return dst
}

// AppendAnnounced appends every chunk key announced, in a fixed order.
func (s *Subscriptions[S]) AppendAnnounced(dst []ChunkPos, key S) []ChunkPos {
	i := s.lookup(key)
	if i < 0 {
		return dst
	}
	start := len(dst)
	for c := range s.states[i].held.all {
		dst = append(dst, c)
	}
	sortChunks(dst[start:])
	return dst
}

// AppendSubscribers appends the subscribers holding c and returns the
// extended slice. The order is stable between calls without changes.
func (s *Subscriptions[S]) AppendSubscribers(dst []S, c ChunkPos) []S {
	cs := s.chunks.get(s.world.NormaliseChunk(c))
	if cs == nil {
		return dst
	}
	for _, i := range cs.subs {
		dst = append(dst, s.states[i].key)
	}
	return dst
}

// SubscriberCount returns how many subscribers hold c.
func (s *Subscriptions[S]) SubscriberCount(c ChunkPos) int {
	if cs := s.chunks.get(s.world.NormaliseChunk(c)); cs != nil {
		return len(cs.subs)
	}
	return 0
}

// ColumnCount returns how many (subscriber, chunk) holdings lie in column
// col, summed over its slabs.
func (s *Subscriptions[S]) ColumnCount(col Column) int {
	return int(s.columns[normaliseColumn(s.world, col)])
}

func sortChunks(cs []ChunkPos) {
	slices.SortFunc(cs, func(a, b ChunkPos) int {
		if c := cmp.Compare(a.Slab, b.Slab); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Y, b.Y); c != 0 {
			return c
		}
		return cmp.Compare(a.X, b.X)
	})
}
