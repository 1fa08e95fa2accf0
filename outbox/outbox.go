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

// dirtyMark is one MarkDirty, in mark order. prev+1 links to the previous
// mark of the same entity (0: none), so deduplication walks the entity's
// few marks instead of hashing (entity, type) pairs.
type dirtyMark[E interest.Entity] struct {
	e    E
	enc  int32 // encoder index
	prev int32
	more bool // a later mark of the same entity exists
}

// compEntry caches, per flush, what is known about one entity's component:
// it is looked at once whatever number of viewers and updates need it.
type compEntry[S comparable] struct {
	known   bool
	has     bool
	encoded bool
	aud     Audience[S]
	ref     frameRef
}

// entRec is the flush's record of one entity that appeared to or vanished
// from someone. Every field is an index+1 (0: none) into a table of the
// Outbox, so the record holds no pointers and the tables are reused.
type entRec struct {
	comps      int32 // first of len(encoders) entries in compTab
	heads      int32 // list of appear heads by burst size
	vanishes   int32 // list of vanish frames by reason
	viewers    int32 // list of recipients that got a burst
	lastViewer int32 // recipient of the latest burst (duplicate Appear check)
	obs, obsN  int32 // its observers' recipients in obsTab (see publicRecipients)
}

type headNode struct {
	n    int32
	ref  frameRef
	next int32
}

type vanishNode struct {
	reason interest.VanishReason
	ref    frameRef
	next   int32
}

type viewerNode struct {
	r    int32
	next int32
}

// denseRef caches which recipient a World's dense subscriber index stands
// for. It is trusted only while gen matches the Outbox's (no Attach of a
// new key or Detach since) and key matches the index's current key (the
// World may have reused the index for another subscriber).
type denseRef[S comparable] struct {
	key   S
	gen   uint32
	recip int32  // -1: no sink
	epoch uint64 // the world's SubscriberEpoch when key was read
}

// recipient is one attached subscriber. What fanOut touches per observer
// (seq, frames) lives in the Outbox's parallel slices instead, so the
// per-message loop reads small dense arrays, not these wide records.
type recipient[S comparable, E interest.Entity] struct {
	key      S
	sink     Sink
	live     bool
	active   bool
	appeared []E
	vanished []interest.Vanished[E]
}

// Outbox collects, during a tick, which components changed and which
// entities appeared to or vanished from whom, and at Flush encodes each
// message once and hands every subscriber one batch. Audiences are
// evaluated at Flush. Not safe for concurrent use: the world's goroutine
// owns it.
type Outbox[S comparable, E interest.Entity] struct {
	world    World[S, E]
	indexed  IndexedWorld[S, E] // world's dense fast path, or nil
	encoders []Encoder[S, E]
	byType   []int32 // encoder index + 1 by component type; 0 = none

	index   map[S]int32
	gen     uint32 // bumped whenever index changes (see denseRef)
	epoch   uint64 // indexed.SubscriberEpoch() at the start of this flush
	byDense []denseRef[S]
	recips  []recipient[S, E]
	seqs    []uint64     // by recipient: last message given (dedupe)
	frames  [][]frameRef // by recipient: this tick's batch
	free    []int32
	active  []int32
	dropped int

	dirty     []dirtyMark[E]
	lastMark  map[E]int32 // entity → its latest dirty mark + 1
	markPeak  int         // largest size of lastMark since it was made (resetMap)
	entPeak   int         // same for ents
	arena     []byte
	lastArena int

	// Per-flush state, indexed through ents.
	ents     map[E]int32 // entity → recs index
	recs     []entRec
	compTab  []compEntry[S]
	heads    []headNode
	vanishes []vanishNode
	viewers  []viewerNode
	obsTab   []int32 // resolved observers of entities with several dirty components
	seq      uint64
	stats    Stats

	payload []byte
	cands   []S
	dense   []int32
	rbuf    []int32
	party   []S
	burst   []frameRef
	out     [][]byte
}

// New returns an empty outbox that asks world about entities at flush. If
// world also implements IndexedWorld (by delegating to
// interest.Visibility's AppendObserverIndices and SubscriberAt), observers
// are resolved through dense indices instead of keys.
func New[S comparable, E interest.Entity](world World[S, E]) *Outbox[S, E] {
	o := &Outbox[S, E]{
		world:    world,
		index:    make(map[S]int32),
		gen:      1,
		lastMark: make(map[E]int32),
		ents:     make(map[E]int32),
	}
	o.indexed, _ = world.(IndexedWorld[S, E])
	return o
}

// Register adds the encoder of one component type. Appear bursts list
// components in registration order. Register all encoders before the first
// MarkDirty.
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

