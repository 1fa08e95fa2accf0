package demo

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/zone"
)

// census watches every zone node's entities at every tick end and checks
// that no entity is ever simulated by two nodes: the single-writer law of
// the world, checked from outside the runtime.
//
// Each node's observations are taken on its own goroutine (OnTick) and
// applied under one lock, so they are totally ordered. An entity's history
// is a sequence of segments, each one node simulating it at an epoch
// (zone.Runtime.Epoch: it grows by one with every handoff), open from the
// node's first observation until the node is seen not simulating it any
// more. When node X sees entity e simulated at epoch n:
//   - no segment: a new segment (an entity created, or set up again, as a
//     den is on its column's new owner);
//   - the current segment is X's: it goes on (its epoch may only grow);
//   - the current segment is another node's and still open: legitimate only
//     if n is above that segment's epoch, a handoff whose source has not
//     been seen letting go yet (it froze the entity in the tick it sent it,
//     but its next observation may come after the target's first); anything
//     else is two nodes simulating one entity, a violation.
//
// A closed segment would be treated exactly as no segment (any node may
// open the next one, at any epoch), so a segment is dropped as it closes:
// segs holds only the entities some node simulates now, and it stays
// bounded however long the run (--serve).
//
// It also keeps, per node, the accounts' entities (masters and pets: an
// Owner) held there at the last tick, simulated or frozen in a handoff,
// for the end-of-run count.
type census struct {
	mu         sync.Mutex
	segs       map[ecs.ID]*segment        // the open segments
	held       map[string]map[ecs.ID]bool // per node: simulated at its last observation
	owned      map[string]map[ecs.ID]account.ID
	regions    map[string]map[cells.RegionID]int // per node: the players' entities it holds, by region
	all        map[string]map[cells.RegionID]int // per node: every entity it simulates, by region
	violations int
	examples   []string // the first violations, for the report
	observed   int64    // observations applied

	scratch map[string][]observed // per node, reused under mu
}

// segment is an open segment: node simulates the entity at epoch.
type segment struct {
	node  string
	epoch uint64
}

type observed struct {
	id    ecs.ID
	epoch uint64
}

func newCensus() *census {
	return &census{
		segs: map[ecs.ID]*segment{}, held: map[string]map[ecs.ID]bool{},
		owned: map[string]map[ecs.ID]account.ID{}, regions: map[string]map[cells.RegionID]int{}, all: map[string]map[cells.RegionID]int{},
		scratch: map[string][]observed{},
	}
}

// observe records what node's runtime simulates now. It must run on the
// runtime's goroutine (OnTick).
func (c *census) observe(node string, rt *zone.Runtime) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sims := c.scratch[node][:0]
	owned := c.owned[node]
	if owned == nil {
		owned = map[ecs.ID]account.ID{}
		c.owned[node] = owned
	}
	clear(owned)
	regions := c.regions[node]
	if regions == nil {
		regions = map[cells.RegionID]int{}
		c.regions[node] = regions
	}
	clear(regions)
	all := c.all[node]
	if all == nil {
		all = map[cells.RegionID]int{}
		c.all[node] = all
	}
	clear(all)
	owners := rt.Owners()
	grid := rt.Grid()
	rt.Positions().Each(func(id ecs.ID, p *zone.Position) {
		if rt.Ghosts().Has(id) {
			return
		}
		simulated := rt.Simulated(id)
		if simulated {
			ep, _ := rt.Epoch(id)
			sims = append(sims, observed{id, ep})
			all[grid.RegionOf(p.Pos)]++
		}
		if o, ok := owners.Get(id); ok && o.Account != account.None && (simulated || rt.Frozen().Has(id)) {
			owned[id] = o.Account
			regions[grid.RegionOf(p.Pos)]++
		}
	})
	c.scratch[node] = sims
	c.record(node, sims)
}

// record applies node's observation: the entities it simulates now, with
// their epochs. Under mu.
func (c *census) record(node string, sims []observed) {
	prev := c.held[node]
	now := make(map[ecs.ID]bool, len(sims))
	for _, o := range sims {
		now[o.id] = true
		c.apply(node, o)
	}
	for id := range prev {
		if !now[id] {
			c.close(node, id)
		}
	}
	c.held[node] = now
	c.observed++
}

