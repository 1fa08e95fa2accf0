package game

import (
	"math"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/torus"
)

// staggered spreads per-entity work over every ticks so that no tick pays
// for everyone. The phase is the id's offset from the boot id, not the id
// itself, so that a node booted at another wall time (every id shifted by
// the same amount) makes the same decisions on the same ticks.
func (g *Game) staggered(id ecs.ID, t ecs.Tick, every uint64) bool {
	return (g.r.Phase(id)+t.N)%every == 0
}

// runPlayers drives each master like a bot: walk to a waypoint around
// home, and hit the nearest mob in reach.
func (g *Game) runPlayers(w *ecs.World, t ecs.Tick) {
	reach := g.cfg.AttackRange + 2
	g.masterQ.Each(func(id ecs.ID, m *Master, p *Position, path *Path) {
		if m.Manual {
			g.runClientPlayer(id, m, p, reach)
			return
		}
		if !path.Active {
			g.walk(id, path, g.randomAround(m.Home, g.cfg.Roam), 5)
		}
		if !m.AttackIn.countDown() || !g.staggered(id, t, perceptionStagger) {
			return
		}
		if mob, ok := g.nearest(p.Pos, reach, KindMob); ok {
			g.send(Damage, id, mob, playerDamage)
			m.AttackIn = attackCooldown
		}
	})
}

// runClientPlayer attacks the target its client named, whenever it is in
// reach; it walks only where told (applyInput).
func (g *Game) runClientPlayer(id ecs.ID, m *Master, p *Position, reach float64) {
	ready := m.AttackIn.countDown()
	if m.Target == 0 {
		return
	}
	tp, ok := g.c.pos.Get(m.Target)
	if !ok {
		m.Target = 0 // gone (or out of this node's sight)
		return
	}
	if ready && g.geo.Within(p.Pos, tp.Pos, reach) {
		g.send(Damage, id, m.Target, playerDamage)
		m.AttackIn = attackCooldown
	}
}

// runPets follows the master and heals it when it is hurt.
func (g *Game) runPets(w *ecs.World, t ecs.Tick) {
	g.petQ.Each(func(id ecs.ID, pet *Pet, p *Position, path *Path) {
		healReady := pet.HealIn.countDown() // every tick, staggered or not
		if !g.staggered(id, t, perceptionStagger) {
			return
		}
		mp, ok := g.c.pos.Get(pet.Master)
		if !ok {
			return
		}
		if g.geo.DistanceSq(p.Pos, mp.Pos) > 3*3 {
			// Re-path only when the point behind the master has moved off
			// the path's end, as chasers do: a pet re-aimed at every
			// perception sent five paths a second to everyone watching it.
			follow := g.geo.Translate(mp.Pos, torus.Pos{X: -1.5, Y: -1.5})
			if !path.Active || !g.geo.Within(path.Target, follow, chaseSlack) {
				g.walk(id, path, follow, 6)
			}
		}
		mh, ok := g.c.health.Get(pet.Master)
		if ok && healReady && mh.HP < mh.Max*6/10 && g.geo.Within(p.Pos, mp.Pos, 10) {
			g.send(Heal, id, pet.Master, petHeal)
			pet.HealIn = healCooldown
		}
	})
}

// runDens stocks one mob per den per second while a player is near.
func (g *Game) runDens(w *ecs.World, t ecs.Tick) {
	g.denQ.Each(func(id ecs.ID, d *Den, p *Position) {
		if !g.staggered(id, t, 20) || len(d.Mobs) >= g.cfg.DenCapacity {
			return
		}
		if _, ok := g.nearestPlayer(p.Pos, g.cfg.StockRadius); !ok {
			return
		}
		if mobID, ok := g.spawnMob(w, id, g.randomAround(p.Pos, 10)); ok {
			d.Mobs = append(d.Mobs, mobID)
		}
	})
}

// spawnMob creates a mob of den at. Its components appear at the end of
// the tick; the den records it.
func (g *Game) spawnMob(w *ecs.World, den ecs.ID, at torus.Pos) (ecs.ID, bool) {
	id, err := g.r.NewID()
	if err != nil || w.CreateEntity(id) != nil {
		return 0, false
	}
	at = g.geo.Normalise(at)
	c := g.c
	_ = c.pos.Add(id, Position{Pos: at})
	_ = c.path.Add(id, Path{})
	_ = c.speed.Add(id, Speed{MPS: 2})
	_ = c.visual.Add(id, Visual{KindMob})
	_ = c.health.Add(id, Health{HP: 30, Max: 30})
	_ = c.motion.Add(id, Motion{})
	_ = c.mob.Add(id, Mob{Den: den, Home: at})
	_ = c.threat.Add(id, Threat{})
	w.MarkMoved(id)
	g.spawned++
	return id, true
}

