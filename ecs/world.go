package ecs

import (
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/entityid"
	"github.com/shardwise/shardwise/errcode"
)

// ID is an entity id: a snowflake minted by entityid, or any uint64 a
// caller guarantees unique within the World.
type ID = entityid.ID

// Defaults filled in by Config.withDefaults.
const (
	DefaultTickInterval    = 50 * time.Millisecond // 20 Hz
	DefaultMaxCatchUpSteps = 3
)

// Config configures a World. The zero value is valid.
type Config struct {
	// Clock drives Run's fixed-step tick; nil means clock.Real().
	Clock clock.Clock
	// TickInterval is the fixed simulation step; 0 means 50 ms (20 Hz).
	TickInterval time.Duration
	// MaxCatchUpSteps is how many ticks Run may run back to back after a
	// stall; the rest of the backlog is dropped and counted. 0 means 3.
	MaxCatchUpSteps int
	// Logger receives diagnostics; nil means discard.
	Logger *slog.Logger
}

// Validate reports a negative interval or catch-up limit.
func (c Config) Validate() error {
	if c.TickInterval < 0 {
		return errcode.Config("TickInterval", c.TickInterval, "must not be negative (0 means 50ms)")
	}
	if c.MaxCatchUpSteps < 0 {
		return errcode.Config("MaxCatchUpSteps", c.MaxCatchUpSteps, "must not be negative (0 means 3)")
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.Clock = clock.OrReal(c.Clock)
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.MaxCatchUpSteps == 0 {
		c.MaxCatchUpSteps = DefaultMaxCatchUpSteps
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// slot is the World's record of one entity position in the slot table.
// Stores index their sparse arrays by slot, so lookups inside queries never
// touch the id map.
type slot struct {
	id      ID
	alive   bool
	leaving bool // a Destroy or Evict is queued
	moved   bool // in the moved log and not yet drained
}

type opKind uint8

const (
	opAdd opKind = iota
	opRemove
	opDestroy
	opEvict
)

// op is one deferred structural change. For opAdd, arg indexes the store's
// pending values, so queuing a change allocates nothing once warm.
type op struct {
	kind  opKind
	store Component
	id    ID
	arg   int
}

// World is a set of entities with typed component stores, systems and a
// fixed-step tick. Every method except Do, Post, Close, QueuedCommands and
// Stats must be called from the goroutine that owns the World (the one
// calling Run or Step); other goroutines reach it through Do and Post.
type World struct {
	cfg Config

	index idIndex // alive id → slot
	slots []slot
	free  []uint32
	alive int

	stores       []Component // by ComponentID
	storesByType map[reflect.Type]Component
	storesByName map[string]Component

	deferDepth int  // > 0 while systems run or a query iterates
	flushing   bool // applying ops; new Destroy/Evict append to ops
	ops        []op

	destroyListeners []func(w *World, id ID)
	forgetHooks      []func(id ID)

	movedLog []movedEntry

	systems    []*systemEntry // sorted by (Order, seq); replaced, never mutated
	systemSeq  int
	tickEnd    []func(w *World, t Tick)
	tick       uint64
	curTick    Tick
	inSystems  bool
	runActive  atomic.Bool
	ticksRun   atomic.Uint64
	ticksLost  atomic.Uint64
	catchUpRun atomic.Uint64

	cmdMu  sync.Mutex
	cmds   []*command
	spare  []*command
	closed bool
}

type movedEntry struct {
	id   ID
	slot uint32
}

// New validates cfg and returns an empty World.
func New(cfg Config) (*World, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &World{
		cfg:          cfg.withDefaults(),
		storesByType: make(map[reflect.Type]Component),
		storesByName: make(map[string]Component),
	}, nil
}

// TickInterval returns the fixed step.
func (w *World) TickInterval() time.Duration { return w.cfg.TickInterval }

// Len returns the number of alive entities.
func (w *World) Len() int { return w.alive }

// Alive reports whether id is an entity of this World. An entity with a
// queued Destroy or Evict is alive until the queue is applied.
func (w *World) Alive(id ID) bool {
	_, ok := w.index.get(id)
	return ok
}

// Leaving reports whether id has a Destroy or Evict queued.
func (w *World) Leaving(id ID) bool {
	s, ok := w.index.get(id)
	return ok && w.slots[s].leaving
}

// Deferring reports whether structural changes are being queued: during
// the systems of a tick and inside any query iteration.
func (w *World) Deferring() bool { return w.deferDepth > 0 }

// CreateEntity adds an entity with the given id and no components. It is
// never deferred (it touches no store), so components may be added to the
// entity at once. An id that is alive is refused with ErrAlive; an id that
// was destroyed or evicted before may be created again (a handoff that
// comes back).
func (w *World) CreateEntity(id ID) error {
	if _, ok := w.index.get(id); ok {
		return &EntityError{Op: "create", ID: id, Err: ErrAlive}
	}
	var s uint32
	if n := len(w.free); n > 0 {
		s = w.free[n-1]
		w.free = w.free[:n-1]
	} else {
		s = uint32(len(w.slots))
		w.slots = append(w.slots, slot{})
	}
	w.slots[s] = slot{id: id, alive: true}
	w.index.put(id, s)
	w.alive++
	return nil
}

// Destroy removes an entity, first running every destroy listener (which
// may still read its components), then the forget hooks. While the World
// is deferring it is queued and applied, in call order with other
// structural changes, when deferral ends. Destroying an entity that is
// already leaving is a no-op.
func (w *World) Destroy(id ID) error { return w.leave(id, opDestroy, "destroy") }

// Evict removes an entity from every store and index without running
// destroy listeners: nothing observes a death or a vanish. Forget hooks
// (pure bookkeeping) still run. It is what a handoff uses once the target
// node owns the entity. Deferred like Destroy.
func (w *World) Evict(id ID) error { return w.leave(id, opEvict, "evict") }

func (w *World) leave(id ID, kind opKind, name string) error {
	s, ok := w.index.get(id)
	if !ok {
		return &EntityError{Op: name, ID: id, Err: ErrNotAlive}
	}
	if w.slots[s].leaving {
		return nil
	}
	w.slots[s].leaving = true
	w.ops = append(w.ops, op{kind: kind, id: id})
	if w.deferDepth == 0 && !w.flushing {
		w.flush()
	}
	return nil
}

// OnDestroy registers a listener run for every Destroy (never for Evict),
// before the entity leaves its stores. Listeners run in registration order
// and may make structural changes; those are applied in the same flush.
func (w *World) OnDestroy(fn func(w *World, id ID)) {
	w.destroyListeners = append(w.destroyListeners, fn)
}

// OnForget registers a hook run after an entity left every store, on both
// Destroy and Evict. Hooks keep indices (spatial, caches) in step; they
// must not emit anything a client or peer could observe.
func (w *World) OnForget(fn func(id ID)) { w.forgetHooks = append(w.forgetHooks, fn) }

// EachEntity calls fn for every alive entity, in slot order.
func (w *World) EachEntity(fn func(id ID)) {
	w.deferDepth++
	defer w.endIteration()
	for i := range w.slots {
		if w.slots[i].alive {
			fn(w.slots[i].id)
		}
	}
}

// MarkMoved records that an entity's position changed chunk (or, as the
// caller decides, changed at all) for a later DrainMoved. Marking twice
// before a drain records it once.
func (w *World) MarkMoved(id ID) bool {
	s, ok := w.index.get(id)
	if !ok {
		return false
	}
	if !w.slots[s].moved {
		w.slots[s].moved = true
		w.movedLog = append(w.movedLog, movedEntry{id: id, slot: s})
	}
	return true
}

// DrainMoved calls fn once for every alive entity marked moved since the
// last drain, in marking order, and empties the log. Entities destroyed or
// evicted in between are skipped.
func (w *World) DrainMoved(fn func(id ID)) {
	w.deferDepth++
	defer w.endIteration()
	for i := 0; i < len(w.movedLog); i++ { // fn may mark more; they are drained too
		e := w.movedLog[i]
		sl := &w.slots[e.slot]
		if !sl.alive || sl.id != e.id || !sl.moved {
			continue
		}
		sl.moved = false
		fn(e.id)
	}
	w.movedLog = w.movedLog[:0]
}

func (w *World) slotOf(id ID) (uint32, bool) {
	s, ok := w.index.get(id)
	return s, ok
}

// endIteration closes a deferral opened by an iteration and applies the
// queue when no deferral is left.
func (w *World) endIteration() {
	w.deferDepth--
	if w.deferDepth == 0 && !w.flushing && len(w.ops) > 0 {
		w.flush()
	}
}

// flush applies queued structural changes in order. Changes queued while
// flushing (by destroy listeners) are appended and applied in the same
// pass.
func (w *World) flush() {
	w.flushing = true
	defer func() { w.flushing = false }()
	for i := 0; i < len(w.ops); i++ {
		o := w.ops[i]
		switch o.kind {
		case opAdd:
			o.store.applyAdd(o.id, o.arg)
		case opRemove:
			o.store.Remove(o.id)
		case opDestroy:
			for _, fn := range w.destroyListeners {
				fn(w, o.id)
			}
			w.removeEntity(o.id)
		case opEvict:
			w.removeEntity(o.id)
		}
	}
	clear(w.ops) // drop references held by the queue
	w.ops = w.ops[:0]
	for _, s := range w.stores {
		s.resetPending()
	}
}

func (w *World) removeEntity(id ID) {
	s, ok := w.index.get(id)
	if !ok {
		return
	}
	for _, st := range w.stores {
		st.removeSlot(s)
	}
	w.index.remove(id)
	w.slots[s] = slot{}
	w.free = append(w.free, s)
	w.alive--
	for _, fn := range w.forgetHooks {
		fn(id)
	}
}
