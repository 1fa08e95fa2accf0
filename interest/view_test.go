package interest

import (
	"errors"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

// follow applies the view manifest around anchor and sends everything new.
func follow(s *Subscriptions[uint64], sub uint64, anchor ChunkPos, v View) Manifest {
	var m Manifest
	s.ViewManifest(sub, anchor, v, &m)
	out := Manifest{Added: append([]ChunkPos(nil), m.Added...), Removed: append([]ChunkPos(nil), m.Removed...)}
	s.Apply(sub, m)
	for _, c := range s.AppendUnsent(nil, sub) {
		s.MarkSent(sub, c)
	}
	return out
}

func TestDefaultViewIs11By11By3(t *testing.T) {
	s := NewSubscriptions[uint64](torus.Default())
	m := follow(s, 1, ChunkPos{X: 100, Y: 100, Slab: 0}, DefaultView())
	if len(m.Added) != 363 || len(m.Removed) != 0 {
		t.Fatalf("added %d removed %d, want 363 and 0", len(m.Added), len(m.Removed))
	}
	for _, c := range []ChunkPos{{X: 95, Y: 95, Slab: -1}, {X: 105, Y: 105, Slab: 1}} {
		if !s.IsSent(1, c) {
			t.Fatalf("%v missing from the view", c)
		}
	}
	for _, c := range []ChunkPos{{X: 94, Y: 100}, {X: 100, Y: 106}, {X: 100, Y: 100, Slab: 2}} {
		if s.IsAnnounced(1, c) {
			t.Fatalf("%v outside the view announced", c)
		}
	}
}

func TestViewReleasesOnlyPastTheMargin(t *testing.T) {
	s := NewSubscriptions[uint64](torus.Default())
	v := DefaultView()
	follow(s, 1, ChunkPos{X: 100, Y: 100}, v)
	// One column east: 11 columns × 3 slabs are new, nothing released (the
	// west edge is 6 away, inside the margin).
	m := follow(s, 1, ChunkPos{X: 101, Y: 100}, v)
	if len(m.Added) != 33 || len(m.Removed) != 0 {
		t.Fatalf("step 1: added %d removed %d, want 33 and 0", len(m.Added), len(m.Removed))
	}
	// Back west: nothing to add, nothing to release (pacing is free).
	m = follow(s, 1, ChunkPos{X: 100, Y: 100}, v)
	if len(m.Added) != 0 || len(m.Removed) != 0 {
		t.Fatalf("pacing: added %d removed %d, want 0 and 0", len(m.Added), len(m.Removed))
	}
	// Two east of the start: column 95 is 7 away and goes; 94 never came.
	m = follow(s, 1, ChunkPos{X: 102, Y: 100}, v)
	if len(m.Added) != 33 || len(m.Removed) != 33 {
		t.Fatalf("step 2: added %d removed %d, want 33 and 33", len(m.Added), len(m.Removed))
	}
	for _, c := range m.Removed {
		if c.X != 95 {
			t.Fatalf("released %v, want only column 95", c)
		}
	}
	// Up one slab: the slab −1 layer is 2 slabs away, inside the margin.
	m = follow(s, 1, ChunkPos{X: 102, Y: 100, Slab: 1}, v)
	if len(m.Added) != 121 || len(m.Removed) != 0 {
		t.Fatalf("slab up: added %d removed %d, want 121 and 0", len(m.Added), len(m.Removed))
	}
}

func TestViewNeverHoldsMoreThanSixAway(t *testing.T) {
	s := NewSubscriptions[uint64](torus.Default())
	v := DefaultView()
	w := s.World()
	anchor := ChunkPos{X: 3995, Y: 2}
	for step := range 40 {
		// A walk that crosses both seams diagonally and back.
		if step < 20 {
			anchor.X, anchor.Y = anchor.X+1, anchor.Y-1
		} else {
			anchor.X, anchor.Y = anchor.X-1, anchor.Y+1
		}
		follow(s, 1, anchor, v)
		for _, c := range s.AppendAnnounced(nil, 1) {
			if d := w.ChunkDistance(anchor, c); d > 6 {
				t.Fatalf("step %d: holds %v at distance %d from %v", step, c, d, anchor)
			}
		}
		for c := range w.ChunksWithin(anchor, 5, 1) {
			if !s.IsSent(1, c) {
				t.Fatalf("step %d: view chunk %v not held", step, c)
			}
		}
	}
}

func TestViewWrapsAtTheSeam(t *testing.T) {
	s := NewSubscriptions[uint64](torus.Default())
	follow(s, 1, ChunkPos{X: 0, Y: 3999}, DefaultView())
	for _, c := range []ChunkPos{{X: 3995, Y: 3994}, {X: 5, Y: 4}, {X: 3999, Y: 0}} {
		if !s.IsSent(1, c) {
			t.Fatalf("%v across the seam not held", c)
		}
	}
	if s.SentCount(1) != 363 {
		t.Fatalf("held %d, want 363", s.SentCount(1))
	}
}

func TestViewValidate(t *testing.T) {
	small, err := torus.New(torus.Config{Width: 320, Height: 320})
	if err != nil {
		t.Fatal(err)
	}
	if err := DefaultView().Validate(torus.Default()); err != nil {
		t.Fatalf("default view invalid: %v", err)
	}
	for _, v := range []View{{Radius: -1, Slabs: 1}, {Radius: 5, Slabs: -1}, {Radius: 5, ReleaseMargin: -1}} {
		if err := v.Validate(torus.Default()); !errors.Is(err, errcode.ErrConfigInvalid) {
			t.Fatalf("%+v: err = %v", v, err)
		}
	}
	// A 10-chunk torus cannot hold a 13-wide view without seeing a chunk twice.
	if err := DefaultView().Validate(small); !errors.Is(err, errcode.ErrConfigInvalid) {
		t.Fatalf("view wider than the torus: err = %v", err)
	}
}
