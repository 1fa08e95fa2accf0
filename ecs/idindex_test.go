package ecs

import (
	"math/rand/v2"
	"testing"
)

// TestIDIndexMatchesAMap drives the index and a Go map with the same random
// puts and removes — snowflake-like ids (consecutive sequences in a few
// milliseconds) and arbitrary ones — and checks every key after each step,
// so a backward-shift deletion that hides a key is caught.
func TestIDIndexMatchesAMap(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 3))
		var x idIndex
		want := map[ID]uint32{}
		var keys []ID
		newID := func() ID {
			if rng.IntN(2) == 0 {
				return ID(rng.Uint64())
			}
			ms, seq := uint64(rng.IntN(8)), uint64(rng.IntN(2048))
			return ID(ms<<19 | 3<<11 | seq)
		}
		for step := range 4000 {
			switch {
			case len(keys) > 0 && rng.IntN(3) == 0:
				k := rng.IntN(len(keys))
				id := keys[k]
				keys[k] = keys[len(keys)-1]
				keys = keys[:len(keys)-1]
				x.remove(id)
				delete(want, id)
			default:
				id := newID()
				if _, ok := want[id]; !ok {
					keys = append(keys, id)
				}
				s := uint32(rng.IntN(1 << 20))
				x.put(id, s)
				want[id] = s
			}
			if x.len() != len(want) {
				t.Fatalf("seed %d step %d: len %d, want %d", seed, step, x.len(), len(want))
			}
			if step%97 == 0 || step > 3900 {
				for id, s := range want {
					if got, ok := x.get(id); !ok || got != s {
						t.Fatalf("seed %d step %d: get(%d) = %d, %v; want %d", seed, step, id, got, ok, s)
					}
				}
				for range 20 {
					id := newID()
					_, in := want[id]
					if _, ok := x.get(id); ok != in {
						t.Fatalf("seed %d step %d: get(%d) found=%v, want %v", seed, step, id, ok, in)
					}
				}
			}
		}
	}
}
