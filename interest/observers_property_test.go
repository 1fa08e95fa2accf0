package interest

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestObserversFollowEverySubscriptionChange checks that ObserversOf and
// AppendObserverIndices name exactly the subscribers holding an entity's
// chunk after every random send, unsend, withdraw, forget, move and removal,
// and also from inside the ChunkSent/ChunkUnsent hooks (the resident list
// caches its chunk's subscriber slice header, which must already be current
// when a hook runs).
func TestObserversFollowEverySubscriptionChange(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		f := newVis(t)
		const subsN, entsN = 6, 12
		chunks := []ChunkPos{{X: 0, Y: 0}, {X: 1, Y: 0}, {X: 0, Y: 1}, {X: 3999, Y: 0}, {X: 0, Y: 0, Slab: 1}}
		check := func(when string) {
			t.Helper()
			for e := eid(0); e < entsN; e++ {
				c, ok := f.vis.ChunkOf(e)
				var want []uint64
				if ok {
					for s := uint64(0); s < subsN; s++ {
						if f.subs.IsSent(s, c) {
							want = append(want, s)
						}
					}
				}
				got := f.vis.ObserversOf(e)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d %s: observers of %d in %v = %v, want %v", seed, when, e, c, got, want)
				}
				idx := f.vis.AppendObserverIndices(nil, e)
				if len(idx) != len(want) {
					t.Fatalf("seed %d %s: %d observer indices of %d, want %d", seed, when, len(idx), e, len(want))
				}
			}
		}
		f.subs.AddHooks(Hooks[uint64]{
			ChunkSent:   func(uint64, ChunkPos) { check("in ChunkSent") },
			ChunkUnsent: func(uint64, ChunkPos) { check("in ChunkUnsent") },
		})
		for op := 0; op < 3000; op++ {
			s := uint64(r.IntN(subsN))
			c := chunks[r.IntN(len(chunks))]
			e := eid(r.IntN(entsN))
			switch r.IntN(7) {
			case 0, 1:
				f.subs.Announce(s, c)
				f.subs.MarkSent(s, c)
			case 2:
				f.subs.Unsend(s, c)
			case 3:
				f.subs.Withdraw(s, c)
			case 4:
				if r.IntN(10) == 0 {
					f.subs.Forget(s)
				}
			case 5:
				f.vis.Reindex(e, c)
			case 6:
				f.vis.Remove(e, Gone)
			}
			check("after op")
			if op%50 == 0 {
				f.vis.Drain()
			}
		}
	}
}
