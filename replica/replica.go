package replica

import (
	"fmt"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
)

// Stamp orders the messages about one entity: Epoch rises on every
// handoff, Seq on every change the owner makes (it may restart under a new
// epoch).
type Stamp struct {
	Epoch, Seq uint64
}

// Before reports whether s is older than t.
func (s Stamp) Before(t Stamp) bool {
	return s.Epoch < t.Epoch || s.Epoch == t.Epoch && s.Seq < t.Seq
}

// Update is one replicated message about one entity.
type Update struct {
	Entity uint64
	Stamp  Stamp
	// Chunk is where the entity stands (any integer coordinates: the store
	// normalises them). For a vanish it is not used.
	Chunk torus.ChunkPos
	// Frames are outbox frames of Entity in one of the shapes the package
	// doc lists. Apply copies what it keeps: Frames may be reused after.
	Frames []byte
}

// EventKind says what happened to a ghost.
type EventKind uint8

// Event kinds.
const (
	Appeared EventKind = iota + 1 // the ghost exists now, in Chunk
	Moved                         // the ghost went From → Chunk
	Vanished                      // the ghost is gone from Chunk, for Reason
)

// String names the kind.
func (k EventKind) String() string {
	switch k {
	case Appeared:
		return "appeared"
	case Moved:
		return "moved"
	case Vanished:
		return "vanished"
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is one change of a ghost's existence or chunk.
type Event struct {
	Kind   EventKind
	Entity uint64
	Chunk  torus.ChunkPos        // where it is (Appeared, Moved) or was (Vanished)
	From   torus.ChunkPos        // Moved: the chunk it left
	Reason interest.VanishReason // Vanished; OutOfSight when a snapshot left it out
}

// Stats are the store's counters since New (Ghosts and Tombstones are
// current sizes).
type Stats struct {
	Applied    uint64 // updates and snapshot entries that changed a ghost
	Stale      uint64 // refused by the fence: not after the ghost's or tombstone's stamp
	Orphans    uint64 // deltas for an entity with no ghost (its appear was lost)
	Malformed  uint64 // updates and snapshots refused as malformed
	Gaps       uint64 // batch sequence discontinuities reported by Batch
	Snapshots  uint64 // Replace calls that succeeded
	Appeared   uint64 // Appeared events
	Vanished   uint64 // Vanished events
	Ghosts     int
	Tombstones int
}

// ErrMalformed is returned (wrapped, with detail) for an update or
// snapshot whose frames are not one of the accepted shapes, or not valid
// outbox frames (then errors.Is(err, outbox.ErrMalformed) holds too). The
// store is unchanged. Code REPLICA.MALFORMED.
var ErrMalformed = errcode.New("REPLICA.MALFORMED", "malformed replica update")

// ErrGap matches every *GapError. Code REPLICA.GAP.
var ErrGap = errcode.New("REPLICA.GAP", "replication gap")

// GapError says that a source's batch sequence did not follow on: batches
// were lost (Got > After+1) or the source started numbering afresh
// (Got <= After, a restarted or re-added peer). The caller resubscribes
// the chunks it holds from Source.
type GapError struct {
	Source string
	After  uint64 // the last seq seen from Source before this batch
	Got    uint64 // this batch's seq
}

func (e *GapError) Error() string {
	return fmt.Sprintf("%s: source %q: batch %d after %d", ErrGap.Error(), e.Source, e.Got, e.After)
}

// ErrorCode implements errcode.Coder.
func (e *GapError) ErrorCode() string { return ErrGap.ErrorCode() }

// Is makes errors.Is(err, ErrGap) hold.
func (e *GapError) Is(target error) bool { return target == ErrGap }

// DefaultTombstones is Config.Tombstones when zero.
const DefaultTombstones = 4096

// Config configures a Store.
type Config struct {
	// World is the torus whose chunks index the ghosts. Zero: torus.Default().
	World torus.World
	// Tombstones is how many vanished entities' stamps are remembered, to
	// refuse a late message about them (oldest forgotten first). Size it
	// above the number of vanishes a reordered message can be late by.
	// Zero: DefaultTombstones.
	Tombstones int
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	if c.World == (torus.World{}) {
		c.World = torus.Default()
	}
	if c.Tombstones == 0 {
		c.Tombstones = DefaultTombstones
	}
	return c
}

// Validate reports the first field that is wrong, as an
// *errcode.ConfigError. It checks the values WithDefaults would give.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if c.Tombstones < 0 {
		return errcode.Config("Tombstones", c.Tombstones, "must not be negative")
	}
	return nil
}

