package zone

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/torus"
)

// The re-plan heap against the sort it replaces: over random chunk sets
// (duplicates and negative slabs included), popping the heap yields the
// chunks in cmpChunk order, and so does popping part of it, adding more
// and re-heaping (a second table change in a re-plan).
func TestChunkHeapPopsInSortedOrder(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	chunk := func() torus.ChunkPos {
		return torus.ChunkPos{X: rnd.Int32N(40), Y: rnd.Int32N(40), Slab: rnd.Int32N(5) - 2}
	}
	for n := range 500 {
		var h chunkHeap
		var naive []torus.ChunkPos
		for range n {
			ch := chunk()
			h, naive = append(h, ch), append(naive, ch)
		}
		h.init()
		slices.SortFunc(naive, cmpChunk)
		var got []torus.ChunkPos
		for range n / 2 {
			got = append(got, h.pop())
		}
		if !slices.Equal(got, naive[:n/2]) {
			t.Fatalf("%d chunks: the first half popped %v, sorted %v", n, got, naive[:n/2])
		}
		rest := slices.Clone(naive[n/2:])
		for range rnd.IntN(50) {
			ch := chunk()
			h, rest = append(h, ch), append(rest, ch)
		}
		h.init()
		slices.SortFunc(rest, cmpChunk)
		got = got[:0]
		for len(h) > 0 {
			got = append(got, h.pop())
		}
		if !slices.Equal(got, rest) {
			t.Fatalf("%d chunks, re-heaped: popped %v, sorted %v", n, got, rest)
		}
	}
}
