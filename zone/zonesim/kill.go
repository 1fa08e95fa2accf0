package zonesim

import (
	"fmt"
	"slices"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// killState is Config.Kill's part of a run: the schedule of the kill and
// the failover, and what the dead node held when it died.
type killState struct {
	on     bool
	dead   bool // the kill has happened
	names  []string
	node   int
	at     uint64 // the kill's tick
	cutAt  uint64
	lossAt uint64 // the lease's end
	ctrlAt uint64 // the controller writes the failover table
	inst   []uint64
	by     uint64 // the recovery bound
	table  *cells.Table
	speed  float64
	every  int
	sc     schedule
	// What the dead node held at the kill: position and epoch per entity
	// it held for real.
	pos   map[ecs.ID]torus.Pos
	epoch map[ecs.ID]uint64
	// arrived is, per entity, the last tick it became real on the dead
	// node (handed to it, or created); last its last checkpoint's tick.
	arrived map[ecs.ID]uint64
	was     map[ecs.ID]bool // real on the dead node last tick
	last    uint64
	// limbo are the entities the dead node alone held at its lease's end,
	// not back yet; covered those some live node held a record of then.
	limbo   map[ecs.ID]bool
	covered map[ecs.ID]bool
	res     Result
}

func newKillState(cfg Config, sc schedule, names []string) *killState {
	k := &killState{on: sc.kill, names: names, sc: sc}
	if !sc.kill {
		return k
	}
	k.node, k.at = sc.killNode, sc.killAt
	k.cutAt = sc.killAt + sc.killCut
	k.lossAt = sc.killAt + uint64(cfg.KillTTL)
	k.ctrlAt = k.lossAt + sc.ctrlDelay
	k.inst = make([]uint64, len(names))
	for i := range k.inst {
		k.inst[i] = k.ctrlAt + sc.installDelay[i]
	}
	// The recovery bound (recoverSpan): a control message takes a tick,
	// up to Faults.MaxDelay more, and Config.SlowControl more while the
	// slow window overlaps the failover.
	oneWay := 1 + uint64(max(cfg.Faults.MaxDelay, 0)) + uint64(max(cfg.Faults.SlowControl, 0))
	if slow := uint64(max(cfg.SlowControl, 0)); slow > 0 && !cfg.NoSchedule &&
		sc.slowFrom <= k.lossAt+recoverSpan(oneWay+slow) && sc.slowTo >= k.lossAt {
		oneWay += slow
	}
	k.by = k.lossAt + recoverSpan(oneWay)
	// A live pair cut apart, or a live node lagging, holds up the
	// adoption's query round: the bound waits for the heal or the
	// catch-up, then the answer's one-way delay.
	if !sc.noCut && sc.cutA != k.node && sc.cutB != k.node && sc.cutFrom <= k.by && sc.cutTo >= k.lossAt {
		k.by = max(k.by, sc.cutTo+12+oneWay)
	}
	if !sc.noLag && sc.lagNode != k.node && sc.lagFrom <= k.by && sc.catchFrom+sc.lagN >= k.lossAt {
		k.by = max(k.by, sc.catchFrom+sc.lagN+12+oneWay)
	}
	w := cfg.Wander.WithDefaults()
	k.speed = w.Speed
	k.every = zone.DefaultTimers().CheckpointEvery
	k.arrived = make(map[ecs.ID]uint64)
	k.was = make(map[ecs.ID]bool)
	k.limbo = make(map[ecs.ID]bool)
	k.covered = make(map[ecs.ID]bool)
	k.res.Killed, k.res.KillTick = names[k.node], k.at
	if k.by <= uint64(cfg.Ticks) {
		k.res.RecoverBy = k.by
	}
	return k
}

// recoverSpan is the recovery bound's ticks after the lease's end when a
// control message takes at most oneWay ticks: the controller writes the
// failover table (ctrlDelay, at most 3 ticks), the standby installs it
// (installDelay, at most 5), then its adoption round asks every live
// peer which of the records' entities it holds and waits for every
// answer before it creates the rest: a query and its answer on the
// control stream, two one-way delays; then 6 ticks to spare. With the
// default faults (MaxDelay 2) that is 3 + 5 + 2·3 + 6 = 20 ticks, a
// second; with the control stream 5 ticks slower, 30 (ttl2-slow5 seed 6:
// the standby installed the table and asked at tick 58, 5 ticks after
// the lease's end; its peers answered when the queries arrived, at 66;
// the answers were due at 72–74, past the old bound of 20). The round
// trip is the protocol's (a standby never creates an entity a live peer
// holds), not a timer: the control delay is in the bound twice.
func recoverSpan(oneWay uint64) uint64 { return 3 + 5 + 2*oneWay + 6 }

// isDead reports whether node i was killed (at the current tick or
// before).
func (k *killState) isDead(i int) bool { return k.on && i == k.node && k.dead }

// killed reports whether the kill has happened by tick t.
func (k *killState) killed(t uint64) bool { return k.on && t >= k.at }

// recovering reports whether t is within the failover: from the kill to
// the recovery bound.
func (k *killState) recovering(t uint64) bool { return k.on && t >= k.at && t <= k.by }

// schedule runs the kill's events due at tick t, before the tick's
// deliveries and steps.
func (k *killState) schedule(t uint64, net *Network, leases *Leases, terrs []*Territory, rts []*zone.Runtime, latest **cells.Table,
	ids []ecs.ID, lost map[ecs.ID]bool, event func(uint64, string, ...any)) error {
	dead := k.names[k.node]
	if t == k.at {
		k.dead = true
		victim := rts[k.node]
		k.pos = make(map[ecs.ID]torus.Pos)
		k.epoch = make(map[ecs.ID]uint64)
		for _, id := range ids {
			if victim.World().Alive(id) && !victim.Ghosts().Has(id) {
				p, _ := victim.Positions().Get(id)
				k.pos[id] = p.Pos
				k.epoch[id], _ = victim.Epoch(id)
			}
		}
		k.last = victim.LastCheckpoint()
		event(t, "%s is killed (%d entities on it; its last checkpoint at tick %d)", dead, len(k.pos), k.last)
	}
	if t == k.cutAt {
		for _, n := range k.names {
			if n != dead {
				net.Cut(dead, n)
			}
		}
		event(t, "%s is cut from every peer", dead)
	}
	if t == k.lossAt {
		leases.Lose(dead)
		// What no live node holds now is in limbo until the standbys
		// adopt it; covered if a live node holds a record of it.
		for _, id := range ids {
			if k.realOnLive(rts, id) {
				continue
			}
			if _, ok := k.pos[id]; !ok {
				continue
			}
			k.limbo[id] = true
			lost[id] = true // not counted as missing while in limbo
			for i, r := range rts {
				if i == k.node {
					continue
				}
				for _, rec := range r.Checkpointed(nil, id) {
					if rec.Owner == dead {
						k.covered[id] = true
					}
				}
			}
		}
		event(t, "%s's lease ends (%d entities in limbo, %d of them checkpointed)", dead, len(k.limbo), len(k.covered))
	}
	if t == k.ctrlAt {
		var live []string
		for _, n := range k.names {
			if n != dead {
				live = append(live, n)
			}
		}
		next, _, err := zone.PlanFailover(*latest, live, []string{dead})
		if err != nil {
			return err
		}
		if next != nil {
			*latest = next
			k.table = next
			event(t, "the controller writes table %d: %s's regions to their standbys", next.Version(), dead)
		}
	}
	if k.table != nil {
		for i, at := range k.inst {
			if i != k.node && t == at {
				terrs[i].Install(k.table)
			}
		}
	}
	return nil
}

func (k *killState) realOnLive(rts []*zone.Runtime, id ecs.ID) bool {
	for i, r := range rts {
		if i != k.node && r.World().Alive(id) && !r.Ghosts().Has(id) {
			return true
		}
	}
	return false
}

// check is the failover's properties at tick t (after check's): the
// entities in limbo come back on one live node, restored ones within the
// checkpoint interval of where the dead node had them and at a higher
// epoch; at the bound, every covered one is back.
func (k *killState) check(cfg Config, t uint64, geo torus.World, rts []*zone.Runtime, leases *Leases, ids []ecs.ID, lost map[ecs.ID]bool) error {
	fail := func(prop, format string, args ...any) error {
		return &PropertyError{Seed: cfg.Seed, Tick: t, Property: prop, Detail: fmt.Sprintf(format, args...)}
	}
	if !k.dead || k.arrived == nil {
		if k.on && !k.dead {
			k.track(t, rts, ids)
		}
		return nil
	}
	if t < k.lossAt {
		return nil
	}
	for _, id := range slices.Sorted(mapKeys(k.limbo)) {
		var holders []int
		for i, r := range rts {
			if i != k.node && r.World().Alive(id) && !r.Ghosts().Has(id) {
				holders = append(holders, i)
			}
		}
		if len(holders) == 0 {
			continue
		}
		delete(k.limbo, id)
		delete(lost, id)
		r := rts[holders[0]]
		if _, ok := r.Restored(id); !ok {
			k.res.Handed++
			continue
		}
		k.res.Restored++
		p, _ := r.Positions().Get(id)
		allowed := uint64(k.every + 3)
		if !k.sc.noCut && k.sc.cutFrom < k.at && (k.sc.cutA == k.node || k.sc.cutB == k.node) {
			// Cut from a standby before it died: that standby holds what
			// came before the cut.
			allowed += k.at - k.sc.cutFrom
		}
		limit := k.speed * float64(allowed) * 0.05
		if d := geo.Distance(p.Pos, k.pos[id]); d > limit {
			return fail("state loss", "entity %d restored on %s %.1f m from where %s last had it (at most %.1f: %d ticks at %.0f m/s)",
				id, k.names[holders[0]], d, k.names[k.node], limit, allowed, k.speed)
		}
		if e, _ := r.Epoch(id); e <= k.epoch[id] {
			return fail("epoch raised", "entity %d restored on %s at epoch %d, not above its epoch %d on %s", id, k.names[holders[0]], e, k.epoch[id], k.names[k.node])
		}
	}
	if t == k.by {
		// The one losable class: the dead node was cut from a peer (a
		// standby) before it died, and its checkpoints since the cut
		// never arrived (held for a heal that never comes).
		cut := !k.sc.noCut && k.sc.cutFrom < k.at && (k.sc.cutA == k.node || k.sc.cutB == k.node)
		for _, id := range slices.Sorted(mapKeys(k.limbo)) {
			if k.covered[id] {
				return fail("recovered", "entity %d, checkpointed, is held by no live node %d ticks after %s's lease ended", id, t-k.lossAt, k.names[k.node])
			}
			if !cut {
				return fail("recovered", "entity %d, on %s since tick %d (its last checkpoint at %d), was checkpointed nowhere", id, k.names[k.node], k.arrived[id], k.last)
			}
			k.res.Lost++
		}
	}
	return nil
}

// track notes, before the kill, when each entity became real on the
// node to be killed.
func (k *killState) track(t uint64, rts []*zone.Runtime, ids []ecs.ID) {
	r := rts[k.node]
	for _, id := range ids {
		real := r.World().Alive(id) && !r.Ghosts().Has(id)
		if real && !k.was[id] {
			k.arrived[id] = t
		}
		k.was[id] = real
	}
}

// result copies the kill's figures into res.
func (k *killState) result(res *Result, rts []*zone.Runtime) {
	if !k.on {
		return
	}
	res.Killed, res.KillTick, res.RecoverBy = k.res.Killed, k.res.KillTick, k.res.RecoverBy
	res.Restored, res.Handed, res.Lost = k.res.Restored, k.res.Handed, k.res.Lost
	for _, r := range rts {
		s := r.CheckpointStats()
		res.CheckpointBytes += s.Bytes
		res.CheckpointsRestored += s.Adopted
	}
}

func mapKeys[V any](m map[ecs.ID]V) func(func(ecs.ID) bool) {
	return func(yield func(ecs.ID) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// KnownKillFailure says whether seed is one of the seeds Config.Kill
// runs (TestKillNode, seeds 1–200) that find a bug not fixed yet, and
// which. Seed 53's blink after the failover (a handed entity stepped
// back into the chunk it came from under lossy replication) no longer
// shows since the taker checkpoints what it takes at once (its messages
// change the deliveries drawn). Nor seed 114's zombie held at the fence
// (sim-1 adopted entity 1 and walked it out of sim-0's view before it
// sent it there): the snapshot sim-1 sends of the held ghost's chunk
// after its adoption ends the hold (zone's fencehold.go).
func KnownKillFailure(seed uint64) (string, bool) {
	_ = seed
	return "", false
}