// runMobs: wander around home; notice the nearest player; chase it, attack
// it in reach, give up past a leash.
func (g *Game) runMobs(w *ecs.World, t ecs.Tick) {
	leash := g.cfg.NoticeRadius * 3
	g.mobQ.Each(func(id ecs.ID, m *Mob, p *Position, path *Path) {
		attackReady := m.AttackIn.countDown() // every tick, whatever the state
		perceive := g.staggered(id, t, perceptionStagger)
		if m.State == Wandering {
			if perceive {
				if target, ok := g.nearestPlayer(p.Pos, g.cfg.NoticeRadius); ok {
					m.State, m.Target = Chasing, target
				}
			}
			if m.State == Wandering {
				if !path.Active && g.rng.Float64() < g.cfg.WanderChance {
					g.walk(id, path, g.randomAround(m.Home, 30), 2)
				}
				return
			}
		}
		tp, ok := g.c.pos.Get(m.Target)
		if !ok || !g.geo.Within(m.Home, tp.Pos, leash) {
			m.State, m.Target = Wandering, 0
			if t, ok := g.c.threat.Get(id); ok {
				*t = Threat{} // back home, it forgets who hurt it
			}
			g.walk(id, path, m.Home, 2)
			return
		}
		d2 := g.geo.DistanceSq(p.Pos, tp.Pos)
		if reach := g.cfg.AttackRange; d2 <= reach*reach {
			if path.Active {
				path.Active = false
				g.c.path.MarkDirty(id)
			}
			if attackReady {
				g.send(Damage, id, m.Target, mobDamage)
				m.AttackIn = attackCooldown
			}
			return
		}
		// Re-path only when the quarry has moved off the path's end by
		// more than the slack, which grows with the distance (an aim a few
		// degrees off changes nothing far away, and the slack shrinks as
		// the chaser closes in): each redirect is a message to everyone
		// watching the mob.
		slack := max(chaseSlack, math.Sqrt(d2)*chaseSlackPerMetre)
		if !path.Active || (perceive && !g.geo.Within(path.Target, tp.Pos, slack)) {
			g.walk(id, path, tp.Pos, 4)
		}
	})
}

// runMovement walks every entity on an active path, wrap-aware. The
// position is marked for sending on arrival and as resendPosition says
// (walk marks it at a start from standstill); a chunk change is logged for
// reindexing.
func (g *Game) runMovement(w *ecs.World, t ecs.Tick) {
	dt := t.Seconds()
	g.moveQ.Each(func(id ecs.ID, p *Position, path *Path, m *Motion, s *Speed) {
		if !path.Active {
			m.Walking = false
			return
		}
		switch {
		case !m.Walking:
			m.Steered = false // a leg from standstill: walk sent the position with its path
		case path.Target != m.Aim:
			m.Steered = true // a redirect mid-walk: a new path and no position
		}
		m.Aim, m.Walking = path.Target, true
		d := g.geo.Delta(p.Pos, path.Target)
		dist := math.Hypot(d.X, d.Y)
		step := s.MPS * dt
		if dist <= step {
			p.Pos = path.Target
			path.Active = false
			g.c.path.MarkDirty(id)
			g.c.pos.MarkDirty(id)
			m.Walking, m.Steered = false, false
		} else {
			f := step / dist
			p.Pos = g.geo.Translate(p.Pos, torus.Pos{X: d.X * f, Y: d.Y * f})
		}
		m.Steps++
		// Every 8th step of this entity, at a phase set by its id: entities
		// that started walking together must not all resend in one tick.
		if (m.Steps+uint32(id))%PositionResendSteps == 0 && g.resendPosition(id, p, m) {
			g.c.pos.MarkDirty(id)
			m.Steered = false
		}
		if g.geo.ChunkOf(p.Pos) != m.Chunk {
			w.MarkMoved(id)
		}
	})
}

// resendPosition says whether a walking entity's position goes out at
// this resend step (every PositionResendSteps-th step of its own). Clients
// move an entity from its last position along its Path at its Speed, tick
// by tick, so a leg walked straight from the position they were sent
// needs no resend: they know where it is to the step. Nodes do not (a
// ghost keeps the last position it was sent), and neither does a node
// that holds a player's view while another simulates the player, nor a
// client that only draws positions. So the resend goes out:
//   - every time for an entity another node may hold as a ghost (another
//     node's region within the ghost band: perception and reach there
//     read the ghost's position);
//   - every OwnedResendSteps-th step for a player's master and pet (a
//     view held on another node follows the master's ghost; players watch
//     these most);
//   - for any other entity every CorrectionSteps-th step, and only once
//     its walk was redirected since its position was last sent (a client
//     that extrapolates through redirects by its own clock drifts by up to
//     a tick's step at each).
func (g *Game) resendPosition(id ecs.ID, p *Position, m *Motion) bool {
	phase := m.Steps + uint32(id)
	switch {
	case g.c.owner.Has(id) && phase%OwnedResendSteps == 0:
		return true
	case m.Steered && phase%CorrectionSteps == 0:
		return true
	}
	return g.r.Table().InForeignBand(p.Pos, cells.DefaultBands(g.r.Grid()).Ghost)
}

// chaseSlack is how far, in metres, a chased entity may move from the end
// of its chaser's path before the chaser is redirected, at the least; the
// slack grows by chaseSlackPerMetre of the distance between them (a
// quarter: an aim at most about 14° off).
const (
	chaseSlack         = 1.5
	chaseSlackPerMetre = 0.25
)

// PositionResendSteps: a walking entity's position is resent at most every
// 8th step (resendPosition says to whom it matters); clients animate from
// Path and Speed in between.
const PositionResendSteps = 8

// OwnedResendSteps: a player's master or pet no other node holds as a
// ghost has its position resent every 16th step (0.8 s, 4 m at a
// master's walk).
const OwnedResendSteps = 2 * PositionResendSteps

// CorrectionSteps: any other entity no other node watches, whose walk was
// redirected, has its position resent every 64th step (3.2 s at 20 Hz).
const CorrectionSteps = 8 * PositionResendSteps
