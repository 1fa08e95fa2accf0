package zone_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// TestBandResubscribedAfterAFailover: after a failover every live node
// receives each chunk of its interaction band from the chunk's
// simulators under the failover table. A band chunk whose only
// simulator was the dead node lost its subscription at the fence, and
// the failover table's re-plan covered only the chunks held, wanted,
// or entering or leaving the band: that chunk was never asked of its
// adopter, and the node simulated its side of the border without the
// other's entities (seed 516 of TestPlayersAcrossAFailover: the master's
// node never saw its pet, adopted by the neighbour). Planted back
// ("nobandreplan"), the test must see it.
func TestBandResubscribedAfterAFailover(t *testing.T) {
	t.Parallel()
	for _, plant := range []string{"", "nobandreplan"} {
		t.Run("plant="+plant, func(t *testing.T) {
			t.Parallel()
			unsubscribed := bandAfterAFailover(t, plant)
			switch {
			case plant == "" && unsubscribed != "":
				t.Error(unsubscribed)
			case plant != "" && unsubscribed == "":
				t.Errorf("the planted %s went unseen", plant)
			}
		})
	}
}

// bandAfterAFailover kills a node of four, applies the failover table,
// and says which live node does not receive band chunks from their
// simulators once the table's re-plan is over ("": none).
func bandAfterAFailover(t *testing.T, plant string) string {
	grid := cells.GridConfig{RegionEdge: 512}
	grid.World.Width, grid.World.Height = 2048, 2048
	gc := game.Config{Seed: 1, NoBots: true, RegionEdge: 512}
	gc.Torus.Width, gc.Torus.Height = 2048, 2048
	c := zonetest.Start(t, zonetest.Config{
		Nodes: 4, Memory: true, Grid: grid, Seed: 1,
		Module: func(int, string) (zone.Module, error) { return game.NewModule(gc) },
	})
	names := []string{"zone-0", "zone-1", "zone-2", "zone-3"}
	for _, n := range names {
		if plant != "" {
			c.Node(n).Runtime.Plant(plant)
		}
	}
	for range 20 {
		c.Step()
	}
	for _, n := range names {
		if u := c.Node(n).Runtime.BandUnsubscribed(); len(u) > 0 {
			t.Fatalf("before the failover %s does not receive %d band chunks from their simulators (first %v)", n, len(u), u[0])
		}
	}
	const victim = "zone-1"
	live := []string{"zone-0", "zone-2", "zone-3"}
	table := c.Node(live[0]).Runtime.Table()
	c.Halt(victim)
	c.Kill(victim)
	for range 5 {
		c.Step()
	}
	next, _, err := zone.PlanFailover(table, live, []string{victim})
	if err != nil {
		t.Fatal(err)
	}
	c.Apply(next)
	for range 200 { // past the table's grace and its re-plan
		c.Step()
	}
	var out []string
	for _, n := range live {
		if u := c.Node(n).Runtime.BandUnsubscribed(); len(u) > 0 {
			out = append(out, fmt.Sprintf("after the failover %s does not receive %d band chunks from their simulators (first %v)", n, len(u), u[0]))
		}
	}
	return strings.Join(out, "\n")
}
