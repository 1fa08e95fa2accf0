package outbox

import (
	"slices"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/interest"
)

// Sink receives one subscriber's batch per tick. The gateway implements it
// over a socket, a node link over a stream.
type Sink interface {
	// Deliver hands over everything the subscriber gets for tick, as
	// complete wire frames in order (concatenated they form the batch).
	// Each frame's bytes are immutable and may be retained or shared with
	// other sinks; the outer slice is reused once Deliver returns. Deliver
	// runs on the world's goroutine inside Flush: it must not block (queue
	// or drop) and must not call back into the Outbox.
	Deliver(tick uint64, frames [][]byte)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(tick uint64, frames [][]byte)

// Deliver implements Sink.
func (f SinkFunc) Deliver(tick uint64, frames [][]byte) { f(tick, frames) }

// ErrDuplicateType is returned by Register for a component type that already
// has an encoder. Code OUTBOX.DUPLICATE_TYPE.
var ErrDuplicateType = errcode.New("OUTBOX.DUPLICATE_TYPE", "component type registered twice")

// Stats describes one Flush.
type Stats struct {
	// Batches delivered (one per subscriber that had anything).
	Batches int
	// FramesDelivered counts frames over all batches.
	FramesDelivered int
	// FramesEncoded counts distinct frames encoded (shared by recipients).
	FramesEncoded int
	// PayloadsEncoded counts Encoder.AppendPayload calls: at most one per
	// (entity, component type) per flush, whatever the audience size.
	PayloadsEncoded int
	// BytesEncoded is the size of all distinct frames.
	BytesEncoded int
	// BytesDelivered is the sum of all batch sizes.
	BytesDelivered int
	// Dropped counts messages addressed to subscribers with no sink.
	Dropped int
}

type frameRef struct{ off, n uint32 }

type compKey[E interest.Entity] struct {
	e E
	t ComponentType
}

// compEntry caches, per flush, what is known about one entity's component:
// it is looked at once whatever number of viewers and updates need it.
type compEntry[S comparable] struct {
	has     bool
	aud     Audience[S]
	encoded bool
	ref     frameRef
}

type appearKey[E interest.Entity] struct {
	e E
	n int
}

type vanishKey[E interest.Entity] struct {
	e E
	r interest.VanishReason
}

type seenKey[E interest.Entity] struct {
	r int32
	e E
}

type recipient[S comparable, E interest.Entity] struct {
	key      S
	sink     Sink
	live     bool
	active   bool
	seq      uint64 // last message this recipient was given (dedupe)
	appeared []E
	vanished []interest.Vanished[E]
	frames   []frameRef
}

// Outbox collects, during a tick, which components changed and which
// entities appeared to or vanished from whom, and at Flush encodes each
// message once and hands every subscriber one batch. Audiences are
// evaluated at Flush. Not safe for concurrent use: the world's goroutine
// owns it.
type Outbox[S comparable, E interest.Entity] struct {
	world    World[S, E]
	encoders []Encoder[S, E]
	byType   []int32 // encoder index + 1 by component type; 0 = none

	index   map[S]int32
	recips  []recipient[S, E]
	free    []int32
	active  []int32
	dropped int

	dirty    []compKey[E]
	dirtySet map[compKey[E]]struct{}

	// Per-flush state.
	arena     []byte
	lastArena int
	comps     map[compKey[E]]compEntry[S]
	appears   map[appearKey[E]]frameRef
	vanishes  map[vanishKey[E]]frameRef
	appearedT map[seenKey[E]]struct{}
	seq       uint64
	updating  bool // in the update phase: see component
	stats     Stats

	payload []byte
	cands   []S
	party   []S
	burst   []frameRef
	frames  [][]byte
}

// New returns an empty outbox that asks world about entities at flush.
func New[S comparable, E interest.Entity](world World[S, E]) *Outbox[S, E] {
	return &Outbox[S, E]{
		world:     world,
		index:     make(map[S]int32),
		dirtySet:  make(map[compKey[E]]struct{}),
		comps:     make(map[compKey[E]]compEntry[S]),
		appears:   make(map[appearKey[E]]frameRef),
		vanishes:  make(map[vanishKey[E]]frameRef),
		appearedT: make(map[seenKey[E]]struct{}),
	}
}

// Register adds the encoder of one component type. Appear bursts list
// components in registration order.
func (o *Outbox[S, E]) Register(enc Encoder[S, E]) error {
	t := int(enc.Type())
	if t < len(o.byType) && o.byType[t] != 0 {
		return ErrDuplicateType.Wrap("type %d", t)
	}
	if t >= len(o.byType) {
		o.byType = append(o.byType, make([]int32, t+1-len(o.byType))...)
	}
	o.encoders = append(o.encoders, enc)
	o.byType[t] = int32(len(o.encoders))
	return nil
}

// encoderOf returns the encoder of t, or nil.
func (o *Outbox[S, E]) encoderOf(t ComponentType) Encoder[S, E] {
	if int(t) < len(o.byType) {
		if i := o.byType[t]; i != 0 {
			return o.encoders[i-1]
		}
	}
	return nil
}

// Attach routes subscriber s to sink, replacing any sink it had; what s was
// owed this tick goes to the new sink. A nil sink is the same as Detach.
func (o *Outbox[S, E]) Attach(s S, sink Sink) {
	if sink == nil {
		o.Detach(s)
		return
	}
	if i, ok := o.index[s]; ok {
		o.recips[i].sink = sink
		return
	}
	var i int32
	if n := len(o.free); n > 0 {
		i = o.free[n-1]
		o.free = o.free[:n-1]
	} else {
		i = int32(len(o.recips))
		o.recips = append(o.recips, recipient[S, E]{})
	}
	r := &o.recips[i]
	r.key, r.sink, r.live = s, sink, true
	o.index[s] = i
}

// Detach stops routing to s and discards what it was owed this tick.
func (o *Outbox[S, E]) Detach(s S) {
	i, ok := o.index[s]
	if !ok {
		return
	}
	delete(o.index, s)
	r := &o.recips[i]
	var zero S
	r.key, r.sink, r.live = zero, nil, false
	r.appeared, r.vanished, r.frames = r.appeared[:0], r.vanished[:0], r.frames[:0]
	// An active entry stays in o.active until the flush, which skips dead
	// entries and frees them then: its index must not be reused while the
	// tick's bookkeeping (appearedT) may still name it.
	if !r.active {
		o.free = append(o.free, i)
	}
}

// MarkDirty records that e's component t changed this tick. Marking twice
// is the same as once. It panics on a type with no encoder: that is a
// program error, not a runtime condition.
func (o *Outbox[S, E]) MarkDirty(e E, t ComponentType) {
	if o.encoderOf(t) == nil {
		panic("outbox: MarkDirty of unregistered component type")
	}
	k := compKey[E]{e: e, t: t}
	if _, ok := o.dirtySet[k]; ok {
		return
	}
	o.dirtySet[k] = struct{}{}
	o.dirty = append(o.dirty, k)
}

func (o *Outbox[S, E]) activate(i int32) {
	if r := &o.recips[i]; !r.active {
		r.active = true
		o.active = append(o.active, i)
	}
}

// Appear records that e appeared to s: at flush s gets e's burst (every
// component s may see), and no separate update of e this tick.
func (o *Outbox[S, E]) Appear(s S, e E) {
	i, ok := o.index[s]
	if !ok {
		o.dropped++
		return
	}
	o.recips[i].appeared = append(o.recips[i].appeared, e)
	o.activate(i)
}

// Vanish records that e left s's view for reason.
func (o *Outbox[S, E]) Vanish(s S, e E, reason interest.VanishReason) {
	i, ok := o.index[s]
	if !ok {
		o.dropped++
		return
	}
	o.recips[i].vanished = append(o.recips[i].vanished, interest.Vanished[E]{Entity: e, Reason: reason})
	o.activate(i)
}

// AddDeliveries records a Visibility drain.
func (o *Outbox[S, E]) AddDeliveries(ds []interest.Delivery[S, E]) {
	for _, d := range ds {
		for _, v := range d.Vanished {
			o.Vanish(d.Subscriber, v.Entity, v.Reason)
		}
		for _, e := range d.Appeared {
			o.Appear(d.Subscriber, e)
		}
	}
}

// Flush ends the tick: it evaluates every audience, encodes each message
// once, and calls each subscriber's sink once with its batch, in this
// order inside a batch: vanishes, appear bursts, updates (in the order the
// components were first marked dirty). Subscribers are served in the order
// they first had something this tick.
func (o *Outbox[S, E]) Flush(tick uint64) Stats {
	o.stats = Stats{Dropped: o.dropped}
	o.dropped = 0
	// A fresh arena per flush, because frames may be retained by sinks
	// (async writers, node links) and so must never be overwritten. It is
	// one allocation per tick, sized by the last one, not one per recipient.
	o.arena = make([]byte, 0, max(o.lastArena+o.lastArena/8, 4096))

	for _, i := range o.active {
		r := &o.recips[i]
		for _, v := range r.vanished {
			r.frames = append(r.frames, o.vanishFrame(v))
		}
	}
	for _, i := range o.active {
		r := &o.recips[i]
		for _, e := range r.appeared {
			o.appendBurst(i, e)
		}
	}
	o.updating = true
	for _, k := range o.dirty {
		o.fanOut(k)
	}
	o.updating = false
	for _, i := range o.active {
		r := &o.recips[i]
		if !r.live {
			r.active = false
			o.free = append(o.free, i)
			continue
		}
		if len(r.frames) > 0 {
			o.frames = o.frames[:0]
			for _, f := range r.frames {
				o.frames = append(o.frames, o.arena[f.off:f.off+f.n:f.off+f.n])
				o.stats.BytesDelivered += int(f.n)
			}
			o.stats.FramesDelivered += len(r.frames)
			o.stats.Batches++
			r.sink.Deliver(tick, o.frames)
		}
		r.active = false
		r.appeared, r.vanished, r.frames = r.appeared[:0], r.vanished[:0], r.frames[:0]
	}
	clear(o.frames) // do not keep the arena alive through the reused slice
	o.active = o.active[:0]
	o.dirty = o.dirty[:0]
	clear(o.dirtySet)
	clear(o.comps)
	clear(o.appears)
	clear(o.vanishes)
	clear(o.appearedT)
	o.stats.BytesEncoded = len(o.arena)
	o.lastArena = len(o.arena)
	o.arena = nil
	return o.stats
}

func (o *Outbox[S, E]) put(start int) frameRef {
	o.stats.FramesEncoded++
	return frameRef{off: uint32(start), n: uint32(len(o.arena) - start)}
}

func (o *Outbox[S, E]) vanishFrame(v interest.Vanished[E]) frameRef {
	k := vanishKey[E]{e: v.Entity, r: v.Reason}
	if f, ok := o.vanishes[k]; ok {
		return f
	}
	start := len(o.arena)
	o.arena = AppendVanishFrame(o.arena, uint64(v.Entity), v.Reason)
	f := o.put(start)
	o.vanishes[k] = f
	return f
}

// component returns the flush's view of e's component t: whether e has
// it, its audience, and (with encode) its frame, each computed once.
func (o *Outbox[S, E]) component(e E, t ComponentType, encode bool) compEntry[S] {
	k := compKey[E]{e: e, t: t}
	enc := o.encoderOf(t)
	var c compEntry[S]
	ok := false
	if len(o.comps) > 0 {
		c, ok = o.comps[k]
	}
	if !ok && o.updating {
		// Updates run after every burst and each (e, t) is dirty once, so
		// nothing will ask for this entry again: skip the cache.
		c.has = enc.Has(e)
		if c.has {
			c.aud = enc.Audience(e)
		}
		if encode && c.has {
			c.ref, c.encoded = o.encode(enc, e, t), true
		}
		return c
	}
	if !ok {
		c.has = enc.Has(e)
		if c.has {
			c.aud = enc.Audience(e)
		}
	}
	if encode && c.has && !c.encoded {
		c.ref, c.encoded = o.encode(enc, e, t), true
	}
	if !ok || encode {
		o.comps[k] = c
	}
	return c
}

func (o *Outbox[S, E]) encode(enc Encoder[S, E], e E, t ComponentType) frameRef {
	o.payload = enc.AppendPayload(o.payload[:0], e)
	o.stats.PayloadsEncoded++
	start := len(o.arena)
	o.arena = AppendComponentFrame(o.arena, uint64(e), t, o.payload)
	return o.put(start)
}

func (o *Outbox[S, E]) appendBurst(i int32, e E) {
	seen := seenKey[E]{r: i, e: e}
	if _, dup := o.appearedT[seen]; dup {
		return // Appear called twice for the same viewer: one burst
	}
	viewer := o.recips[i].key
	o.burst = o.burst[:0]
	for _, enc := range o.encoders {
		t := enc.Type()
		c := o.component(e, t, false)
		if !c.has || !o.admits(c.aud, e, viewer) {
			continue
		}
		o.burst = append(o.burst, o.component(e, t, true).ref)
	}
	k := appearKey[E]{e: e, n: len(o.burst)}
	head, ok := o.appears[k]
	if !ok {
		start := len(o.arena)
		o.arena = AppendAppearFrame(o.arena, uint64(e), len(o.burst))
		head = o.put(start)
		o.appears[k] = head
	}
	r := &o.recips[i]
	r.frames = append(r.frames, head)
	r.frames = append(r.frames, o.burst...)
	o.appearedT[seen] = struct{}{}
}

// fanOut resolves the audience of one dirty component and appends its one
// frame to every recipient's batch.
func (o *Outbox[S, E]) fanOut(k compKey[E]) {
	c := o.component(k.e, k.t, false)
	if !c.has {
		return
	}
	o.cands = o.cands[:0]
	switch c.aud.Kind {
	case PublicInRange:
		o.cands = o.world.AppendObserversOf(o.cands, k.e)
	case OwnerOnly:
		if owner, ok := o.world.OwnerOf(k.e); ok {
			o.cands = append(o.cands, owner)
		}
	case Accounts:
		o.cands = append(o.cands, c.aud.Members...)
	case OwnerAndParty:
		if owner, ok := o.world.OwnerOf(k.e); ok {
			o.cands = append(o.cands, owner)
			o.cands = o.world.AppendParty(o.cands, owner)
		}
	}
	if len(o.cands) == 0 {
		return
	}
	o.seq++
	var ref frameRef
	encoded := false
	for _, s := range o.cands {
		i, ok := o.index[s]
		if !ok {
			o.stats.Dropped++
			continue
		}
		r := &o.recips[i]
		if r.seq == o.seq {
			continue // named twice (owner also in party, duplicate member)
		}
		r.seq = o.seq
		if len(o.appearedT) > 0 {
			if _, ok := o.appearedT[seenKey[E]{r: i, e: k.e}]; ok {
				continue // its appear burst already carries the current value
			}
		}
		if !encoded {
			if c.encoded { // a burst encoded it already
				ref = c.ref
			} else {
				ref = o.encode(o.encoderOf(k.t), k.e, k.t)
			}
			encoded = true
		}
		r.frames = append(r.frames, ref)
		o.activate(i)
	}
}

// admits reports whether viewer belongs to aud for entity e: the
// single-viewer twin of fanOut's resolution, used for appear bursts. The
// property tests hold the two together against a naive reference.
func (o *Outbox[S, E]) admits(aud Audience[S], e E, viewer S) bool {
	switch aud.Kind {
	case PublicInRange:
		return true // the viewer sees e: that is why it gets a burst
	case OwnerOnly:
		owner, ok := o.world.OwnerOf(e)
		return ok && owner == viewer
	case Accounts:
		return slices.Contains(aud.Members, viewer)
	case OwnerAndParty:
		owner, ok := o.world.OwnerOf(e)
		if !ok {
			return false
		}
		if owner == viewer {
			return true
		}
		o.party = o.world.AppendParty(o.party[:0], owner)
		return slices.Contains(o.party, viewer)
	}
	return false
}
