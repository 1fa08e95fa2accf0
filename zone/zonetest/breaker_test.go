package zonetest_test

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// breakerEntities is how many wanderers the breaker's clusters run.
const breakerEntities = 160

// startBreaker is a Config.Memory cluster of n wander nodes on a 4 × 4
// grid of 512 m regions, the wanderers spread over most of it.
func startBreaker(t *testing.T, n int) *zonetest.Cluster {
	t.Helper()
	g := cells.GridConfig{RegionEdge: 512}
	g.World.Width, g.World.Height = 2048, 2048
	return zonetest.Start(t, zonetest.Config{
		Nodes: n, Grid: g, Memory: true,
		Module: func(int, string) (zone.Module, error) {
			return wander.New(wander.Config{Seed: 11, Entities: breakerEntities, Accounts: 20, Area: 1600, Roam: 300, Speed: 10})
		},
	})
}

// holders returns, per wanderer, the live nodes that simulate it.
func holders(c *zonetest.Cluster, dead map[string]bool) map[ecs.ID][]string {
	out := make(map[ecs.ID][]string)
	for i := range breakerEntities {
		id, _ := wander.ID(i)
		for _, n := range c.Nodes {
			if !dead[n.Name] && n.Runtime.Simulated(id) {
				out[id] = append(out[id], n.Name)
			}
		}
	}
	return out
}

// coveredBy returns, per wanderer, the live nodes that hold it for real
// or hold a checkpoint record of it (in its stream, or in an adoption
// round in flight).
func coveredBy(c *zonetest.Cluster, dead map[string]bool) map[ecs.ID][]string {
	out := make(map[ecs.ID][]string)
	for i := range breakerEntities {
		id, _ := wander.ID(i)
		for _, n := range c.Nodes {
			if dead[n.Name] {
				continue
			}
			if n.Runtime.Simulated(id) || n.Runtime.Frozen().Has(id) || len(n.Runtime.Checkpointed(nil, id)) > 0 || n.Runtime.InAdoption(id) {
				out[id] = append(out[id], n.Name)
			}
		}
	}
	return out
}

// failover applies the controller's table for the dead nodes.
func failover(t *testing.T, c *zonetest.Cluster, dead map[string]bool) {
	t.Helper()
	var live, gone []string
	var table *cells.Table
	for _, n := range c.Nodes {
		if dead[n.Name] {
			gone = append(gone, n.Name)
			continue
		}
		live = append(live, n.Name)
		if tb := n.Runtime.Table(); table == nil || tb.Version() > table.Version() {
			table = tb
		}
	}
	next, _, err := zone.PlanFailover(table, live, gone)
	if err != nil {
		t.Fatal(err)
	}
	if next != nil {
		c.Apply(next)
	}
}

