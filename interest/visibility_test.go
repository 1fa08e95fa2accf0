package interest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/entityid"
	"github.com/shardwise/shardwise/torus"
)

type eid uint64

type visFixture struct {
	world torus.World
	subs  *Subscriptions[uint64]
	vis   *Visibility[uint64, eid]
}

func newVis(t testing.TB) *visFixture {
	t.Helper()
	w := torus.Default()
	subs := NewSubscriptions[uint64](w)
	return &visFixture{world: w, subs: subs, vis: NewVisibility[uint64, eid](subs)}
}

// hold announces and sends chunks to sub.
func (f *visFixture) hold(sub uint64, cs ...ChunkPos) {
	for _, c := range cs {
		f.subs.Announce(sub, c)
		f.subs.MarkSent(sub, c)
	}
}

func (f *visFixture) at(e eid, x, y, z float64) bool {
	return f.vis.Reindex(e, f.world.ChunkOf(torus.Pos{X: x, Y: y, Z: z}))
}

// drained renders a drain as "sub: +a +b -c(reason)" lines for comparison.
func drained[S comparable, E Entity](ds []Delivery[S, E]) []string {
	var out []string
	for _, d := range ds {
		line := fmt.Sprint(d.Subscriber, ":")
		for _, e := range d.Appeared {
			line += fmt.Sprint(" +", uint64(e))
		}
		for _, v := range d.Vanished {
			line += fmt.Sprint(" -", uint64(v.Entity), "(", v.Reason, ")")
		}
		out = append(out, line)
	}
	return out
}

func expectDrain(t *testing.T, f *visFixture, want ...string) {
	t.Helper()
	got := drained(f.vis.Drain())
	if !slices.Equal(got, want) {
		t.Fatalf("drain = %q, want %q", got, want)
	}
}

func TestFirstReindexIsATransitionFromNothing(t *testing.T) {
	f := newVis(t)
	f.hold(1, ChunkPos{X: 2, Y: 3})
	if !f.at(10, 70, 100, 10) {
		t.Fatal("first Reindex reported no change")
	}
	expectDrain(t, f, "1: +10")
	if got := f.vis.AppendResidents(nil, ChunkPos{X: 2, Y: 3}); !slices.Equal(got, []eid{10}) {
		t.Fatalf("residents = %v", got)
	}
}

func TestMovingInsideAChunkIsSilent(t *testing.T) {
	f := newVis(t)
	f.hold(1, ChunkPos{})
	f.at(10, 1, 1, 1)
	f.vis.Drain()
	for _, p := range [][3]float64{{31.9, 1, 1}, {0, 31.99, 255.9}, {16, 16, 0}} {
		if f.at(10, p[0], p[1], p[2]) {
			t.Fatalf("move to %v inside chunk 0 reported a chunk change", p)
		}
	}
	expectDrain(t, f)
}

func TestCrossingX31To32(t *testing.T) {
	f := newVis(t)
	f.hold(1, ChunkPos{X: 0})
	f.hold(2, ChunkPos{X: 1})
	f.at(10, 31, 5, 5)
	expectDrain(t, f, "1: +10")
	if !f.at(10, 32, 5, 5) {
		t.Fatal("x 31→32 did not change chunk")
	}
	expectDrain(t, f, "1: -10(out-of-sight)", "2: +10")
	if c, _ := f.vis.ChunkOf(10); c != (ChunkPos{X: 1}) {
		t.Fatalf("chunk = %v", c)
	}
}

func TestCrossingTheSlabBoundary(t *testing.T) {
	f := newVis(t)
	f.hold(1, ChunkPos{Slab: 0})
	f.hold(2, ChunkPos{Slab: 1})
	f.at(10, 5, 5, 255.5)
	expectDrain(t, f, "1: +10")
	f.at(10, 5, 5, 256)
	expectDrain(t, f, "1: -10(out-of-sight)", "2: +10")
	f.at(10, 5, 5, -0.5) // below ground: slab −1, held by nobody
	expectDrain(t, f, "2: -10(out-of-sight)")
	if c, _ := f.vis.ChunkOf(10); c.Slab != -1 {
		t.Fatalf("slab = %d, want -1", c.Slab)
	}
}