type comp struct {
	t     outbox.ComponentType
	frame []byte // the component frame as sent
}

type ghost struct {
	stamp Stamp
	chunk torus.ChunkPos
	slot  int // index in its chunk's residents
	comps []comp
}

func (g *ghost) find(t outbox.ComponentType) int {
	for i := range g.comps {
		if g.comps[i].t == t {
			return i
		}
	}
	return -1
}

// set stores frame as type t's, reusing the buffer the type had.
func (g *ghost) set(t outbox.ComponentType, frame []byte) {
	if i := g.find(t); i >= 0 {
		g.comps[i].frame = append(g.comps[i].frame[:0], frame...)
		return
	}
	n := len(g.comps)
	if n < cap(g.comps) {
		// Reuse the buffer a cleared slot kept (see reset).
		g.comps = g.comps[:n+1]
		g.comps[n].t = t
		g.comps[n].frame = append(g.comps[n].frame[:0], frame...)
		return
	}
	g.comps = append(g.comps, comp{t: t, frame: append([]byte(nil), frame...)})
}

// reset empties the state but keeps the buffers for the next set.
func (g *ghost) reset() { g.comps = g.comps[:0] }

type tomb struct {
	entity uint64
	stamp  Stamp
}

// grave is what a tombstone remembers. Every tombstone refuses updates
// not after its stamp. A vanish message is itself the message at its
// stamp, so it refuses a snapshot entry of that stamp too (hard). A
// snapshot that leaves a ghost out says only that the entity is not in
// that chunk now: the same stamp may come back in another chunk's
// snapshot (the ghost's move was lost), so it refuses only older entries.
type grave struct {
	stamp Stamp
	hard  bool
}

// Store is the render-ghost store. Its zero value is not usable: call New.
type Store struct {
	world  torus.World
	ghosts map[uint64]*ghost
	chunks map[torus.ChunkPos][]uint64
	free   []*ghost

	tombs    map[uint64]grave
	ring     []tomb // FIFO of tombstones, oldest at ringHead
	ringHead int

	sources map[string]uint64
	events  []Event
	stats   Stats

	// scratch for decoding one update
	frames []frameRef
	seen   []uint64 // Replace: entities of the snapshot
	buf    []uint64
}

// frameRef is one decoded component frame of an update, aliasing its bytes.
type frameRef struct {
	t     outbox.ComponentType
	frame []byte
}

// New returns an empty store.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	return &Store{
		world:   cfg.World,
		ghosts:  make(map[uint64]*ghost),
		chunks:  make(map[torus.ChunkPos][]uint64),
		tombs:   make(map[uint64]grave),
		ring:    make([]tomb, 0, cfg.Tombstones),
		sources: make(map[string]uint64),
	}, nil
}

// Batch records the arrival of batch seq from source; call it before
// applying the batch's updates. It returns a *GapError (errors.Is ErrGap)
// when seq does not follow the last seq seen from source; the batch is to
// be applied all the same. The first batch seen from a source sets its
// baseline and is no gap.
func (s *Store) Batch(source string, seq uint64) error {
	last, ok := s.sources[source]
	s.sources[source] = seq
	if !ok || seq == last+1 {
		return nil
	}
	s.stats.Gaps++
	return &GapError{Source: source, After: last, Got: seq}
}

