package game

import (
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/interest"
)

// IntentKind says what an intent asks of its target.
type IntentKind uint8

// Intent kinds.
const (
	Damage IntentKind = iota + 1
	Heal
	Experience
)

// Intent is a request to change another entity, addressed to it and
// applied by the target's own system at the start of the next tick. On one
// node it is a queue; across nodes it travels to the target's owner. No
// system writes another entity's health or experience directly.
type Intent struct {
	Kind   IntentKind
	Source ecs.ID
	Target ecs.ID
	Amount int32
}

func (g *Game) send(in Intent) { g.intents = append(g.intents, in) }

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

// applyIntents applies last tick's intents, in the order they were sent.
// Intents sent while applying (experience for a kill) go to the next tick.
func (g *Game) applyIntents(w *ecs.World, t ecs.Tick) {
	batch := g.intents
	g.intents = g.spareIntents[:0]
	g.report.Intents = len(batch)
	for _, in := range batch {
		if !w.Alive(in.Target) || w.Leaving(in.Target) || g.c.frozen.Has(in.Target) {
			continue // a frozen target's intents would follow it in a handoff; here they lapse
		}
		switch in.Kind {
		case Damage, Heal:
			g.applyHealth(w, in)
		case Experience:
			if e, ok := g.c.exp.Get(in.Target); ok {
				e.Points += int64(in.Amount)
				g.c.exp.MarkDirty(in.Target)
			}
		}
	}
	clear(batch)
	g.spareIntents = batch[:0]
}

func (g *Game) applyHealth(w *ecs.World, in Intent) {
	h, ok := g.c.health.Get(in.Target)
	if !ok {
		return
	}
	if in.Kind == Heal {
		h.HP = min(h.Max, h.HP+in.Amount)
		g.c.health.MarkDirty(in.Target)
		return
	}
	h.HP -= in.Amount
	g.c.health.MarkDirty(in.Target)
	if m, ok := g.c.mob.Get(in.Target); ok && m.State == Wandering {
		m.State, m.Target = Chasing, in.Source // a mob fights back
	}
	if h.HP > 0 {
		return
	}
	switch {
	case g.c.mob.Has(in.Target):
		_ = g.c.dying.Add(in.Target, Dying{Reason: interest.Death})
		_ = w.Destroy(in.Target)
		g.report.Died++
		if killer, ok := g.creditedMaster(in.Source); ok {
			g.send(Intent{Kind: Experience, Source: in.Target, Target: killer, Amount: killExp})
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
