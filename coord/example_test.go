package coord_test

import (
	"context"
	"fmt"
	"os"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
)

// A node joins the cluster, an operator assigns it the world, and every node
// follows the table through a watch.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "coord-example-")
	defer os.RemoveAll(dir)

	etcd, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{DataDir: dir})
	if err != nil {
		panic(err)
	}
	defer etcd.Close()
	c, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: etcd.Endpoints()})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	node, err := c.Register(ctx, coord.RegisterConfig{Name: "zone-a", Role: "zone"})
	if err != nil {
		panic(err)
	}
	fmt.Println("registered", node.Member().Name, "as node", node.ID())
	// Derive every write from node.Context(): it is cancelled the moment
	// the lease is lost, when node.Lost() is closed too.
	fmt.Println("may write:", node.Context().Err() == nil)

	updates, err := c.WatchRegions(ctx)
	if err != nil {
		panic(err)
	}
	table, _ := cells.Uniform(cells.DefaultGrid(), 1, []string{"zone-a"})
	if err := c.ApplyRegions(ctx, table, coord.ApplyOptions{}); err != nil {
		panic(err)
	}
	u := <-updates
	fmt.Println("table version", u.Table.Version(), "gives zone-a", len(u.Table.RegionsOf("zone-a")), "regions")

	// A second apply of version 1 loses the compare-and-set.
	err = c.ApplyRegions(ctx, table, coord.ApplyOptions{})
	fmt.Println(err)
	// Output:
	// registered zone-a as node 0
	// may write: true
	// table version 1 gives zone-a 256 regions
	// coord: region table is at version 1, not the expected 0: someone else applied a table; re-read it and apply again
}
