package interest_test

import (
	"fmt"

	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/torus"
)

func Example() {
	world := torus.Default() // 128 km torus, 32 m chunks: 4000 columns across
	subs := interest.NewSubscriptions[uint64](world)
	vis := interest.NewVisibility[uint64, uint64](subs)

	// Account 7 stands at x = 127,990 and holds its 11 × 11 × 3 view.
	anchor := world.ChunkOf(torus.Pos{X: 127_990, Y: 500, Z: 10})
	var m interest.Manifest
	subs.ViewManifest(7, anchor, interest.DefaultView(), &m)
	subs.Apply(7, m)
	for _, c := range subs.AppendUnsent(nil, 7) {
		subs.MarkSent(7, c) // the chunk data went out
	}

	// A mob at x = 5, on the other side of the seam, 15 m away.
	vis.Reindex(1001, world.ChunkOf(torus.Pos{X: 5, Y: 500, Z: 10}))
	for _, d := range vis.Drain() {
		fmt.Println("account", d.Subscriber, "sees", d.Appeared)
	}
	vis.Remove(1001, interest.Death)
	for _, d := range vis.Drain() {
		fmt.Println("account", d.Subscriber, "loses", d.Vanished[0].Entity, "by", d.Vanished[0].Reason)
	}
	// Output:
	// account 7 sees [1001]
	// account 7 loses 1001 by death
}
