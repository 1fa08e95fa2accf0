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
	// announced: chunks the subscriber wants. sent: chunks it holds, with
	// the slot of this subscriber in the chunk's subscriber list so that
	// removal is O(1).
	announced map[ChunkPos]struct{}
	sent      map[ChunkPos]int32
}

type chunkSubscribers struct {
	subs []int32 // dense subscriber indices, unordered
}

// Subscriptions records, per subscriber, the chunks it announced and the
// chunks it was sent, and per chunk who holds it. See the package doc for
// the invariants. Not safe for concurrent use: one goroutine owns it.
type Subscriptions[S comparable] struct {
	world torus.World

	index   map[S]int32
	states  []subscriberState[S]
	freeIdx []int32

	chunks     map[ChunkPos]*chunkSubscribers
	freeChunks []*chunkSubscribers
	columns    map[Column]int32

	hooks     []Hooks[S]
	listeners []chunkListener

	scratch    []ChunkPos
	scratchSet map[ChunkPos]struct{}
}

// NewSubscriptions returns empty subscriptions over grid.
func NewSubscriptions[S comparable](world torus.World) *Subscriptions[S] {
	return &Subscriptions[S]{
		world:      world,
		index:      make(map[S]int32),
		chunks:     make(map[ChunkPos]*chunkSubscribers),
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
	} else {
		i = int32(len(s.states))
		s.states = append(s.states, subscriberState[S]{
			key: key, live: true,
			announced: make(map[ChunkPos]struct{}),
			sent:      make(map[ChunkPos]int32),
		})
	}
	s.index[key] = i
	return i
}

// indexCap is one past the largest dense index ever handed out.
func (s *Subscriptions[S]) indexCap() int { return len(s.states) }

func (s *Subscriptions[S]) keyOf(i int32) S { return s.states[i].key }

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
	for c := range st.announced {
		if _, keep := s.scratchSet[c]; !keep {
			s.scratch = append(s.scratch, c)
		}
	}
	sortChunks(s.scratch)
	for _, c := range s.scratch {
		s.withdrawIdx(i, c)
	}
	for _, c := range m.Added {
		s.states[i].announced[s.world.NormaliseChunk(c)] = struct{}{}
	}
}

// Announce records that key wants chunk c. It reports whether c was new.
func (s *Subscriptions[S]) Announce(key S, c ChunkPos) bool {
	c = s.world.NormaliseChunk(c)
	st := &s.states[s.ensure(key)]
	if _, ok := st.announced[c]; ok {
		return false
	}
	st.announced[c] = struct{}{}
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
	st := &s.states[i]
	if _, ok := st.announced[c]; !ok {
		return false
	}
	s.unsendIdx(i, c)
	delete(s.states[i].announced, c)
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
	c = s.world.NormaliseChunk(c)
	st := &s.states[i]
	if _, ok := st.announced[c]; !ok {
		return false
	}
	if _, ok := st.sent[c]; ok {
		return false
	}
	cs := s.chunks[c]
	if cs == nil {
		if n := len(s.freeChunks); n > 0 {
			cs = s.freeChunks[n-1]
			s.freeChunks = s.freeChunks[:n-1]
		} else {
			cs = &chunkSubscribers{}
		}
		s.chunks[c] = cs
		for _, l := range s.listeners {
			l.chunkGained(c, cs)
		}
		for _, h := range s.hooks {
			if h.FirstSubscriber != nil {
				h.FirstSubscriber(c)
			}
		}
	}
	st = &s.states[i] // a hook may have grown states
	st.sent[c] = int32(len(cs.subs))
	cs.subs = append(cs.subs, i)
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
	slot, ok := st.sent[c]
	if !ok {
		return false
	}
	delete(st.sent, c)
	cs := s.chunks[c]
	last := int32(len(cs.subs) - 1)
	if slot != last {
		moved := cs.subs[last]
		cs.subs[slot] = moved
		s.states[moved].sent[c] = slot
	}
	cs.subs = cs.subs[:last]
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
		delete(s.chunks, c)
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
	for c := range st.sent {
		s.scratch = append(s.scratch, c)
	}
	sortChunks(s.scratch)
	for _, c := range s.scratch {
		s.unsendIdx(i, c)
	}
	for _, l := range s.listeners {
		l.subscriberForgotten(i)
	}
	st = &s.states[i]
	clear(st.announced)
	clear(st.sent)
	var zero S
	st.key, st.live = zero, false
	delete(s.index, key)
	s.freeIdx = append(s.freeIdx, i)
}

// Len returns the number of known subscribers.
func (s *Subscriptions[S]) Len() int { return len(s.index) }

// IsAnnounced reports whether key announced c.
func (s *Subscriptions[S]) IsAnnounced(key S, c ChunkPos) bool {
	i := s.lookup(key)
	if i < 0 {
		return false
	}
	_, ok := s.states[i].announced[s.world.NormaliseChunk(c)]
	return ok
}

// IsSent reports whether key holds c.
func (s *Subscriptions[S]) IsSent(key S, c ChunkPos) bool {
	i := s.lookup(key)
	if i < 0 {
		return false
	}
	_, ok := s.states[i].sent[s.world.NormaliseChunk(c)]
	return ok
}

// AnnouncedCount and SentCount return the sizes of key's sets.
func (s *Subscriptions[S]) AnnouncedCount(key S) int {
	if i := s.lookup(key); i >= 0 {
		return len(s.states[i].announced)
	}
	return 0
}

// SentCount returns how many chunks key holds. Because sent ⊆ announced,
// AnnouncedCount − SentCount chunks are pending.
func (s *Subscriptions[S]) SentCount(key S) int {
	if i := s.lookup(key); i >= 0 {
		return len(s.states[i].sent)
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
	if len(st.sent) == len(st.announced) { // sent ⊆ announced: nothing pending
		return dst
	}
	start := len(dst)
	for c := range st.announced {
		if _, ok := st.sent[c]; !ok {
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
	for c := range s.states[i].announced {
		dst = append(dst, c)
	}
	sortChunks(dst[start:])
	return dst
}

// AppendSubscribers appends the subscribers holding c and returns the
// extended slice. The order is stable between calls without changes.
func (s *Subscriptions[S]) AppendSubscribers(dst []S, c ChunkPos) []S {
	cs := s.chunks[s.world.NormaliseChunk(c)]
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
	if cs := s.chunks[s.world.NormaliseChunk(c)]; cs != nil {
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
