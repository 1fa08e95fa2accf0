package router

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/rendezvous"
)

// With RendezvousPlacement the router routes exactly like a rendezvous
// table over the live nodes: the economy caller relies on it.
func TestRendezvousPlacementMatchesTable(t *testing.T) {
	c := newCluster()
	opts := baseOptions(c, clock.NewFake(epoch))
	opts.Placement = RendezvousPlacement()
	opts.Replicas = 2
	r := newRouter(t, c, opts)
	nodes := []Node{node(1), node(2), node(3)}
	addNodes(t, r, nodes...)
	ids := []string{nodes[0].ID(), nodes[1].ID(), nodes[2].ID()}
	table, err := rendezvous.New(ids)
	if err != nil {
		t.Fatal(err)
	}
	check := func(table *rendezvous.Table) {
		t.Helper()
		for i := range 2000 {
			key := fmt.Sprintf("wrld_%d", i)
			rt, err := r.Route(key)
			if err != nil {
				t.Fatal(err)
			}
			if want := table.Owner(key); rt.Node.ID() != want {
				t.Fatalf("%s: routed to %s, table says %s", key, rt.Node.ID(), want)
			}
			all, _ := r.RouteAll(key, 2)
			got := []string{all[0].Node.ID(), all[1].Node.ID()}
			if want := table.TopN(key, 2); !slices.Equal(got, want) {
				t.Fatalf("%s: RouteAll = %v, table TopN = %v", key, got, want)
			}
		}
	}
	check(table)

	// Membership changes rebuild the table: after a mark-down the router
	// routes like a table of the remaining nodes.
	r.MarkDown(nodes[1])
	table, err = rendezvous.New([]string{ids[0], ids[2]})
	if err != nil {
		t.Fatal(err)
	}
	check(table)

	// Failover works the same way on this placement.
	lead, _ := r.Route("wrld_ds_0")
	served := ""
	err = r.Execute(context.Background(), "wrld_ds_0", func(_ context.Context, _ *client, n Node) error {
		if n == lead.Node {
			return errRefused
		}
		served = n.ID()
		return nil
	})
	if err != nil || served == "" || served == lead.Node.ID() {
		t.Fatalf("failover on rendezvous: served by %q, %v", served, err)
	}
}

func TestRendezvousPlacementWeightsFollowVnodes(t *testing.T) {
	c := newCluster()
	opts := baseOptions(c, clock.NewFake(epoch))
	opts.Placement = RendezvousPlacement()
	r := newRouter(t, c, opts)
	heavy := Node{Host: "big", Port: 1, Vnodes: 300}
	addNodes(t, r, Node{Host: "small", Port: 1}, heavy)
	n := 0
	for i := range 4000 {
		if rt, _ := r.Route(fmt.Sprint(i)); rt.Node == heavy {
			n++
		}
	}
	// Expected share 300/400 = 0.75.
	if n < 2800 || n > 3200 {
		t.Fatalf("heavy node leads %d of 4000 keys, want about 3000", n)
	}
}
