package cells_test

import (
	"encoding/json"
	"fmt"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/torus"
)

func Example() {
	grid := cells.DefaultGrid() // 16 × 16 regions of 8 km on the 128 km torus
	table, err := cells.Uniform(grid, 1, []string{"zone-a", "zone-b"})
	if err != nil {
		panic(err)
	}
	bands := cells.DefaultBands(grid) // ghost 224 m, interaction 32 m, handoff margin 32 m

	// zone-a owns the southern half (y < 64 km), zone-b the northern half;
	// the seam at y = 0 is a border between them too.
	p := torus.Pos{X: 1000, Y: 100}
	fmt.Println("owner:", table.OwnerOf(p))
	fmt.Println("ghosted to:", table.AppendForeignOwners(nil, p, bands.Ghost))

	// An entity of zone-a that steps 20 m across the seam stays put;
	// 40 m across, it is handed to zone-b.
	_, move := table.HandoffTarget("zone-a", torus.Pos{X: 1000, Y: -20}, bands.HandoffMargin)
	fmt.Println("handoff at 20 m:", move)
	to, move := table.HandoffTarget("zone-a", torus.Pos{X: 1000, Y: -40}, bands.HandoffMargin)
	fmt.Println("handoff at 40 m:", to, move)

	fmt.Printf("band share at 8 km: %.0f%%\n", 100*cells.BandShare(grid.RegionEdge(), bands.Ghost))
	// Output:
	// owner: zone-a
	// ghosted to: [zone-b]
	// handoff at 20 m: false
	// handoff at 40 m: zone-b true
	// band share at 8 km: 11%
}

func ExampleTable_Neighbours() {
	// Two regions side by side: zone-b borders region 0 on both sides.
	grid, _ := cells.NewGrid(cells.GridConfig{RegionEdge: 64_000})
	table, _ := cells.NewTable(grid, 1, []string{"zone-a", "zone-b", "zone-a", "zone-b"})
	for _, n := range table.Neighbours(0) {
		if n.DY == 0 {
			fmt.Printf("dx=%+d region %d %s offset %v\n", n.DX, n.Region, n.Node, n.OffsetX)
		}
	}
	// Output:
	// dx=-1 region 1 zone-b offset -128000
	// dx=+1 region 1 zone-b offset 0
}

func ExampleParseTable() {
	grid, _ := cells.NewGrid(cells.GridConfig{RegionEdge: 64_000})
	table, _ := cells.Uniform(grid, 7, []string{"zone-a", "zone-b"})
	data, _ := json.Marshal(table)
	fmt.Println(string(data))

	back, err := cells.ParseTable(data)
	fmt.Println(back.Version(), back.Equal(table), err)
	// Output:
	// {"version":7,"grid":{"world":{"width":128000,"height":128000,"chunkEdge":32,"slabHeight":256},"regionEdge":64000},"owners":["zone-a","zone-a","zone-b","zone-b"]}
	// 7 true <nil>
}
