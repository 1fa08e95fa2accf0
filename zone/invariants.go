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
// the package doc that one node can check alone (5 to 11; the harness of
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
		_, thawing := c.thawAt[id]
		if c.pending[id] == nil && !thawing {
			breach(5, id, "is frozen, neither outgoing nor adopted and thawing")
		}
	})
	if c != nil {
		for id := range c.pending {
			// One the module destroyed since it was sent (a den whose
			// column the same tick end tore down) waits for its answer
			// dead: a known hole, see the package doc.
			if r.w.Alive(id) && !r.frozen.Has(id) {
				breach(5, id, "is outgoing (to %s) but not frozen", c.pending[id].target)
			}
		}
		for id := range c.thawAt {
			if !r.w.Alive(id) || !r.frozen.Has(id) {
				breach(5, id, "is adopted and thawing but not a frozen entity here")
			}
		}
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
	// 6: the render ghosts are exactly the entities with a source, and
	// none is also a local entity.
	for id, src := range c.source {
		if _, _, ok := c.rep.Has(uint64(id)); !ok {
			breach(6, id, "has a source (%s) but no render ghost", src)
		}
		if r.w.Alive(id) && !r.ghost.Has(id) {
			breach(6, id, "is a render ghost (from %s) and a local entity", src)
		}
	}
	if n := c.rep.Len(); n != len(c.source) {
		breach(6, 0, "(none in particular): %d render ghosts but %d sources", n, len(c.source))
	}
	for id, pg := range c.parked {
		if src, ok := c.source[id]; !ok || src != pg.peer {
			breach(6, id, "is parked from %s but its render ghost's source is %q", pg.peer, src)
		}
	}
	for id, h := range c.holding {
		if src, ok := c.source[id]; !ok || src != h.peer {
			breach(6, id, "has a vanish held from %s but its render ghost's source is %q", h.peer, src)
		}
	}
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
		if _, ok := c.outside[id]; !ok {
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
		if !queued[id] && c.retryAt[id] <= now && !fenced {
			breach(8, id, "is simulated at %v, past the margin, and not queued to go to %s", p.Pos, target)
		}
	})
}