// shape is what an update's frames amount to.
type shape uint8

const (
	shapeBurst shape = iota + 1
	shapeDelta
	shapeVanish
)

// decode checks u's frames and fills s.frames with its component frames.
func (s *Store) decode(u *Update) (shape, interest.VanishReason, error) {
	s.frames = s.frames[:0]
	b := u.Frames
	if len(b) == 0 {
		return 0, 0, ErrMalformed.Wrap("entity %d: no frames", u.Entity)
	}
	var sh shape
	burstLeft := 0
	var reason interest.VanishReason
	for len(b) > 0 {
		m, rest, err := outbox.ReadFrame(b)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: entity %d: %w", ErrMalformed, u.Entity, err)
		}
		frame := b[:len(b)-len(rest)]
		b = rest
		if m.Entity != u.Entity {
			return 0, 0, ErrMalformed.Wrap("update of entity %d carries a %s frame of entity %d", u.Entity, m.Kind, m.Entity)
		}
		switch {
		case sh == 0 && m.Kind == outbox.KindAppear:
			sh, burstLeft = shapeBurst, m.BurstLen
			continue
		case sh == 0 && m.Kind == outbox.KindVanish:
			sh, reason = shapeVanish, m.Reason
			continue
		case sh == 0 && m.Kind == outbox.KindComponent:
			sh = shapeDelta
		case sh == shapeBurst && m.Kind == outbox.KindComponent && burstLeft > 0:
			burstLeft--
		case sh == shapeDelta && m.Kind == outbox.KindComponent:
		default:
			return 0, 0, ErrMalformed.Wrap("entity %d: a %s frame does not fit its update's shape", u.Entity, m.Kind)
		}
		for _, f := range s.frames {
			if f.t == m.Component {
				return 0, 0, ErrMalformed.Wrap("entity %d: component type %d twice", u.Entity, m.Component)
			}
		}
		s.frames = append(s.frames, frameRef{t: m.Component, frame: frame})
	}
	if burstLeft > 0 {
		return 0, 0, ErrMalformed.Wrap("entity %d: appear burst short by %d frames", u.Entity, burstLeft)
	}
	return sh, reason, nil
}

// fenced reports whether a message stamped st about e is refused: it is
// not after the ghost's stamp, or not after e's tombstone. A snapshot
// entry of the ghost's own stamp is taken: a ghost's stamp is that of the
// last update applied, and a delta lost before it leaves the ghost's
// state behind the owner's at that stamp, which the entry (a whole burst)
// repairs. For a tombstone, see grave.
func (s *Store) fenced(e uint64, g *ghost, st Stamp, snapshot bool) bool {
	if g != nil {
		if snapshot {
			return st.Before(g.stamp)
		}
		return !g.stamp.Before(st)
	}
	if t, ok := s.tombs[e]; ok {
		if snapshot && !t.hard {
			return st.Before(t.stamp)
		}
		return !t.stamp.Before(st)
	}
	return false
}

// Apply applies one update. It reports whether the update changed the
// store (false for a stale or orphan update, and for a vanish of an
// entity with no ghost, which only records its tombstone). A malformed
// update changes nothing and returns an error matching ErrMalformed.
func (s *Store) Apply(u Update) (bool, error) {
	sh, reason, err := s.decode(&u)
	if err != nil {
		s.stats.Malformed++
		return false, err
	}
	g := s.ghosts[u.Entity]
	if s.fenced(u.Entity, g, u.Stamp, false) {
		s.stats.Stale++
		return false, nil
	}
	switch sh {
	case shapeVanish:
		if g == nil {
			s.bury(u.Entity, grave{u.Stamp, true})
			return false, nil
		}
		s.vanish(u.Entity, g, reason, grave{u.Stamp, true})
	case shapeBurst:
		s.put(u.Entity, g, u.Stamp, s.world.NormaliseChunk(u.Chunk), true)
	case shapeDelta:
		if g == nil {
			s.stats.Orphans++
			return false, nil
		}
		// A newer epoch is another writer: its delta replaces the state.
		s.put(u.Entity, g, u.Stamp, s.world.NormaliseChunk(u.Chunk), g.stamp.Epoch != u.Stamp.Epoch)
	}
	s.stats.Applied++
	return true, nil
}