// encoderIndex returns the index of t's encoder, or -1.
func (o *Outbox[S, E]) encoderIndex(t ComponentType) int32 {
	if int(t) < len(o.byType) {
		return o.byType[t] - 1
	}
	return -1
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
		o.seqs = append(o.seqs, 0)
		o.frames = append(o.frames, nil)
	}
	r := &o.recips[i]
	r.key, r.sink, r.live = s, sink, true
	o.index[s] = i
	o.gen++
}

// Detach stops routing to s and discards what it was owed this tick.
func (o *Outbox[S, E]) Detach(s S) {
	i, ok := o.index[s]
	if !ok {
		return
	}
	delete(o.index, s)
	o.gen++
	r := &o.recips[i]
	var zero S
	r.key, r.sink, r.live = zero, nil, false
	r.appeared, r.vanished, o.frames[i] = r.appeared[:0], r.vanished[:0], o.frames[i][:0]
	// An active entry stays in o.active until the flush, which skips dead
	// entries and frees them then: its index must not be reused while the
	// tick's bookkeeping may still name it.
	if !r.active {
		o.free = append(o.free, i)
	}
}

// MarkDirty records that e's component t changed this tick. Marking twice
// is the same as once. It panics on a type with no encoder: that is a
// program error, not a runtime condition.
func (o *Outbox[S, E]) MarkDirty(e E, t ComponentType) {
	enc := o.encoderIndex(t)
	if enc < 0 {
		panic("outbox: MarkDirty of unregistered component type")
	}
	last := o.lastMark[e]
	for m := last; m != 0; m = o.dirty[m-1].prev {
		if o.dirty[m-1].enc == enc {
			return
		}
	}
	if last != 0 {
		o.dirty[last-1].more = true
	}
	o.dirty = append(o.dirty, dirtyMark[E]{e: e, enc: enc, prev: last})
	o.lastMark[e] = int32(len(o.dirty))
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

// AddDeliveries records a Visibility drain: the same as Vanish and Appear
// for each event, with one subscriber lookup per delivery.
func (o *Outbox[S, E]) AddDeliveries(ds []interest.Delivery[S, E]) {
	for _, d := range ds {
		n := len(d.Vanished) + len(d.Appeared)
		if n == 0 {
			continue
		}
		i, ok := o.index[d.Subscriber]
		if !ok {
			o.dropped += n
			continue
		}
		r := &o.recips[i]
		r.vanished = append(r.vanished, d.Vanished...)
		r.appeared = append(r.appeared, d.Appeared...)
		o.activate(i)
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
	if o.indexed != nil {
		// The world does not change during a flush: read it once.
		o.epoch = o.indexed.SubscriberEpoch()
	}

	for _, i := range o.active {
		for _, v := range o.recips[i].vanished {
			o.frames[i] = append(o.frames[i], o.vanishFrame(v))
		}
	}
	for _, i := range o.active {
		// appendBurst may grow o.recips' inner slices but never o.recips.
		for _, e := range o.recips[i].appeared {
			o.appendBurst(i, e)
		}
	}
	for _, m := range o.dirty {
		o.fanOut(m)
	}
	for _, i := range o.active {
		r := &o.recips[i]
		if !r.live {
			r.active = false
			o.free = append(o.free, i)
			continue
		}
		if fs := o.frames[i]; len(fs) > 0 {
			o.out = o.out[:0]
			for _, f := range fs {
				o.out = append(o.out, o.arena[f.off:f.off+f.n:f.off+f.n])
				o.stats.BytesDelivered += int(f.n)
			}
			o.stats.FramesDelivered += len(fs)
			o.stats.Batches++
			r.sink.Deliver(tick, o.out)
		}
		r.active = false
		r.appeared, r.vanished, o.frames[i] = r.appeared[:0], r.vanished[:0], o.frames[i][:0]
	}
	clear(o.out) // do not keep the arena alive through the reused slice
	o.active = o.active[:0]
	o.dirty = o.dirty[:0]
	o.lastMark = resetMap(o.lastMark, &o.markPeak)
	o.ents = resetMap(o.ents, &o.entPeak)
	o.recs = o.recs[:0]
	clear(o.compTab) // drop Members slices
	o.compTab = o.compTab[:0]
	o.heads, o.vanishes, o.viewers, o.obsTab = o.heads[:0], o.vanishes[:0], o.viewers[:0], o.obsTab[:0]
	o.stats.BytesEncoded = len(o.arena)
	o.lastArena = len(o.arena)
	o.arena = nil
	return o.stats
}

// resetMap empties m for the next tick. A Go map keeps the table of its
// largest size, and clearing it walks that whole table, so after a burst
// (the first flush shows every subscriber its whole view at once) a map
// four times larger than this tick needed is replaced, not cleared.
// peak is the largest size since m was made.
func resetMap[K comparable, V any](m map[K]V, peak *int) map[K]V {
	n := len(m)
	*peak = max(*peak, n)
	if *peak > 1024 && n*4 < *peak {
		*peak = n
		return make(map[K]V, n)
	}
	clear(m)
	return m
}

// rec returns the index of e's record, creating it.
func (o *Outbox[S, E]) rec(e E) int32 {
	if i, ok := o.ents[e]; ok {
		return i
	}
	i := int32(len(o.recs))
	o.recs = append(o.recs, entRec{})
	o.ents[e] = i
	return i
}

func (o *Outbox[S, E]) put(start int) frameRef {
	o.stats.FramesEncoded++
	return frameRef{off: uint32(start), n: uint32(len(o.arena) - start)}
}

func (o *Outbox[S, E]) vanishFrame(v interest.Vanished[E]) frameRef {
	ri := o.rec(v.Entity)
	for n := o.recs[ri].vanishes; n != 0; n = o.vanishes[n-1].next {
		if o.vanishes[n-1].reason == v.Reason {
			return o.vanishes[n-1].ref
		}
	}
	start := len(o.arena)
	o.arena = AppendVanishFrame(o.arena, uint64(v.Entity), v.Reason)
	f := o.put(start)
	o.vanishes = append(o.vanishes, vanishNode{reason: v.Reason, ref: f, next: o.recs[ri].vanishes})
	o.recs[ri].vanishes = int32(len(o.vanishes))
	return f
}

// cached returns e's cache entry of encoder ei, allocating the entity's
// entries on first use. The pointer is valid until the next cached call.
func (o *Outbox[S, E]) cached(ri int32, ei int) *compEntry[S] {
	rec := &o.recs[ri]
	if rec.comps == 0 {
		n, k := len(o.compTab), len(o.encoders)
		o.compTab = slices.Grow(o.compTab, k)[:n+k]
		clear(o.compTab[n:])
		rec.comps = int32(n + 1)
	}
	return &o.compTab[int(rec.comps)-1+ei]
}

// look fills c with whether e has encoder ei's component and its audience.
func (o *Outbox[S, E]) look(c *compEntry[S], e E, ei int) {
	if c.known {
		return
	}
	enc := o.encoders[ei]
	c.known = true
	c.has = enc.Has(e)
	if c.has {
		c.aud = enc.Audience(e)
	}
}

func (o *Outbox[S, E]) encode(ei int, e E) frameRef {
	enc := o.encoders[ei]
	o.payload = enc.AppendPayload(o.payload[:0], e)
	o.stats.PayloadsEncoded++
	start := len(o.arena)
	o.arena = AppendComponentFrame(o.arena, uint64(e), enc.Type(), o.payload)
	return o.put(start)
}

func (o *Outbox[S, E]) appendBurst(i int32, e E) {
	ri := o.rec(e)
	if o.recs[ri].lastViewer == i+1 {
		// Appear called twice for the same viewer: one burst. A viewer's
		// bursts are built one after another, so the last viewer is
		// enough to tell.
		return
	}
	viewer := o.recips[i].key
	o.burst = o.burst[:0]
	for ei := range o.encoders {
		c := o.cached(ri, ei)
		o.look(c, e, ei)
		if !c.has || !o.admits(c.aud, e, viewer) {
			continue
		}
		if !c.encoded {
			c.ref, c.encoded = o.encode(ei, e), true
		}
		o.burst = append(o.burst, c.ref)
	}
	var head frameRef
	found := false
	for n := o.recs[ri].heads; n != 0; n = o.heads[n-1].next {
		if int(o.heads[n-1].n) == len(o.burst) {
			head, found = o.heads[n-1].ref, true
			break
		}
	}
	if !found {
		start := len(o.arena)
		o.arena = AppendAppearFrame(o.arena, uint64(e), len(o.burst))
		head = o.put(start)
		o.heads = append(o.heads, headNode{n: int32(len(o.burst)), ref: head, next: o.recs[ri].heads})
		o.recs[ri].heads = int32(len(o.heads))
	}
	o.frames[i] = append(o.frames[i], head)
	o.frames[i] = append(o.frames[i], o.burst...)
	o.viewers = append(o.viewers, viewerNode{r: i, next: o.recs[ri].viewers})
	rec := &o.recs[ri]
	rec.viewers = int32(len(o.viewers))
	rec.lastViewer = i + 1
}

// fanOut resolves the audience of one dirty component and appends its one
// frame to every recipient's batch.
func (o *Outbox[S, E]) fanOut(m dirtyMark[E]) {
	e, ei := m.e, int(m.enc)
	var c compEntry[S]
	ri, seen := o.ents[e]
	seen = seen && o.recs[ri].comps != 0 // a burst looked at e's components
	if seen {
		p := o.cached(ri, ei)
		o.look(p, e, ei)
		c = *p
	} else {
		// No burst touched e, and each (e, t) is dirty once: nothing will
		// ask for this entry again, so skip the cache.
		o.look(&c, e, ei)
	}
	if !c.has {
		return
	}
	o.seq++
	if seen {
		// Viewers that got e's burst this tick already have the current
		// value: mark them as served.
		for n := o.recs[ri].viewers; n != 0; n = o.viewers[n-1].next {
			o.seqs[o.viewers[n-1].r] = o.seq
		}
	}
	var rs []int32
	if c.aud.Kind == PublicInRange {
		rs = o.publicRecipients(m)
	} else {
		o.cands = o.cands[:0]
		switch c.aud.Kind {
		case OwnerOnly:
			if owner, ok := o.world.OwnerOf(e); ok {
				o.cands = append(o.cands, owner)
			}
		case Accounts:
			o.cands = append(o.cands, c.aud.Members...)
		case OwnerAndParty:
			if owner, ok := o.world.OwnerOf(e); ok {
				o.cands = append(o.cands, owner)
				o.cands = o.world.AppendParty(o.cands, owner)
			}
		}
		rs = o.rbuf[:0]
		for _, s := range o.cands {
			rs = append(rs, o.recipientOf(s))
		}
		o.rbuf = rs
	}
	var ref frameRef
	encoded := false
	for _, i := range rs {
		if i < 0 {
			o.stats.Dropped++
			continue
		}
		if o.seqs[i] == o.seq {
			continue // named twice (owner also in party, duplicate member), or appeared
		}
		o.seqs[i] = o.seq
		if !encoded {
			if c.encoded { // a burst encoded it already
				ref = c.ref
			} else {
				ref = o.encode(ei, e)
			}
			encoded = true
		}
		if len(o.frames[i]) == 0 {
			// A recipient with frames is active already (activate checks
			// anyway); this spares a read of its wide record per message.
			o.activate(i)
		}
		o.frames[i] = append(o.frames[i], ref)
	}
}

// publicRecipients returns the recipients (−1: no sink) of everyone who
// sees m's entity. Who sees an entity cannot change during a flush, so for
// an entity with several dirty components the answer is resolved once and
// kept in its record.
func (o *Outbox[S, E]) publicRecipients(m dirtyMark[E]) []int32 {
	multi := m.prev != 0 || m.more
	var ri int32
	dst := o.rbuf[:0]
	if multi {
		ri = o.rec(m.e)
		if rec := o.recs[ri]; rec.obs != 0 {
			return o.obsTab[rec.obs-1 : rec.obs-1+rec.obsN]
		}
		dst = o.obsTab
	}
	n0 := len(dst)
	if o.indexed != nil {
		o.dense = o.indexed.AppendObserverIndices(o.dense[:0], m.e)
		for _, d := range o.dense {
			dst = append(dst, o.recipientAt(d))
		}
	} else {
		o.cands = o.world.AppendObserversOf(o.cands[:0], m.e)
		for _, s := range o.cands {
			dst = append(dst, o.recipientOf(s))
		}
	}
	if !multi {
		o.rbuf = dst
		return dst
	}
	o.obsTab = dst
	rec := &o.recs[ri]
	rec.obs, rec.obsN = int32(n0+1), int32(len(dst)-n0)
	return dst[n0:]
}

// recipientOf returns the recipient of s, or -1 if s has no sink.
func (o *Outbox[S, E]) recipientOf(s S) int32 {
	if i, ok := o.index[s]; ok {
		return i
	}
	return -1
}

// recipientAt returns the recipient of the world's dense subscriber index
// d, or -1 if that subscriber has no sink.
func (o *Outbox[S, E]) recipientAt(d int32) int32 {
	if int(d) >= len(o.byDense) {
		o.byDense = append(o.byDense, make([]denseRef[S], int(d)+1-len(o.byDense))...)
	}
	ref := &o.byDense[d]
	if ref.gen == o.gen && ref.epoch == o.epoch {
		return ref.recip // neither our index nor the world's moved
	}
	key := o.indexed.SubscriberAt(d)
	ref.epoch = o.epoch
	if ref.gen != o.gen || ref.key != key {
		ref.key, ref.gen, ref.recip = key, o.gen, -1
		if i, ok := o.index[key]; ok {
			ref.recip = i
		}
	}
	return ref.recip
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
