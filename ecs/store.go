package ecs

import (
	"fmt"
	"reflect"
)

// ComponentID is a component type's small index within one World, in
// registration order.
type ComponentID uint16

// ComponentSpec names a component type when it is registered.
type ComponentSpec struct {
	// Name is unique within the World and stable across builds: the handoff
	// codec registry and the wire use it. Required.
	Name string
	// Meta is free for the layers above: an audience, a codec, a "not
	// handed over" mark. The World stores it and never reads it.
	Meta any
}

// ComponentType describes one registered component type.
type ComponentType struct {
	ID     ComponentID
	Name   string
	GoType reflect.Type
	Meta   any
}

// Component is the type-erased view of a Store, for code that walks every
// component type (a handoff codec, a boot check, an audience flush). It is
// implemented only by *Store[T].
type Component interface {
	Type() ComponentType
	Len() int
	Has(id ID) bool
	// GetAny returns a copy of the entity's value.
	GetAny(id ID) (any, bool)
	// AddAny is Add with a value that must have the store's Go type.
	AddAny(id ID, v any) error
	Remove(id ID) bool
	MarkDirty(id ID) bool
	DrainDirty(fn func(id ID))

	hasSlot(s uint32) bool
	sparseRef() *[]uint32
	removeSlot(s uint32)
	applyAdd(id ID, pending int)
	resetPending()
}

// Store holds the values of one component type, densely packed so that
// iteration walks contiguous memory. A sparse array indexed by the World's
// entity slot maps an entity to its dense position (0 = absent, else
// position+1, so a freshly grown sparse array means "absent").
type Store[T any] struct {
	w      *World
	info   ComponentType
	sparse []uint32
	dense  []T
	ids    []ID
	slots  []uint32

	pending []T // values of deferred adds, indexed by op.arg

	dirty    []bool // by slot; true while in dirtyLog and not drained
	dirtyLog []movedEntry
}

var _ Component = (*Store[int])(nil)

// Register adds a component type to w and returns its store. Each Go type
// and each name may be registered once per World.
func Register[T any](w *World, spec ComponentSpec) (*Store[T], error) {
	gt := reflect.TypeFor[T]()
	if spec.Name == "" {
		return nil, ErrDuplicateComponent.Wrap("component %v needs a name", gt)
	}
	if _, ok := w.storesByType[gt]; ok {
		return nil, ErrDuplicateComponent.Wrap("type %v", gt)
	}
	if _, ok := w.storesByName[spec.Name]; ok {
		return nil, ErrDuplicateComponent.Wrap("name %q", spec.Name)
	}
	s := &Store[T]{w: w, info: ComponentType{
		ID: ComponentID(len(w.stores)), Name: spec.Name, GoType: gt, Meta: spec.Meta,
	}}
	w.stores = append(w.stores, s)
	w.storesByType[gt] = s
	w.storesByName[spec.Name] = s
	return s, nil
}

// StoreOf returns the store registered for T in w.
func StoreOf[T any](w *World) (*Store[T], bool) {
	c, ok := w.storesByType[reflect.TypeFor[T]()]
	if !ok {
		return nil, false
	}
	return c.(*Store[T]), true
}

// Components returns every registered component type in registration order.
func (w *World) Components() []Component {
	out := make([]Component, len(w.stores))
	copy(out, w.stores)
	return out
}

// ComponentNamed returns the store registered under name.
func (w *World) ComponentNamed(name string) (Component, bool) {
	c, ok := w.storesByName[name]
	return c, ok
}

// Type describes the component type.
func (s *Store[T]) Type() ComponentType { return s.info }

// Len returns how many entities have the component.
func (s *Store[T]) Len() int { return len(s.dense) }

func (s *Store[T]) denseOf(sl uint32) (int, bool) {
	if int(sl) >= len(s.sparse) {
		return 0, false
	}
	d := s.sparse[sl]
	return int(d) - 1, d != 0
}

func (s *Store[T]) sparseRef() *[]uint32 { return &s.sparse }

func (s *Store[T]) hasSlot(sl uint32) bool {
	return int(sl) < len(s.sparse) && s.sparse[sl] != 0
}

// Has reports whether the entity has the component.
func (s *Store[T]) Has(id ID) bool {
	sl, ok := s.w.slotOf(id)
	return ok && s.hasSlot(sl)
}

// Get returns a pointer to the entity's value, valid until the next
// structural change to this store. Writing through it is not a structural
// change (and is not marked dirty: call MarkDirty).
func (s *Store[T]) Get(id ID) (*T, bool) {
	sl, ok := s.w.slotOf(id)
	if !ok {
		return nil, false
	}
	d, ok := s.denseOf(sl)
	if !ok {
		return nil, false
	}
	return &s.dense[d], true
}

// GetAny returns a copy of the entity's value.
func (s *Store[T]) GetAny(id ID) (any, bool) {
	p, ok := s.Get(id)
	if !ok {
		return nil, false
	}
	return *p, true
}

