package terrain_test

import (
	"fmt"

	"github.com/shardwise/shardwise/terrain"
	"github.com/shardwise/shardwise/torus"
)

func Example() {
	w := torus.Default()
	g, err := terrain.New(42, w) // every node with seed 42 generates the same ground
	if err != nil {
		fmt.Println(err)
		return
	}
	c := w.ChunkOf(torus.Pos{X: 127_990, Y: 40}) // on the seam
	mark, _ := terrain.Marker{X: 3, Y: 7, Type: 1}.Edit(1001)

	// The gateway: the base from its own generator, the edits from the store.
	wire := terrain.AppendChunk(nil, &terrain.Chunk{
		X: c.X, Y: c.Y, Revision: 1, Heights: g.Base(c), Edits: []terrain.Edit{mark},
	})

	// The client.
	got, err := terrain.DecodeChunk(wire)
	if err != nil {
		fmt.Println(err)
		return
	}
	s, _ := terrain.Apply(got.Heights, got.Edits)
	fmt.Println("chunk", got.X, got.Y, "revision", got.Revision, "in", len(wire), "bytes")
	fmt.Println("ground at the west-south corner:", s.Heights.Metres(0, 0), "m")
	fmt.Println("marker on cell (3, 7):", s.MarkerAt(3, 7))
	east := g.Base(torus.ChunkPos{X: c.X + 1, Y: c.Y}) // across the seam: column 0
	fmt.Println("east edge meets column 0:", s.Heights.At(terrain.Cells, 5) == east.At(0, 5))
	// Output:
	// chunk 3999 1 revision 1 in 302 bytes
	// ground at the west-south corner: -73 m
	// marker on cell (3, 7): 1
	// east edge meets column 0: true
}