func TestNegativeCoordinates(t *testing.T) {
	f := newVis(t)
	f.hold(1, ChunkPos{X: 3999, Y: 3999})
	f.at(10, -0.5, -31.5, 0) // chunk (−1, −1) is (3999, 3999)
	expectDrain(t, f, "1: +10")
	f.vis.Reindex(11, ChunkPos{X: -1, Y: -4001})
	expectDrain(t, f, "1: +11")
	if got := f.vis.AppendResidents(nil, ChunkPos{X: 7999, Y: 3999}); !slices.Equal(got, []eid{10, 11}) {
		t.Fatalf("residents = %v", got)
	}
}

func TestObserverHoldingAChunkWithTwoResidentsGetsBoth(t *testing.T) {
	f := newVis(t)
	c := ChunkPos{X: 50, Y: 50}
	f.vis.Reindex(21, c)
	f.vis.Reindex(20, c)
	f.vis.Reindex(22, ChunkPos{X: 51, Y: 50})
	expectDrain(t, f) // nobody holds anything yet
	f.hold(1, c)
	expectDrain(t, f, "1: +20 +21")
	if got := f.vis.ObserversOf(20); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("observers = %v", got)
	}
	if got := f.vis.ObserversOf(22); len(got) != 0 {
		t.Fatalf("observers of an unheld entity = %v", got)
	}
}

func TestUnsentChunkVanishesItsResidents(t *testing.T) {
	f := newVis(t)
	c := ChunkPos{X: 50, Y: 50}
	f.hold(1, c)
	f.vis.Reindex(20, c)
	f.vis.Reindex(21, c)
	f.vis.Drain()
	f.subs.Unsend(1, c)
	expectDrain(t, f, "1: -20(out-of-sight) -21(out-of-sight)")
}

func TestWalkingIntoOutOfAndBetweenHeldChunks(t *testing.T) {
	f := newVis(t)
	a, b, c := ChunkPos{X: 10, Y: 10}, ChunkPos{X: 11, Y: 10}, ChunkPos{X: 12, Y: 10}
	f.hold(1, a, b) // 1 holds a and b
	f.hold(2, b, c) // 2 holds b and c
	f.vis.Reindex(5, ChunkPos{X: 9, Y: 10})
	expectDrain(t, f)
	f.vis.Reindex(5, a) // into a held chunk
	expectDrain(t, f, "1: +5")
	f.vis.Reindex(5, b) // between held chunks for 1: silent; into for 2
	expectDrain(t, f, "2: +5")
	f.vis.Reindex(5, c) // out for 1, between for 2
	expectDrain(t, f, "1: -5(out-of-sight)")
	f.vis.Reindex(5, ChunkPos{X: 13, Y: 10}) // out for 2
	expectDrain(t, f, "2: -5(out-of-sight)")
}

func TestMovedThenDestroyedInOneTickDrainsNothing(t *testing.T) {
	f := newVis(t)
	a, b := ChunkPos{X: 1}, ChunkPos{X: 2}
	f.hold(1, b)
	f.vis.Reindex(5, a)
	f.vis.Drain()
	f.vis.Reindex(5, b)
	f.vis.Remove(5, Death)
	expectDrain(t, f)
	if f.vis.Len() != 0 || len(f.vis.AppendResidents(nil, b)) != 0 {
		t.Fatal("destroyed entity still indexed")
	}
}

func TestDestroyCarriesItsReason(t *testing.T) {
	f := newVis(t)
	a := ChunkPos{X: 1}
	f.hold(1, a)
	f.hold(2, a)
	f.vis.Reindex(5, a)
	f.vis.Reindex(6, a)
	f.vis.Drain()
	f.vis.Remove(5, Death)
	f.vis.Remove(6, Gone)
	expectDrain(t, f, "1: -5(death) -6(gone)", "2: -5(death) -6(gone)")
	if f.vis.Remove(5, Gone) {
		t.Fatal("second Remove reported a change")
	}
}

func TestAppearAndVanishCancelWithinATick(t *testing.T) {
	f := newVis(t)
	a := ChunkPos{X: 1}
	f.hold(1, a)
	f.vis.Reindex(5, a)
	f.vis.Drain()
	// Unsent and sent again: the client still has the entity.
	f.subs.Unsend(1, a)
	f.subs.MarkSent(1, a)
	// Walked out and back in.
	f.vis.Reindex(5, ChunkPos{X: 2})
	f.vis.Reindex(5, a)
	expectDrain(t, f)
	// Walked out, back in, and died: the death is what the client hears.
	f.vis.Reindex(5, ChunkPos{X: 2})
	f.vis.Reindex(5, a)
	f.vis.Remove(5, Death)
	expectDrain(t, f, "1: -5(death)")
}