// Add gives the entity the component with value v, or replaces the value
// it has. Replacing is immediate. Giving a component the entity lacks is a
// structural change: while the World is deferring it is queued, and Get and
// Has see it only once the queue is applied.
func (s *Store[T]) Add(id ID, v T) error {
	sl, ok := s.w.slotOf(id)
	if !ok {
		return &EntityError{Op: "add " + s.info.Name, ID: id, Err: ErrNotAlive}
	}
	if d, ok := s.denseOf(sl); ok {
		s.dense[d] = v
		return nil
	}
	if s.w.deferDepth > 0 {
		s.pending = append(s.pending, v)
		s.w.ops = append(s.w.ops, op{kind: opAdd, store: s, id: id, arg: len(s.pending) - 1})
		return nil
	}
	s.insert(sl, id, v)
	return nil
}

// AddAny is Add for a value of type T held in an interface.
func (s *Store[T]) AddAny(id ID, v any) error {
	t, ok := v.(T)
	if !ok {
		return &EntityError{Op: "add " + s.info.Name, ID: id,
			Err: ErrWrongType.Wrap("got %T, want %v", v, s.info.GoType)}
	}
	return s.Add(id, t)
}

func (s *Store[T]) insert(sl uint32, id ID, v T) {
	if int(sl) >= len(s.sparse) {
		n := max(int(sl)+1, 2*len(s.sparse), 64)
		grown := make([]uint32, n)
		copy(grown, s.sparse)
		s.sparse = grown
	}
	s.dense = append(s.dense, v)
	s.ids = append(s.ids, id)
	s.slots = append(s.slots, sl)
	s.sparse[sl] = uint32(len(s.dense))
}

func (s *Store[T]) applyAdd(id ID, pending int) {
	v := s.pending[pending]
	sl, ok := s.w.slotOf(id)
	if !ok {
		return // destroyed or evicted earlier in the same queue
	}
	if d, ok := s.denseOf(sl); ok {
		s.dense[d] = v
		return
	}
	s.insert(sl, id, v)
}

func (s *Store[T]) resetPending() {
	clear(s.pending)
	s.pending = s.pending[:0]
}

// Remove takes the component away from the entity. It reports whether the
// entity had the component at the time of the call. While the World is
// deferring the removal is queued, after any Add queued before it.
func (s *Store[T]) Remove(id ID) bool {
	sl, ok := s.w.slotOf(id)
	if !ok {
		return false
	}
	if s.w.deferDepth > 0 {
		// Queued even when absent now: it cancels an Add queued before it.
		s.w.ops = append(s.w.ops, op{kind: opRemove, store: s, id: id})
		return s.hasSlot(sl)
	}
	if !s.hasSlot(sl) {
		return false
	}
	s.removeSlot(sl)
	return true
}

// removeSlot swaps the last dense element into the hole.
func (s *Store[T]) removeSlot(sl uint32) {
	d, ok := s.denseOf(sl)
	if !ok {
		return
	}
	last := len(s.dense) - 1
	if d != last {
		s.dense[d] = s.dense[last]
		s.ids[d] = s.ids[last]
		s.slots[d] = s.slots[last]
		s.sparse[s.slots[d]] = uint32(d + 1)
	}
	var zero T
	s.dense[last] = zero // release what the value referenced
	s.dense = s.dense[:last]
	s.ids = s.ids[:last]
	s.slots = s.slots[:last]
	s.sparse[sl] = 0
	if int(sl) < len(s.dirty) {
		s.dirty[sl] = false
	}
}

// MarkDirty records that the entity's value changed and must be sent. It
// reports whether the entity has the component. Marking twice before a
// drain records it once.
func (s *Store[T]) MarkDirty(id ID) bool {
	sl, ok := s.w.slotOf(id)
	if !ok || !s.hasSlot(sl) {
		return false
	}
	if int(sl) >= len(s.dirty) {
		grown := make([]bool, max(int(sl)+1, 2*len(s.dirty), 64))
		copy(grown, s.dirty)
		s.dirty = grown
	}
	if !s.dirty[sl] {
		s.dirty[sl] = true
		s.dirtyLog = append(s.dirtyLog, movedEntry{id: id, slot: sl})
	}
	return true
}

// DrainDirty calls fn once for every entity marked dirty since the last
// drain that still has the component, in marking order, and empties the
// log.
func (s *Store[T]) DrainDirty(fn func(id ID)) {
	s.w.deferDepth++
	defer s.w.endIteration()
	for i := 0; i < len(s.dirtyLog); i++ {
		e := s.dirtyLog[i]
		if int(e.slot) >= len(s.dirty) || !s.dirty[e.slot] || s.w.slots[e.slot].id != e.id {
			continue
		}
		s.dirty[e.slot] = false
		fn(e.id)
	}
	s.dirtyLog = s.dirtyLog[:0]
}

// Each calls fn for every entity with the component, with a pointer to its
// value. Structural changes made by fn are deferred until the iteration
// (or the tick) ends.
func (s *Store[T]) Each(fn func(id ID, v *T)) {
	s.w.deferDepth++
	defer s.w.endIteration()
	for i := range s.dense {
		fn(s.ids[i], &s.dense[i])
	}
}

func (s *Store[T]) String() string {
	return fmt.Sprintf("ecs.Store[%v](%s)", s.info.GoType, s.info.Name)
}