// put writes s.frames into e's ghost (creating it when g is nil), at c,
// replacing its whole state when whole is set.
func (s *Store) put(e uint64, g *ghost, st Stamp, c torus.ChunkPos, whole bool) {
	if g == nil {
		g = s.newGhost()
		s.ghosts[e] = g
		delete(s.tombs, e) // the ring entry dies when it is reached
		g.chunk = c
		s.place(e, g)
		s.event(Event{Kind: Appeared, Entity: e, Chunk: c})
	} else if g.chunk != c {
		from := g.chunk
		s.unplace(g)
		g.chunk = c
		s.place(e, g)
		s.event(Event{Kind: Moved, Entity: e, Chunk: c, From: from})
	}
	g.stamp = st
	if whole {
		g.reset()
	}
	for _, f := range s.frames {
		g.set(f.t, f.frame)
	}
}

func (s *Store) vanish(e uint64, g *ghost, reason interest.VanishReason, gr grave) {
	s.unplace(g)
	delete(s.ghosts, e)
	s.event(Event{Kind: Vanished, Entity: e, Chunk: g.chunk, Reason: reason})
	s.bury(e, gr)
	g.reset()
	s.free = append(s.free, g)
}

func (s *Store) newGhost() *ghost {
	if n := len(s.free); n > 0 {
		g := s.free[n-1]
		s.free = s.free[:n-1]
		return g
	}
	return &ghost{}
}

func (s *Store) event(ev Event) {
	switch ev.Kind {
	case Appeared:
		s.stats.Appeared++
	case Vanished:
		s.stats.Vanished++
	}
	s.events = append(s.events, ev)
}

// bury remembers e's last stamp, forgetting the oldest tombstone when the
// memory is full.
func (s *Store) bury(e uint64, gr grave) {
	if t, ok := s.tombs[e]; ok {
		if gr.stamp.Before(t.stamp) || gr.stamp == t.stamp && (t.hard || !gr.hard) {
			return // what is remembered fences at least as much
		}
		if gr.stamp == t.stamp {
			s.tombs[e] = gr // the same ring entry, now hard
			return
		}
	}
	if cap(s.ring) == 0 {
		return
	}
	if len(s.ring) == cap(s.ring) {
		old := s.ring[s.ringHead]
		// Only the newest ring entry of an entity speaks for it: an older
		// one (buried again since, or resurrected) forgets nothing.
		if t, ok := s.tombs[old.entity]; ok && t.stamp == old.stamp {
			delete(s.tombs, old.entity)
		}
		s.ring[s.ringHead] = tomb{entity: e, stamp: gr.stamp}
		s.ringHead = (s.ringHead + 1) % len(s.ring)
	} else {
		s.ring = append(s.ring, tomb{entity: e, stamp: gr.stamp})
	}
	s.tombs[e] = gr
}

func (s *Store) place(e uint64, g *ghost) {
	rs := s.chunks[g.chunk]
	g.slot = len(rs)
	s.chunks[g.chunk] = append(rs, e)
}

// unplace removes g from its chunk's residents (swap with the last).
func (s *Store) unplace(g *ghost) {
	rs := s.chunks[g.chunk]
	last := len(rs) - 1
	if g.slot != last {
		moved := rs[last]
		rs[g.slot] = moved
		s.ghosts[moved].slot = g.slot
	}
	if last == 0 {
		delete(s.chunks, g.chunk)
		return
	}
	s.chunks[g.chunk] = rs[:last]
}