func TestForgetThenResubscribeInOneTickStartsFromNothing(t *testing.T) {
	f := newVis(t)
	a := ChunkPos{X: 1}
	f.hold(1, a)
	f.vis.Reindex(5, a)
	f.vis.Drain()
	f.subs.Forget(1) // disconnect…
	f.hold(1, a)     // …and reconnect within the tick: a fresh client
	expectDrain(t, f, "1: +5")
}

func TestEvictAndAdoptAreSilent(t *testing.T) {
	f := newVis(t)
	a := ChunkPos{X: 1}
	f.hold(1, a)
	f.vis.Reindex(5, a)
	f.vis.Drain()
	if !f.vis.Evict(5) {
		t.Fatal("Evict of a known entity reported false")
	}
	f.vis.Adopt(5, a)
	expectDrain(t, f)
	if got := f.vis.ObserversOf(5); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("observers after adopt = %v", got)
	}
}

func TestSeeEachOtherAcrossTheSeam(t *testing.T) {
	f := newVis(t)
	// The observer stands at x = 127,990 and holds its default view.
	anchor := f.world.ChunkOf(torus.Pos{X: 127_990, Y: 64_000, Z: 10})
	var m Manifest
	f.subs.ViewManifest(1, anchor, DefaultView(), &m)
	f.subs.Apply(1, m)
	for _, c := range f.subs.AppendUnsent(nil, 1) {
		f.subs.MarkSent(1, c)
	}
	f.at(77, 5, 64_000, 10)
	expectDrain(t, f, "1: +77")
	if got := f.vis.ObserversOf(77); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("observers = %v", got)
	}
	// Crossing the seam itself (x 5 → 127,995) is a move between held
	// chunks: silent.
	f.at(77, 127_995, 64_000, 10)
	expectDrain(t, f)
}

// The world's own id type plugs in as E, and the tagged key as S.
func TestSnowflakeIDsAndTaggedKeys(t *testing.T) {
	subs := NewSubscriptions[Subscriber](torus.Default())
	vis := NewVisibility[Subscriber, entityid.ID](subs)
	id, err := entityid.Make(1234, 7, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := ChunkPos{X: 1, Y: 1}
	subs.Announce(Node(2), c)
	subs.MarkSent(Node(2), c)
	vis.Reindex(id, c)
	ds := vis.Drain()
	if len(ds) != 1 || ds[0].Subscriber != Node(2) || !slices.Equal(ds[0].Appeared, []entityid.ID{id}) {
		t.Fatalf("drain = %+v", ds)
	}
}

// AppendObserverIndices names, through SubscriberAt, exactly the
// subscribers AppendObserversOf names, including after a forgotten
// subscriber's index was reused by another key.
func TestObserverIndicesNameTheObservers(t *testing.T) {
	f := newVis(t)
	c := f.world.ChunkOf(torus.Pos{X: 100, Y: 100})
	for _, s := range []uint64{1, 2, 3} {
		f.subs.Announce(s, c)
		f.subs.MarkSent(s, c)
	}
	f.at(77, 100, 100, 0)
	check := func(want ...uint64) {
		t.Helper()
		var got []uint64
		for _, i := range f.vis.AppendObserverIndices(nil, 77) {
			got = append(got, f.vis.SubscriberAt(i))
		}
		keys := f.vis.ObserversOf(77)
		slices.Sort(got)
		slices.Sort(keys)
		if !slices.Equal(got, want) || !slices.Equal(keys, want) {
			t.Fatalf("through indices %v, by key %v, want %v", got, keys, want)
		}
	}
	check(1, 2, 3)
	f.subs.Forget(2)
	check(1, 3)
	f.subs.Announce(9, c) // takes the forgotten index
	f.subs.MarkSent(9, c)
	check(1, 3, 9)
	if got := f.vis.AppendObserverIndices(nil, 12345); len(got) != 0 {
		t.Fatalf("an unknown entity has observers %v", got)
	}
}
