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
	// own is, per tick before the kill, the dead node's own tick after
	// that tick's steps (a lagging node skips steps, then makes them up
	// two a tick); due the latest tick a control message sent by then
	// can be due (the stream keeps its order, so a later one is never
	// due before an earlier one).
	own, due []uint64
	// lossSteps is how many of its own steps the dead node made that
	// the standbys may never have received a checkpoint of (lostSteps).
	lossSteps uint64
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
		own := victim.World().CurrentTick().N
		k.lossSteps = k.lostSteps(own)
		event(t, "%s is killed at its own tick %d (%d entities on it; its last checkpoint at its tick %d; %d of its steps since a checkpoint surely arrived)",
			dead, own, len(k.pos), k.last, k.lossSteps)
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
		// The dead node's steps no checkpoint that surely reached a
		// standby covers (lostSteps), the CheckpointEvery - 1 steps
		// before them since its last checkpoint, and the step the
		// adopter makes (it restores at the start of its tick) before
		// this check; the wire's float32 positions round by well under
		// a centimetre. No step to spare: over 200 seeds of six
		// variants the newest record any live node held was always
		// within it.
		allowed := k.lossSteps + uint64(k.every)
		limit := k.speed*float64(allowed)*0.05 + 0.01
		if d := geo.Distance(p.Pos, k.pos[id]); d > limit {
			return fail("state loss", "entity %d restored on %s %.2f m from where %s last had it (at most %.2f: %d of its steps at %.0f m/s, %d of them since its last checkpoint a standby surely received)",
				id, k.names[holders[0]], d, k.names[k.node], limit, allowed, k.speed, k.lossSteps)
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

// lostSteps is, at the kill (its own tick last), how many of its own
// steps the dead node made after the last tick whose control messages
// surely reached their peers: its checkpoints from those steps may
// never have arrived.
//
// A control message sent at tick w is due by due[w]; the standby
// applies it if it is delivered, and read, before end: the first tick
// from which the dead node's messages are held for good or refused.
// That is the earliest of
//   - the kill's cut (cutAt);
//   - the lease's end (lossAt; with a TTL of 1 or 2 ticks, before the
//     cut): a node reads its control stream when it steps, and refuses
//     at the fence what a node whose lease ended sent, read after the
//     end (ttl2-slow5 seed 84);
//   - the start of a cut of the node from a peer (a standby) not healed
//     before the kill's cut (a heal in the tick of that cut is undone in
//     the same tick): what it sent that peer since is held until then;
//   - the start of a live node's skipped steps that last past the
//     lease's end: what it is delivered meanwhile it reads after the end
//     (ttl2-slow5 seed 53: the standby skipped 8 steps across it).
//
// So every checkpoint sent by the last tick ws with due[ws] < end reached
// its standby, and what may be lost is the node's steps after ws:
// counted in its own ticks, since a lagging node making up steps makes
// two a tick (TestKillSoak slow3 seed 1: 11 steps in the 6 ticks before
// the kill, where a bound in ticks allowed 3). The property adds the
// checkpoint interval: the last checkpoint by ws is at most
// CheckpointEvery - 1 of its steps before ws's.
func (k *killState) lostSteps(last uint64) uint64 {
	end := min(k.cutAt, k.lossAt)
	sc := k.sc
	if !sc.noCut && (sc.cutA == k.node || sc.cutB == k.node) && sc.cutFrom < end && !(sc.cutTo <= k.at && sc.cutTo < k.cutAt) {
		end = sc.cutFrom
	}
	if !sc.noLag && sc.lagNode != k.node && sc.lagFrom < end && sc.lagFrom < k.lossAt && sc.lagFrom+sc.lagN >= k.lossAt {
		end = sc.lagFrom
	}
	if len(k.own) < int(k.at) || len(k.due) < int(k.at) {
		return last // not tracked (Config.NoChecks): no property uses it
	}
	for ws := k.at - 1; ws > 0; ws-- {
		if k.due[ws] < end {
			return last - k.own[ws]
		}
	}
	return last
}

// sent notes, for the tick's control messages, the latest tick they can
// be due under the network's faults f (set for tick t).
func (k *killState) sent(t uint64, f Faults) {
	if !k.on || k.dead {
		return
	}
	for uint64(len(k.due)) <= t {
		k.due = append(k.due, 0)
	}
	d := t + 1 + uint64(max(f.MaxDelay, 0)) + uint64(max(f.SlowControl, 0))
	k.due[t] = max(d, k.due[t-1])
}

// track notes, before the kill, when each entity became real on the
// node to be killed, and its own tick.
func (k *killState) track(t uint64, rts []*zone.Runtime, ids []ecs.ID) {
	r := rts[k.node]
	for uint64(len(k.own)) <= t {
		k.own = append(k.own, 0)
	}
	k.own[t] = r.World().CurrentTick().N
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
