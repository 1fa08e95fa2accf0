package zone

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/errcode"
)

// CodeInvariant is the code of a broken runtime invariant.
const CodeInvariant = "ZONE.INVARIANT"

// ErrInvariant matches every *InvariantError.
var ErrInvariant = errcode.New(CodeInvariant, "zone: runtime invariant broken")

// InvariantError is one breach of a numbered runtime invariant of the
// package doc, found by CheckInvariants.
type InvariantError struct {
	Node      string
	Invariant int // its number in the package doc's runtime invariants
	Entity    ecs.ID
	Detail    string
}

func (e *InvariantError) Error() string {
	return fmt.Sprintf("zone: %s breaks runtime invariant %d: entity %d %s", e.Node, e.Invariant, e.Entity, e.Detail)
}

// ErrorCode returns CodeInvariant.
func (e *InvariantError) ErrorCode() string { return CodeInvariant }

// Is makes errors.Is(err, ErrInvariant) true.
func (e *InvariantError) Is(target error) bool { return target == ErrInvariant }

// maxBreaches bounds the breaches CheckInvariants reports.
const maxBreaches = 8

// CheckInvariants checks, between two ticks, the runtime invariants of
// the package doc that one node can check alone (5 to 14; the harness of
// a whole cluster checks 1 across nodes: zonetest), and returns the
// breaches found (at most 8, each an *InvariantError, joined), or nil. It
// changes nothing and costs a few map lookups per entity, ghost and
// handoff in flight: zonetest runs it after every Step of every node.
// Call it from the goroutine that calls Step.
func (r *Runtime) CheckInvariants() error {
	if r.closed {
		return nil
	}
	var found []*InvariantError
	breach := func(inv int, id ecs.ID, format string, args ...any) {
		found = append(found, &InvariantError{Node: r.cfg.Name, Invariant: inv, Entity: id, Detail: fmt.Sprintf(format, args...)})
	}
	c := r.cluster
	// 5: frozen exactly while a handoff is in flight.
	r.frozen.Each(func(id ecs.ID, _ *Frozen) {
		if c == nil {
			breach(5, id, "is frozen on a node alone")
			return
		}
		if e := c.ents.get(id); e == nil {
			breach(5, id, "is frozen, neither outgoing nor adopted and thawing (no record)")
		} else if e.phase != phaseOutgoing && e.phase != phaseAdopted {
			breach(5, id, "is frozen, neither outgoing nor adopted and thawing (its record: %s)", e.phase)
		}
	})
	if c != nil {
		for id, e := range c.ents.outgoing {
			// One the module destroyed since it was sent (a den whose
			// column the same tick end tore down) waits for its answer
			// dead: a known hole, see the package doc.
			if r.w.Alive(id) && !r.frozen.Has(id) {
				breach(5, id, "is outgoing (to %s) but not frozen", e.out.target)
			}
		}
		for id := range c.ents.adopted {
			if !r.w.Alive(id) || !r.frozen.Has(id) {
				breach(5, id, "is adopted and thawing but not a frozen entity here")
			}
		}
		c.checkRecords(breach)
		c.checkGhosts(breach)
		c.checkCheckpoints(breach)
		c.checkFenceHeld(breach)
		if !r.cfg.NoHandoff && !r.fencedNow() {
			c.checkMargin(breach)
		}
	}
	if len(found) == 0 {
		return nil
	}
	slices.SortFunc(found, func(a, b *InvariantError) int {
		return cmp.Or(cmp.Compare(a.Invariant, b.Invariant), cmp.Compare(a.Entity, b.Entity), cmp.Compare(a.Detail, b.Detail))
	})
	errs := make([]error, 0, min(len(found), maxBreaches))
	for _, e := range found[:min(len(found), maxBreaches)] {
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// checkGhosts checks invariants 6 and 7: render ghosts and their sources,
// parked and held ghosts, simulation ghosts.
func (c *cluster) checkGhosts(breach func(int, ecs.ID, string, ...any)) {
	r := c.r
	// 6 (render ghosts against their records) is checked with the
	// records, in one pass: checkRecords.
	// 7: a simulation ghost is a render ghost standing in the band.
	r.ghost.Each(func(id ecs.ID, _ *Ghost) {
		_, ch, ok := c.rep.Has(uint64(id))
		switch {
		case !ok:
			breach(7, id, "is a simulation ghost without a render ghost")
		case !c.inBand(ch):
			breach(7, id, "is a simulation ghost in chunk %v, outside the interaction band", ch)
		}
	})
}

// checkRecords checks, in one pass over the table, invariant 6 (the
// render ghosts are exactly the records in phaseGhost, none is also a
// local entity, and a parked or held one is held from its source) and
// 12 to 14: each record's phase against the world, the table's indexes
// and tidiness, and the transitions refused.
func (c *cluster) checkRecords(breach func(int, ecs.ID, string, ...any)) {
	r := c.r
	t := &c.ents
	ghosts := 0
	indexes := [...]map[ecs.ID]*entity{t.outgoing, t.adopted, t.outside, t.parked, t.held, t.fenceHeld, t.went}
	says := make([]int, len(indexes))
	for id, e := range t.recs {
		local := r.w.Alive(id) && !r.ghost.Has(id)
		// 12: the phase agrees with the world.
		switch e.phase {
		case phaseSimulated:
			if !local {
				breach(12, id, "is simulated in its record but no local entity here")
			} else if r.frozen.Has(id) {
				breach(12, id, "is simulated in its record but frozen")
			}
		case phaseOutgoing:
			if e.out == nil {
				breach(12, id, "is outgoing without a handoff")
			}
			if r.ghost.Has(id) {
				breach(12, id, "is outgoing and a simulation ghost")
			}
		case phaseAdopted:
			if !local {
				breach(12, id, "is adopted in its record but no local entity here")
			}
		case phaseGone:
			if r.frozen.Has(id) {
				breach(12, id, "is gone in its record but frozen here")
			}
		case phaseGhost:
			ghosts++
			if e.source == "" {
				breach(12, id, "is a ghost without a source")
			}
		}
		if _, _, ok := c.rep.Has(uint64(id)); ok != (e.phase == phaseGhost) {
			if ok {
				breach(6, id, "has a render ghost but its record is %s", e.phase)
			} else {
				breach(6, id, "has a source (%s) but no render ghost", e.source)
			}
		}
		if e.phase == phaseGhost {
			if local {
				breach(6, id, "is a render ghost (from %s) and a local entity", e.source)
			}
			if e.park != nil && e.park.peer != e.source {
				breach(6, id, "is parked from %s but its render ghost's source is %q", e.park.peer, e.source)
			}
			if e.held != nil && e.held.peer != e.source {
				breach(6, id, "has a vanish held from %s but its render ghost's source is %q", e.held.peer, e.source)
			}
		}
		// 13: no record is empty, and the indexes are the records' (each
		// index entry says so, and as many records say so as it holds).
		for i, in := range [...]bool{e.phase == phaseOutgoing, e.phase == phaseAdopted, e.outside, e.park != nil, e.held != nil, e.fence != nil, e.went != nil} {
			if in {
				says[i]++
			}
		}
		if e.phase != phaseGhost && (e.park != nil || e.held != nil || e.fence != nil || e.source != "") ||
			!e.phase.local() && (e.epoch != 0 || e.retryAt != 0 || e.outside || e.rehomed) {
			breach(13, id, "is %s in its record, with another phase's fields set", e.phase)
		}
		if e.went == nil && (e.phase == phaseGone || e.phase == phaseSimulated && e.epoch == 0 && e.retryAt == 0 && !e.outside && !e.rehomed) {
			breach(13, id, "has an empty %s record", e.phase)
		}
	}
	if n := c.rep.Len(); n != ghosts {
		breach(6, 0, "(none in particular): %d render ghosts but %d ghost records", n, ghosts)
	}
	if ghosts != t.ghosts {
		breach(13, 0, "(none in particular): %d ghost records, counted %d", ghosts, t.ghosts)
	}
	names := [...]string{"outgoing", "adopted", "outside", "parked", "held", "fence-held", "went"}
	for i, m := range indexes {
		for id, e := range m {
			in := [...]bool{e.phase == phaseOutgoing, e.phase == phaseAdopted, e.outside, e.park != nil, e.held != nil, e.fence != nil, e.went != nil}[i]
			if t.recs[id] != e || !in {
				breach(13, id, "is in the table's %s index, and its record is not", names[i])
			}
		}
		if len(m) != says[i] {
			breach(13, 0, "(none in particular): %d records are %s, the index holds %d", says[i], names[i], len(m))
		}
	}
	// 14: every transition found the phase it leaves.
	for _, f := range t.first {
		breach(14, f.id, "%s (%d transitions refused)", f.msg, c.stats.PhaseErrors)
	}
}

// checkMargin checks invariant 8 against the table the handoff last
// checked (the territory may hold a newer one already: the next tick
// applies it).
func (c *cluster) checkMargin(breach func(int, ecs.ID, string, ...any)) {
	r := c.r
	table := c.handTable
	if table == nil {
		return
	}
	now := r.w.CurrentTick().N
	var queued map[ecs.ID]bool
	r.pos.Each(func(id ecs.ID, p *Position) {
		// The owner first: it is arithmetic, and rules out nearly every
		// entity before the lookups Simulated makes.
		if table.OwnerOf(p.Pos) == r.cfg.Name || !r.Simulated(id) {
			return
		}
		if !c.isOutside(id) {
			breach(8, id, "stands at %v in %s's region and is not checked at every tick", p.Pos, table.OwnerOf(p.Pos))
		}
		target, ok := c.handoffTarget(table, id, p.Pos)
		if !ok {
			return // within the margin
		}
		if queued == nil {
			queued = make(map[ecs.ID]bool, len(c.toHand))
			for _, q := range c.toHand {
				queued[q] = true
			}
		}
		_, fenced := c.fenced[target]
		if !queued[id] && c.retryAtOf(id) <= now && !fenced {
			breach(8, id, "is simulated at %v, past the margin, and not queued to go to %s", p.Pos, target)
		}
	})
}
