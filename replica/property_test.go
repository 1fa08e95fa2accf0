package replica

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
)

// The owner's truth about one entity.
type trueEntity struct {
	alive bool
	chunk int // index into propChunks
	stamp Stamp
	comps map[outbox.ComponentType]string
}

// Five chunks in a row across the x seam; the observer holds the middle
// three. Raw coordinates go both ways round, so the store must normalise.
var propChunks = []torus.ChunkPos{{X: 3998}, {X: -1}, {X: 0}, {X: 4001}, {X: 2}}

func propHeld(i int) bool { return i >= 1 && i <= 3 }

type item struct {
	u     *Update
	chunk int      // snapshot of propChunks[chunk] when u == nil
	snap  []Update // its entries
}

type batch struct {
	seq   uint64
	items []item
}

type owner struct {
	rng  *rand.Rand
	ents map[uint64]*trueEntity
	ids  []uint64
	next uint64
}

func (o *owner) burstOf(e uint64) []byte {
	te := o.ents[e]
	ts := make([]outbox.ComponentType, 0, len(te.comps))
	for t := range te.comps {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	b := outbox.AppendAppearFrame(nil, e, len(ts))
	for _, t := range ts {
		b = outbox.AppendComponentFrame(b, e, t, []byte(te.comps[t]))
	}
	return b
}

func (o *owner) update(e uint64, frames []byte) item {
	te := o.ents[e]
	return item{u: &Update{Entity: e, Stamp: te.stamp, Chunk: propChunks[te.chunk], Frames: frames}}
}

func (o *owner) snapshot(c int) item {
	it := item{chunk: c}
	for _, e := range o.ids {
		if te := o.ents[e]; te.alive && te.chunk == c {
			it.snap = append(it.snap, Update{Entity: e, Stamp: te.stamp, Frames: o.burstOf(e)})
		}
	}
	return it
}

// step makes one random change and returns what the observer is sent.
func (o *owner) step() []item {
	r := o.rng
	var alive []uint64
	for _, e := range o.ids {
		if o.ents[e].alive {
			alive = append(alive, e)
		}
	}
	op := r.IntN(10)
	if len(alive) < 4 || op == 0 && len(alive) < 30 {
		o.next++
		e := o.next
		te := &trueEntity{alive: true, chunk: r.IntN(len(propChunks)), stamp: Stamp{1, 1},
			comps: map[outbox.ComponentType]string{1: fmt.Sprint("p", r.IntN(100)), 2: fmt.Sprint("h", r.IntN(100))}}
		o.ents[e], o.ids = te, append(o.ids, e)
		if propHeld(te.chunk) {
			return []item{o.update(e, o.burstOf(e))}
		}
		return nil
	}
	e := alive[r.IntN(len(alive))]
	te := o.ents[e]
	te.stamp.Seq++
	switch {
	case op <= 4: // move
		from := te.chunk
		te.chunk = r.IntN(len(propChunks))
		te.comps[1] = fmt.Sprint("p", r.IntN(1000))
		switch {
		case propHeld(from) && propHeld(te.chunk):
			return []item{o.update(e, outbox.AppendComponentFrame(nil, e, 1, []byte(te.comps[1])))}
		case propHeld(from):
			return []item{o.update(e, outbox.AppendVanishFrame(nil, e, interest.OutOfSight))}
		case propHeld(te.chunk):
			return []item{o.update(e, o.burstOf(e))}
		}
	case op <= 7: // change a component, perhaps one the entity never had
		t := outbox.ComponentType(2 + r.IntN(2))
		te.comps[t] = fmt.Sprint("v", r.IntN(1000))
		if propHeld(te.chunk) {
			return []item{o.update(e, outbox.AppendComponentFrame(nil, e, t, []byte(te.comps[t])))}
		}
	case op == 8: // dies
		te.alive = false
		if propHeld(te.chunk) {
			return []item{o.update(e, outbox.AppendVanishFrame(nil, e, interest.Death))}
		}
	default: // handed to another writer: a new epoch, whose first message is a burst
		te.stamp = Stamp{Epoch: te.stamp.Epoch + 1, Seq: 1}
		if propHeld(te.chunk) {
			return []item{o.update(e, o.burstOf(e))}
		}
	}
	return nil
}

// TestPropertyLossyStreamConverges: a random owner stream with dropped,
// duplicated and reordered batches, gap-driven and periodic resubscribes.
// No applied update is ever older than one applied before it for the same
// entity, and after the last snapshot the store is the owner's truth: no
// zombie, no missing ghost, every component as the owner has it.
func TestPropertyLossyStreamConverges(t *testing.T) {
	seed := testseed.Seed(t)
	for run := range 20 {
		r := rand.New(rand.NewPCG(seed, uint64(run)))
		propRun(t, r, 400)
	}
}

func propRun(t *testing.T, r *rand.Rand, steps int) {
	t.Helper()
	o := &owner{rng: r, ents: map[uint64]*trueEntity{}}
	s := newStore(t)
	maxApplied := map[uint64]Stamp{}
	var seq uint64
	resub := map[int]bool{}
	var delayed []batch // delivered late (reordered or duplicated)

	deliver := func(b batch) {
		if err := s.Batch("owner", b.seq); err != nil {
			for c := range propChunks {
				if propHeld(c) {
					resub[c] = true
				}
			}
		}
		for _, it := range b.items {
			if it.u != nil {
				applied, err := s.Apply(*it.u)
				if err != nil {
					t.Fatal(err)
				}
				if applied {
					if m, ok := maxApplied[it.u.Entity]; ok && !m.Before(it.u.Stamp) {
						t.Fatalf("entity %d: applied %v after %v", it.u.Entity, it.u.Stamp, m)
					}
					maxApplied[it.u.Entity] = it.u.Stamp
				}
				continue
			}
			if err := s.Replace(propChunks[it.chunk], it.snap); err != nil {
				t.Fatal(err)
			}
			for _, en := range it.snap {
				if st, _, ok := s.Has(en.Entity); ok {
					if m, seen := maxApplied[en.Entity]; seen && st.Before(m) {
						t.Fatalf("entity %d: snapshot moved it back to %v from %v", en.Entity, st, m)
					}
					maxApplied[en.Entity] = st
				}
			}
		}
		checkIndex(t, s)
		s.Drain(nil)
	}
	send := func(b batch, faults bool) {
		switch f := r.IntN(20); {
		case !faults:
			deliver(b)
		case f < 2: // dropped
		case f < 3: // duplicated: now and again later
			deliver(b)
			delayed = append(delayed, b)
		case f < 4: // reordered: overtaken by what follows
			delayed = append(delayed, b)
		default:
			deliver(b)
		}
	}
	for i := range steps {
		seq++
		b := batch{seq: seq}
		// The owner answers resubscribes in the stream, where it takes them.
		for c := range propChunks {
			if resub[c] || i%50 == 49 && propHeld(c) {
				delete(resub, c)
				b.items = append(b.items, o.snapshot(c))
			}
		}
		for range 1 + r.IntN(4) {
			b.items = append(b.items, o.step()...)
		}
		send(b, true)
		if len(delayed) > 0 && r.IntN(3) == 0 {
			d := delayed[0]
			delayed = delayed[1:]
			deliver(d)
		}
	}
	for _, d := range delayed { // the late ones all arrive
		deliver(d)
	}
	// The last resubscribe, on a healed link.
	seq++
	b := batch{seq: seq}
	for c := range propChunks {
		if propHeld(c) {
			b.items = append(b.items, o.snapshot(c))
		}
	}
	send(b, false)

	st := s.Stats()
	if st.Gaps == 0 || st.Stale == 0 {
		t.Fatalf("the faults were not exercised: %+v", st)
	}
	want := 0
	for _, e := range o.ids {
		te := o.ents[e]
		gst, gc, ok := s.Has(e)
		if !te.alive || !propHeld(te.chunk) {
			if ok {
				t.Fatalf("zombie: entity %d (alive %v, chunk %v) has a ghost", e, te.alive, propChunks[te.chunk])
			}
			continue
		}
		want++
		if !ok {
			t.Fatalf("missing ghost: entity %d in %v", e, propChunks[te.chunk])
		}
		if gst != te.stamp || gc != s.world.NormaliseChunk(propChunks[te.chunk]) {
			t.Fatalf("entity %d: ghost at %v %v, owner at %v %v", e, gst, gc, te.stamp, propChunks[te.chunk])
		}
		if got := payloads(t, s, e); !mapsEqual(got, te.comps) {
			t.Fatalf("entity %d: ghost %v, owner %v", e, got, te.comps)
		}
	}
	if s.Len() != want {
		t.Fatalf("%d ghosts, owner has %d in view", s.Len(), want)
	}
}

// checkIndex: every ghost is in exactly its chunk's residents, chunks are
// normalised, and no chunk lists a ghost that is not there.
func checkIndex(t *testing.T, s *Store) {
	t.Helper()
	n := 0
	for c, rs := range s.chunks {
		if c != s.world.NormaliseChunk(c) || len(rs) == 0 {
			t.Fatalf("chunk key %v (%d residents)", c, len(rs))
		}
		for i, e := range rs {
			g, ok := s.ghosts[e]
			if !ok || g.chunk != c || g.slot != i {
				t.Fatalf("chunk %v lists %d at %d, ghost %+v", c, e, i, g)
			}
			n++
		}
	}
	if n != len(s.ghosts) {
		t.Fatalf("%d residents, %d ghosts", n, len(s.ghosts))
	}
}
