package interest

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestChunkTableMatchesMap drives a chunkTable and a Go map with the same
// random puts, deletes and gets over a small key space (so keys collide,
// repeat and are deleted from the middle of probe runs) and checks every
// answer and the size agree.
func TestChunkTableMatchesMap(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		var tab chunkTable[*int]
		ref := map[ChunkPos]*int{}
		span := int32(2 + r.IntN(40)) // from heavy reuse to mostly fresh keys
		key := func() ChunkPos {
			return ChunkPos{X: r.Int32N(span), Y: r.Int32N(span), Slab: r.Int32N(5) - 2}
		}
		for op := 0; op < 20000; op++ {
			c := key()
			switch r.IntN(4) {
			case 0, 1:
				v := new(int)
				*v = op
				tab.put(c, v)
				ref[c] = v
			case 2:
				_, want := ref[c]
				if got := tab.del(c); got != want {
					t.Fatalf("seed %d op %d: del(%v) = %v, want %v", seed, op, c, got, want)
				}
				delete(ref, c)
			case 3:
				if got, want := tab.get(c), ref[c]; got != want {
					t.Fatalf("seed %d op %d: get(%v) = %p, want %p", seed, op, c, got, want)
				}
			}
			if op%500 == 499 {
				seen := map[ChunkPos]bool{}
				for c, v := range tab.all {
					if seen[c] || ref[c] != v {
						t.Fatalf("seed %d op %d: all yielded %v twice or with the wrong value", seed, op, c)
					}
					seen[c] = true
				}
				if len(seen) != len(ref) {
					t.Fatalf("seed %d op %d: all yielded %d chunks, want %d", seed, op, len(seen), len(ref))
				}
			}
			if op%7919 == 7918 {
				tab.reset()
				clear(ref)
			}
			if tab.len() != len(ref) {
				t.Fatalf("seed %d op %d: len %d, want %d", seed, op, tab.len(), len(ref))
			}
		}
		for c, want := range ref {
			if got := tab.get(c); got != want {
				t.Fatalf("seed %d: final get(%v) = %p, want %p", seed, c, got, want)
			}
		}
		for c := range ref {
			if !tab.del(c) {
				t.Fatalf("seed %d: final del(%v) missed", seed, c)
			}
		}
		if tab.len() != 0 || tab.get(ChunkPos{}) != nil {
			t.Fatalf("seed %d: table not empty after deleting every key", seed)
		}
	}
}

// TestChunkTableExtremeKeys covers keys at the ends of the int32 range and
// the zero key, which must be storable (absence is a nil value, not a zero
// key).
func TestChunkTableExtremeKeys(t *testing.T) {
	var tab chunkTable[*string]
	keys := []ChunkPos{{}, {X: -1, Y: -1, Slab: -1}, {X: 1<<31 - 1, Y: -1 << 31, Slab: 0}, {Slab: 1<<31 - 1}}
	for _, c := range keys {
		s := fmt.Sprint(c)
		tab.put(c, &s)
	}
	for _, c := range keys {
		if v := tab.get(c); v == nil || *v != fmt.Sprint(c) {
			t.Fatalf("get(%v) = %v", c, v)
		}
	}
	if got := tab.get(ChunkPos{X: 1}); got != nil {
		t.Fatalf("get of an absent key = %v", *got)
	}
}

// TestPlaceTableMatchesMap drives a placeTable and a Go map with the same
// random puts, deletes and gets, over ids that share low or high bits (as
// snowflake ids do), and checks every answer and the size agree.
func TestPlaceTableMatchesMap(t *testing.T) {
	lists := []*residentList[eid]{{}, {}, {}}
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		var tab placeTable[eid]
		ref := map[eid]placement[eid]{}
		span := 2 + r.IntN(300)
		id := func() eid {
			n := eid(r.IntN(span))
			if seed%2 == 0 {
				return n << 40 // only high bits differ
			}
			return n | 7<<50
		}
		for op := 0; op < 20000; op++ {
			e := id()
			switch r.IntN(4) {
			case 0, 1:
				p := placement[eid]{chunk: ChunkPos{X: int32(op)}, slot: int32(op), rl: lists[r.IntN(len(lists))]}
				tab.put(e, p)
				ref[e] = p
			case 2:
				_, want := ref[e]
				if got := tab.del(e); got != want {
					t.Fatalf("seed %d op %d: del(%d) = %v, want %v", seed, op, e, got, want)
				}
				delete(ref, e)
			case 3:
				got, ok := tab.get(e)
				want, wantOK := ref[e]
				if ok != wantOK || got != want {
					t.Fatalf("seed %d op %d: get(%d) = %v %v, want %v %v", seed, op, e, got, ok, want, wantOK)
				}
			}
			if tab.len() != len(ref) {
				t.Fatalf("seed %d op %d: len %d, want %d", seed, op, tab.len(), len(ref))
			}
		}
		for e, want := range ref {
			if got, ok := tab.get(e); !ok || got != want {
				t.Fatalf("seed %d: final get(%d) = %v %v, want %v", seed, e, got, ok, want)
			}
		}
	}
}
