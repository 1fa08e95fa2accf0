package interest

import (
	"errors"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

// columnWorld stands for the game: materialising a column spawns one mob
// with a fresh id, dematerialising it destroys that mob.
type columnWorld struct {
	next  uint64
	mobs  map[Column]uint64
	spawn int
	drop  int
}

func (g *columnWorld) apply(ch ResidencyChanges) {
	for _, c := range ch.Dematerialised {
		delete(g.mobs, c)
		g.drop++
	}
	for _, c := range ch.Materialised {
		g.next++
		g.mobs[c] = g.next
		g.spawn++
	}
}

func newResidency(t *testing.T, cfg ResidencyConfig) (*Residency, *Subscriptions[uint64], *columnWorld) {
	t.Helper()
	w := torus.Default()
	r, err := NewResidency(w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSubscriptions[uint64](w)
	FollowClients(r, s)
	return r, s, &columnWorld{mobs: make(map[Column]uint64)}
}

func TestResidencyMaterialisesAColumnOnceForThreeSlabsAndTwoPlayers(t *testing.T) {
	r, s, g := newResidency(t, ResidencyConfig{})
	col := Column{X: 7, Y: 9}
	for _, player := range []uint64{1, 2} {
		for slab := int32(-1); slab <= 1; slab++ {
			c := ChunkPos{X: col.X, Y: col.Y, Slab: slab}
			s.Announce(player, c)
			s.MarkSent(player, c)
		}
	}
	if h := r.Holders(col); h != 1 {
		t.Fatalf("holders = %d, want 1 (all clients are one holder)", h)
	}
	g.apply(r.Commit())
	if g.spawn != 1 || !r.IsResident(col) {
		t.Fatalf("materialised %d times, want once", g.spawn)
	}
	g.apply(r.Commit())
	if g.spawn != 1 {
		t.Fatal("a second commit materialised again")
	}
	// One player leaves: still held by the other.
	s.Forget(1)
	g.apply(r.Commit())
	if g.drop != 0 || !r.IsResident(col) {
		t.Fatal("column dropped while a client still holds it")
	}
	s.Forget(2)
	g.apply(r.Commit())
	if g.drop != 1 || r.IsResident(col) || r.Holders(col) != 0 {
		t.Fatalf("dropped %d, resident %v", g.drop, r.IsResident(col))
	}
}

func TestResidencyKeepsIDsOnReleaseAndReholdInOneTick(t *testing.T) {
	r, s, g := newResidency(t, ResidencyConfig{MaterialiseBudget: 200})
	c := ChunkPos{X: 3, Y: 3}
	s.Announce(1, c)
	s.MarkSent(1, c)
	g.apply(r.Commit())
	id := g.mobs[ColumnOf(c)]
	// The client releases the chunk and takes it back within the tick.
	s.Unsend(1, c)
	if r.Holders(ColumnOf(c)) != 0 {
		t.Fatal("release not counted immediately")
	}
	s.MarkSent(1, c)
	g.apply(r.Commit())
	if g.drop != 0 || g.spawn != 1 || g.mobs[ColumnOf(c)] != id {
		t.Fatalf("id changed: spawn=%d drop=%d id %d→%d", g.spawn, g.drop, id, g.mobs[ColumnOf(c)])
	}
	// The same hand-over between an anchor and the clients.
	r.SetAnchor(42, Column{X: 100, Y: 100})
	g.apply(r.Commit())
	col := Column{X: 103, Y: 100}
	id = g.mobs[col]
	r.RemoveAnchor(42)
	s.Announce(1, ChunkPos{X: col.X, Y: col.Y})
	s.MarkSent(1, ChunkPos{X: col.X, Y: col.Y})
	ch := r.Commit()
	g.apply(ch)
	if g.mobs[col] != id || !r.IsResident(col) {
		t.Fatal("column handed from an anchor to the clients lost its ids")
	}
	if len(ch.Dematerialised) != 120 {
		t.Fatalf("dematerialised %d, want the other 120 columns", len(ch.Dematerialised))
	}
}

func TestResidencyRespectsTheDrainBudget(t *testing.T) {
	r, _, g := newResidency(t, ResidencyConfig{AnchorRadius: 1, MaterialiseBudget: 4})
	r.SetAnchor(1, Column{X: 0, Y: 0}) // 9 columns
	var sizes []int
	for range 4 {
		ch := r.Commit()
		sizes = append(sizes, len(ch.Materialised), ch.Waiting)
		g.apply(ch)
	}
	if want := []int{4, 5, 4, 1, 1, 0, 0, 0}; !slices.Equal(sizes, want) {
		t.Fatalf("(materialised, waiting) per commit = %v, want %v", sizes, want)
	}
	// A queued column released before its turn is dropped, not spent.
	r.SetAnchor(2, Column{X: 50, Y: 50})
	r.RemoveAnchor(2)
	r.SetAnchor(3, Column{X: 80, Y: 80})
	ch := r.Commit()
	if len(ch.Materialised) != 4 || ch.Materialised[0] != (Column{X: 79, Y: 79}) {
		t.Fatalf("materialised %v", ch.Materialised)
	}
}

func TestResidencyAnchorsAreSeparateHolders(t *testing.T) {
	r, s, _ := newResidency(t, ResidencyConfig{AnchorRadius: 2})
	col := Column{X: 10, Y: 10}
	r.SetAnchor(1, col) // a master
	r.SetAnchor(2, col) // its pet
	s.Announce(9, ChunkPos{X: 10, Y: 10})
	s.MarkSent(9, ChunkPos{X: 10, Y: 10})
	if h := r.Holders(col); h != 3 {
		t.Fatalf("holders = %d, want 3", h)
	}
	r.SetAnchor(1, Column{X: 11, Y: 10}) // moving by one keeps the overlap
	if h := r.Holders(Column{X: 8, Y: 10}); h != 1 {
		t.Fatalf("column left behind by anchor 1: holders = %d, want 1", h)
	}
	if h := r.Holders(Column{X: 13, Y: 10}); h != 1 {
		t.Fatalf("column gained by anchor 1: holders = %d, want 1", h)
	}
}

func TestResidencyWrapsAtTheSeam(t *testing.T) {
	r, _, _ := newResidency(t, ResidencyConfig{AnchorRadius: 2, MaterialiseBudget: 100})
	r.SetAnchor(1, Column{X: 3999, Y: 0})
	ch := r.Commit()
	for _, c := range []Column{{X: 1, Y: 2}, {X: 3997, Y: 3998}} {
		if !r.IsResident(c) {
			t.Fatalf("%v across the seam not resident", c)
		}
	}
	if n := len(ch.Materialised); n != 25 || ch.Waiting != 0 {
		t.Fatalf("held %d columns, want 25", n)
	}
	// Moving across the seam releases the far side only.
	r.SetAnchor(1, Column{X: -4000 + 1, Y: 0})
	if r.Holders(Column{X: 3997, Y: 0}) != 0 || r.Holders(Column{X: 3, Y: 0}) != 1 {
		t.Fatal("anchor move across the seam miscounted")
	}
}

func TestResidencyConfigValidate(t *testing.T) {
	w := torus.Default()
	for _, cfg := range []ResidencyConfig{
		{AnchorRadius: -1, MaterialiseBudget: 1},
		{AnchorRadius: 1, MaterialiseBudget: -3},
		{AnchorRadius: 2000, MaterialiseBudget: 1},
	} {
		_, err := NewResidency(w, cfg)
		if !errors.Is(err, errcode.ErrConfigInvalid) {
			t.Fatalf("%+v: err = %v", cfg, err)
		}
	}
	if d := (ResidencyConfig{}).WithDefaults(); d.AnchorRadius != 5 || d.MaterialiseBudget != 8 {
		t.Fatalf("defaults = %+v", d)
	}
}

func TestResidencyQueueForgetsColumnsReleasedWhileWaiting(t *testing.T) {
	r, _, _ := newResidency(t, ResidencyConfig{AnchorRadius: 1, MaterialiseBudget: 2})
	r.SetAnchor(1, Column{X: 20, Y: 20}) // 9 columns queued
	if ch := r.Commit(); len(ch.Materialised) != 2 || ch.Waiting != 7 {
		t.Fatalf("first commit: %d materialised, %d waiting", len(ch.Materialised), ch.Waiting)
	}
	r.SetAnchor(1, Column{X: 21, Y: 20}) // 3 columns left behind, 3 new
	ch := r.Commit()
	// (19,19) was materialised and goes; (19,20) and (19,21) were waiting
	// and leave the queue without spending the budget.
	if !slices.Equal(ch.Dematerialised, []Column{{X: 19, Y: 19}}) ||
		!slices.Equal(ch.Materialised, []Column{{X: 21, Y: 19}, {X: 20, Y: 20}}) || ch.Waiting != 6 {
		t.Fatalf("second commit: %+v", ch)
	}
	for range 10 {
		r.Commit()
	}
	for dx := int32(20); dx <= 22; dx++ {
		for dy := int32(19); dy <= 21; dy++ {
			if !r.IsResident(Column{X: dx, Y: dy}) {
				t.Fatalf("held column (%d,%d) never materialised", dx, dy)
			}
		}
	}
	if r.IsResident(Column{X: 19, Y: 21}) {
		t.Fatal("a column released before its turn was materialised")
	}
}
