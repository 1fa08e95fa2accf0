package torus_test

import (
	"fmt"

	"github.com/shardwise/shardwise/torus"
)

func Example() {
	w := torus.Default() // 128 km × 128 km, 32 m chunks, 256 m slabs

	a := torus.Pos{X: 127_990, Y: 50}
	b := torus.Pos{X: 5, Y: 50}
	fmt.Println("delta x:", w.DeltaX(a.X, b.X)) // across the seam, not −127 985
	fmt.Println("distance:", w.Distance(a, b))
	fmt.Println("normalised:", w.Normalise(torus.Pos{X: -5, Y: 128_003}))
	fmt.Println("chunk:", w.ChunkOf(torus.Pos{X: -0.5, Y: 40, Z: -1}))

	// The 11 × 11 view window around a chunk on the seam, one slab.
	n := 0
	for range w.ChunksWithin(w.ChunkOf(a), 5, 0) {
		n++
	}
	fmt.Println("chunks in view:", n)
	// Output:
	// delta x: 15
	// distance: 15
	// normalised: {127995 3 0}
	// chunk: {3999 1 -1}
	// chunks in view: 121
}

func ExampleNew() {
	w, err := torus.New(torus.Config{Width: 4096, Height: 2048, ChunkEdge: 64})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w.ChunksX(), w.ChunksY(), w.SlabHeight())

	_, err = torus.New(torus.Config{Width: 1000, ChunkEdge: 64})
	fmt.Println(err)
	// Output:
	// 64 32 256
	// invalid configuration: Width = 1000: must be a multiple of ChunkEdge
}
