package zonecoord_test

import (
	"context"
	"fmt"
	"os"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone/zonecoord"
)

// Two zone nodes join, an operator splits the world between them, and each
// answers from the table it holds.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zone-example-")
	defer os.RemoveAll(dir)
	etcd, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{DataDir: dir, UnsafeNoFsync: true})
	if err != nil {
		panic(err)
	}
	defer etcd.Close()
	c, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: etcd.Endpoints()})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	a, err := zonecoord.Join(ctx, zonecoord.JoinConfig{Coord: c, Name: "zone-a"})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := zonecoord.Join(ctx, zonecoord.JoinConfig{Coord: c, Name: "zone-b"})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	table, _ := cells.Uniform(cells.DefaultGrid(), 1, []string{"zone-a", "zone-b"})
	if err := c.ApplyRegions(ctx, table, coord.ApplyOptions{}); err != nil {
		panic(err)
	}
	_ = a.WaitVersion(ctx, 1)
	_ = b.WaitVersion(ctx, 1)
	fmt.Println("zone-a owns", len(a.OwnedRegions()), "regions of table version", a.Version())

	p := torus.Pos{X: 100, Y: 100}
	fmt.Println("owner of", p, "as a derives it:", a.OwnerOf(p), "as b does:", b.OwnerOf(p))
	r := table.Grid().RegionOf(p)
	g, _ := a.CheckWrite(r)
	fmt.Println("a may write in region", g.Region, "by table version", g.TableVersion)
	_, err = b.CheckWrite(r)
	fmt.Println("b:", errcode.Of(err))

	_ = a.Close()
	_, err = a.CheckWrite(r)
	fmt.Println("a after Close owns it:", a.Owns(r), errcode.Of(err))
	// Output:
	// zone-a owns 128 regions of table version 1
	// owner of {100 100 0} as a derives it: zone-a as b does: zone-a
	// a may write in region 0 by table version 1
	// b: ZONE.NOT_OWNER
	// a after Close owns it: false ZONE.CLOSED
}