// stepChecked steps the cluster n ticks, checking one simulator per
// entity at every tick.
func stepChecked(t *testing.T, c *zonetest.Cluster, n int) {
	t.Helper()
	for range n {
		c.Step()
		if err := c.CheckOneSimulator(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBreakerStandbyDiesDuringAdoption: a node dies; the failover table
// gives its regions to their standbys; while an adoption is still
// pending (or 4 ticks after it ended), an adopter dies too, and a second
// failover table follows. No wanderer ends on two live nodes, and every
// one a live node held (for real, frozen, or as a checkpoint record) at
// the second kill ends on one: the only ones lost are those both dead
// nodes alone held (a checkpoint whose only standby died before it
// adopted and checkpointed it on), counted exactly. At gap 4 the second
// node had adopted the first's entities and checkpointed them to its own
// standby, which once counted a ghost of the first dead node still held
// at its fence as a live holder and lost 4 (zone's
// TestSecondDeathAfterAdoptionBites plants that back).
func TestBreakerStandbyDiesDuringAdoption(t *testing.T) {
	for _, gap := range []int{0, 1, 2, 4} {
		t.Run(fmt.Sprint("gap", gap), func(t *testing.T) {
			c := startBreaker(t, 4)
			stepChecked(t, c, 60)
			dead := map[string]bool{}
			first := c.Nodes[1].Name
			c.Kill(first)
			dead[first] = true
			failover(t, c, dead)
			stepChecked(t, c, gap)
			var second string
			for _, n := range c.Nodes {
				if !dead[n.Name] && n.Runtime.AdoptionPending() {
					second = n.Name
					break
				}
			}
			if second == "" {
				second = c.Nodes[2].Name
				t.Logf("no adoption pending after %d ticks: killing %s", gap, second)
			}
			c.Kill(second)
			dead[second] = true
			covered := coveredBy(c, dead)
			for id, on := range covered {
				for _, n := range c.Nodes {
					if slices.Contains(on, n.Name) && !n.Runtime.Simulated(id) {
						t.Logf("at the second kill: entity %d on %s: frozen %v, records %+v", id, n.Name, n.Runtime.Frozen().Has(id), n.Runtime.Checkpointed(nil, id))
					}
				}
			}
			failover(t, c, dead)
			if os.Getenv("SHARDWISE_BREAKER_WATCH") != "" {
				w := ecs.ID(69)
				prev := ""
				for k := range 120 {
					line := ""
					for _, n := range c.Nodes {
						if !dead[n.Name] {
							var at any
							if p, ok := n.Runtime.Positions().Get(w); ok {
								at = p.Pos
							}
							e, _ := n.Runtime.Epoch(w)
							line += fmt.Sprintf(" %s alive %v sim %v frozen %v ghost %v e%d %v recs %+v;", n.Name, n.Runtime.World().Alive(w), n.Runtime.Simulated(w), n.Runtime.Frozen().Has(w), n.Runtime.Ghosts().Has(w), e, at, n.Runtime.Checkpointed(nil, w))
						}
					}
					for _, n := range c.Nodes {
						if !dead[n.Name] {
							st := n.Runtime.CheckpointStats()
							line += fmt.Sprintf(" %s rounds %d adopted %d taken %d here %d;", n.Name, st.Rounds, st.Adopted, st.Taken, st.Here)
						}
					}
					if line != prev && os.Getenv("SHARDWISE_BREAKER_WATCH") == "2" {
						t.Logf("+%d%s", k, line)
					}
					prev = line
					if os.Getenv("SHARDWISE_BREAKER_WATCH") == "2" {
						stepChecked(t, c, 1)
						continue
					}
					for _, n := range c.Nodes {
						if !dead[n.Name] {
							t.Logf("+%d %s v%d owner(7)=%s sim %v recs %+v pending %v", k, n.Name, n.Runtime.Table().Version(), n.Runtime.Table().Owner(7), n.Runtime.Simulated(w), n.Runtime.Checkpointed(nil, w), n.Runtime.AdoptionPending())
						}
					}
					stepChecked(t, c, 1)
				}
			}
			stepChecked(t, c, 120)
			h := holders(c, dead)
			for id, on := range covered {
				if len(h[id]) == 0 {
					t.Errorf("entity %d, held on live %v at the second kill, is held by no live node 120 ticks later", id, on)
					for _, n := range c.Nodes {
						if dead[n.Name] {
							continue
						}
						for _, rec := range n.Runtime.Checkpointed(nil, id) {
							t.Logf("  %s holds %+v (region's owner now %s); adoption pending %v", n.Name, rec, n.Runtime.Table().Owner(rec.Region), n.Runtime.AdoptionPending())
						}
					}
				}
			}
			lost, twice := 0, 0
			for id, h := range holders(c, dead) {
				if len(h) > 1 {
					twice++
					t.Errorf("entity %d simulated by %v", id, h)
				}
			}
			lost = breakerEntities - len(holders(c, dead))
			t.Logf("killed %s then %s after %d ticks: %d of %d wanderers lost (%d held by the two dead nodes alone), %d twice", first, second, gap, lost, breakerEntities, breakerEntities-len(covered), twice)
			if want := breakerEntities - len(covered); lost != want {
				t.Errorf("%d wanderers lost, but %d were held by the two dead nodes alone", lost, want)
			}
		})
	}
}

// TestBreakerSecondKillBeforeFirstAdoptionEnds: two nodes die one after
// the other, the second before the first's failover table is applied.
func TestBreakerSecondKillBeforeFirstAdoptionEnds(t *testing.T) {
	c := startBreaker(t, 4)
	stepChecked(t, c, 60)
	dead := map[string]bool{c.Nodes[0].Name: true}
	c.Kill(c.Nodes[0].Name)
	stepChecked(t, c, 3)
	failover(t, c, dead)
	c.Kill(c.Nodes[3].Name)
	dead[c.Nodes[3].Name] = true
	covered := coveredBy(c, dead)
	stepChecked(t, c, 1)
	failover(t, c, dead)
	stepChecked(t, c, 120)
	h := holders(c, dead)
	for id, on := range covered {
		if len(h[id]) == 0 {
			t.Errorf("entity %d, held on live %v at the second kill, is held by no live node 120 ticks later", id, on)
		}
	}
	for _, id := range slices.Sorted(func(yield func(ecs.ID) bool) {
		for id := range h {
			if !yield(id) {
				return
			}
		}
	}) {
		if len(h[id]) > 1 {
			t.Errorf("entity %d simulated by %v", id, h[id])
		}
	}
	t.Logf("%d of %d wanderers held by exactly one live node", len(h), breakerEntities)
}

// TestBreakerTwoNodeKill: a 2-node cluster loses one node: the survivor
// must hold every wanderer.
func TestBreakerTwoNodeKill(t *testing.T) {
	c := startBreaker(t, 2)
	stepChecked(t, c, 60)
	dead := map[string]bool{c.Nodes[1].Name: true}
	c.Kill(c.Nodes[1].Name)
	failover(t, c, dead)
	stepChecked(t, c, 80)
	h := holders(c, dead)
	if len(h) != breakerEntities {
		t.Errorf("%d of %d wanderers on the survivor", len(h), breakerEntities)
	}
}