// close ends node's segment of id, if the current one is node's: it is
// dropped, a closed segment being no constraint on the next.
func (c *census) close(node string, id ecs.ID) {
	if s := c.segs[id]; s != nil && s.node == node {
		delete(c.segs, id)
	}
}

func (c *census) apply(node string, o observed) {
	s := c.segs[o.id]
	switch {
	case s == nil:
		c.segs[o.id] = &segment{node: node, epoch: o.epoch}
	case s.node == node:
		if o.epoch < s.epoch {
			c.violate("%v simulated by %s at epoch %d after epoch %d", o.id, node, o.epoch, s.epoch)
		}
		s.epoch = o.epoch
	case o.epoch > s.epoch:
		*s = segment{node: node, epoch: o.epoch} // a handoff
	default:
		c.violate("%v simulated by %s at epoch %d while %s simulates it at epoch %d", o.id, node, o.epoch, s.node, s.epoch)
	}
}

func (c *census) violate(format string, args ...any) {
	c.violations++
	if len(c.examples) < 8 {
		c.examples = append(c.examples, fmt.Sprintf(format, args...))
	}
}

// doubles returns the violations seen and the first few.
func (c *census) doubles() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.violations, slices.Clone(c.examples)
}

// players counts, over every node's last observation, the distinct
// entities of each account (an entity in a handoff, frozen on its source
// and adopted on its target, counts once).
func (c *census) players() map[account.ID]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := map[ecs.ID]account.ID{}
	for _, m := range c.owned {
		for id, a := range m {
			ids[id] = a
		}
	}
	per := map[account.ID]int{}
	for _, a := range ids {
		per[a]++
	}
	return per
}

// busiestRegion returns the region where the nodes held the most players'
// entities at their last ticks, and how many (0: none seen).
func (c *census) busiestRegion() (cells.RegionID, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sum := map[cells.RegionID]int{}
	for _, m := range c.regions {
		for r, n := range m {
			sum[r] += n
		}
	}
	best, most := cells.RegionID(0), 0
	for r, n := range sum {
		if n > most || (n == most && r < best) {
			best, most = r, n
		}
	}
	return best, most
}

// playersIn returns how many players' entities node held in region at its
// last tick, simulated or frozen in a handoff.
func (c *census) playersIn(node string, region cells.RegionID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.regions[node][region]
}

// forget drops what node held at its last tick, once it has stopped: it
// holds nothing any more, and its stale sets must not count.
func (c *census) forget(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.held[node] {
		c.close(node, id)
	}
	delete(c.held, node)
	delete(c.owned, node)
	delete(c.regions, node)
	delete(c.all, node)
}

// simulatedBy returns the entities node simulated at its last
// observation.
func (c *census) simulatedBy(node string) map[ecs.ID]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.held[node])
}

// simulatedElsewhere counts the entities of ids some node other than not
// simulates now (an open segment of another node).
func (c *census) simulatedElsewhere(ids map[ecs.ID]bool, not string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for id := range ids {
		if s := c.segs[id]; s != nil && s.node != not {
			n++
		}
	}
	return n
}

// entitiesIn counts the entities the nodes other than not simulated in
// regions at their last observations ("" for every node).
func (c *census) entitiesIn(regions []cells.RegionID, not string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for node, m := range c.all {
		if node == not {
			continue
		}
		for _, r := range regions {
			n += m[r]
		}
	}
	return n
}

// accountsOn returns the accounts whose entities (master, pet) node held
// at its last observation.
func (c *census) accountsOn(node string) map[account.ID]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[account.ID]bool{}
	for _, a := range c.owned[node] {
		out[a] = true
	}
	return out
}

// entitiesOf returns the entities of the accounts every node held at its
// last observation.
func (c *census) entitiesOf(accounts map[account.ID]bool) map[ecs.ID]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[ecs.ID]bool{}
	for _, m := range c.owned {
		for id, a := range m {
			if accounts[a] {
				out[id] = true
			}
		}
	}
	return out
}

// playersExcept is players over every node but not.
func (c *census) playersExcept(not string) map[account.ID]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := map[ecs.ID]account.ID{}
	for node, m := range c.owned {
		if node == not {
			continue
		}
		for id, a := range m {
			ids[id] = a
		}
	}
	per := map[account.ID]int{}
	for _, a := range ids {
		per[a]++
	}
	return per
}
