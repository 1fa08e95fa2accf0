package game

import (
	"math"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/zone"
)

// Intent kinds (zone.Intent.Kind). An intent is a request to change
// another entity, addressed to it and applied by the target's own owner at
// the start of the next tick: no system writes another entity's health or
// experience directly.
const (
	Damage uint16 = iota + 1
	Heal
	Experience
	// Dismiss removes a pet whose master left the world (removePlayer),
	// sent when the pet lives on another node than the master: the pet's
	// own node destroys it if the intent's source is its master.
	Dismiss
)

func (g *Game) send(kind uint16, source, target ecs.ID, amount int32) {
	g.r.Send(zone.Intent{Kind: kind, Source: source, Target: target, Amount: int64(amount)})
}

// Rewards and timings, in ticks at 20 Hz.
const (
	killExp           = 10
	respawnHP         = 100
	attackCooldown    = 20 // 1 s
	healCooldown      = 40 // 2 s
	mobDamage         = 4
	playerDamage      = 12
	petHeal           = 15
	perceptionStagger = 4 // perception and re-pathing run every 4th tick per entity
)

// applyIntent applies one intent to an entity this node simulates (the
// runtime hands over only those).
func (g *Game) applyIntent(w *ecs.World, in zone.Intent) {
	switch in.Kind {
	case Damage, Heal:
		g.applyHealth(w, in)
	case Dismiss:
		if p, ok := g.c.pet.Get(in.Target); ok && p.Master == in.Source {
			_ = g.r.Destroy(in.Target, interest.Gone)
		}
	case Experience:
		if e, ok := g.c.exp.Get(in.Target); ok {
			e.Points += in.Amount
			g.c.exp.MarkDirty(in.Target)
		} else if p, ok := g.c.pet.Get(in.Target); ok {
			// Credit earned by a pet, resolved where the pet lives.
			g.r.Send(zone.Intent{Kind: Experience, Source: in.Source, Target: p.Master, Amount: in.Amount})
		}
	}
}

func (g *Game) applyHealth(w *ecs.World, in zone.Intent) {
	h, ok := g.c.health.Get(in.Target)
	if !ok {
		return
	}
	amount := int32(max(min(in.Amount, math.MaxInt32), 0))
	if in.Kind == Heal {
		h.HP = min(h.Max, h.HP+amount)
		g.c.health.MarkDirty(in.Target)
		return
	}
	h.HP -= amount
	g.c.health.MarkDirty(in.Target)
	if m, ok := g.c.mob.Get(in.Target); ok {
		// A mob fights back, against whoever hurt it most, on any node.
		if t, ok := g.c.threat.Get(in.Target); ok {
			t.add(in.Source, amount)
			if top, ok := t.top(); ok {
				m.State, m.Target = Chasing, top
			}
		}
	}
	if h.HP > 0 {
		return
	}
	switch {
	case g.c.mob.Has(in.Target):
		_ = g.r.Destroy(in.Target, interest.Death)
		g.died++
		// Every attacker in the damage table is credited: locally by its
		// master, or through its own node (a pet's credit goes on to its
		// master there).
		if t, ok := g.c.threat.Get(in.Target); ok {
			for _, e := range t.Slots {
				if e.Source == 0 {
					continue
				}
				killer, ok := g.creditedMaster(e.Source)
				if !ok {
					killer = e.Source
				}
				g.send(Experience, in.Target, killer, killExp)
			}
		}
	case g.c.master.Has(in.Target):
		// A player is not destroyed: it wakes at home at full health.
		h.HP = min(h.Max, respawnHP)
		m, _ := g.c.master.Get(in.Target)
		p, _ := g.c.pos.Get(in.Target)
		path, _ := g.c.path.Get(in.Target)
		p.Pos = m.Home
		path.Active = false
		g.c.pos.MarkDirty(in.Target)
		g.c.path.MarkDirty(in.Target)
		w.MarkMoved(in.Target)
	default:
		h.HP = 0 // a pet faints but stays
	}
}

// creditedMaster is the master that gets the kill for source.
func (g *Game) creditedMaster(source ecs.ID) (ecs.ID, bool) {
	if g.c.master.Has(source) {
		return source, true
	}
	if p, ok := g.c.pet.Get(source); ok {
		return p.Master, true
	}
	return 0, false
}