// Replace applies a snapshot of chunk: entries are its residents, each an
// appear burst (their Chunk fields are ignored: they stand in chunk). The
// ghosts of chunk that are not among the entries vanish (OutOfSight), and
// each entry is applied like a burst under the fence. Replace(chunk, nil)
// clears a chunk the node no longer holds. A malformed entry, or an
// entity listed twice, refuses the whole snapshot and changes nothing.
func (s *Store) Replace(chunk torus.ChunkPos, entries []Update) error {
	chunk = s.world.NormaliseChunk(chunk)
	s.seen = s.seen[:0]
	for i := range entries {
		sh, _, err := s.decode(&entries[i])
		if err == nil && sh != shapeBurst {
			err = ErrMalformed.Wrap("snapshot entry of entity %d is not an appear burst", entries[i].Entity)
		}
		for _, e := range s.seen {
			if err == nil && e == entries[i].Entity {
				err = ErrMalformed.Wrap("snapshot lists entity %d twice", e)
			}
		}
		if err != nil {
			s.stats.Malformed++
			return err
		}
		s.seen = append(s.seen, entries[i].Entity)
	}
	// Vanish the chunk's ghosts the snapshot leaves out. Walk a copy:
	// vanishing reorders the residents.
	s.buf = append(s.buf[:0], s.chunks[chunk]...)
	for _, e := range s.buf {
		if !contains(s.seen, e) {
			g := s.ghosts[e]
			s.vanish(e, g, interest.OutOfSight, grave{g.stamp, false})
		}
	}
	for i := range entries {
		u := &entries[i]
		g := s.ghosts[u.Entity]
		if s.fenced(u.Entity, g, u.Stamp, true) {
			s.stats.Stale++
			continue
		}
		_, _, _ = s.decode(u) // checked above; refills s.frames
		s.put(u.Entity, g, u.Stamp, chunk, true)
		s.stats.Applied++
	}
	s.stats.Snapshots++
	return nil
}

func contains(es []uint64, e uint64) bool {
	for _, x := range es {
		if x == e {
			return true
		}
	}
	return false
}

// Drain appends the events since the last Drain to dst, in the order they
// happened, and forgets them.
func (s *Store) Drain(dst []Event) []Event {
	dst = append(dst, s.events...)
	s.events = s.events[:0]
	return dst
}

// Len is the number of ghosts.
func (s *Store) Len() int { return len(s.ghosts) }

// Has reports whether e has a ghost, and its stamp and chunk.
func (s *Store) Has(e uint64) (Stamp, torus.ChunkPos, bool) {
	g, ok := s.ghosts[e]
	if !ok {
		return Stamp{}, torus.ChunkPos{}, false
	}
	return g.stamp, g.chunk, true
}

// Frame returns e's stored frame of component type t, as the owner sent it.
// The bytes are the store's: read them before the next Apply or Replace.
func (s *Store) Frame(e uint64, t outbox.ComponentType) ([]byte, bool) {
	g, ok := s.ghosts[e]
	if !ok {
		return nil, false
	}
	if i := g.find(t); i >= 0 {
		return g.comps[i].frame, true
	}
	return nil, false
}

// AppendBurst appends e's appear burst (an outbox appear head and every
// stored component frame, in the order of invariant 5) to dst. It reports
// false, and leaves dst as it was, when e has no ghost.
func (s *Store) AppendBurst(dst []byte, e uint64) ([]byte, bool) {
	g, ok := s.ghosts[e]
	if !ok {
		return dst, false
	}
	dst = outbox.AppendAppearFrame(dst, e, len(g.comps))
	for _, c := range g.comps {
		dst = append(dst, c.frame...)
	}
	return dst, true
}

// AppendResidents appends the ghosts standing in chunk (any coordinates)
// to dst, in an order that depends only on the calls made.
func (s *Store) AppendResidents(dst []uint64, chunk torus.ChunkPos) []uint64 {
	return append(dst, s.chunks[s.world.NormaliseChunk(chunk)]...)
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	st := s.stats
	st.Ghosts = len(s.ghosts)
	st.Tombstones = len(s.tombs)
	return st
}
