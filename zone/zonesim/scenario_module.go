package zonesim

import (
	"errors"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// scriptWalk is a scenario entity's walk: towards Target at Speed m/s
// (standing once there). It travels with the entity in a handoff.
type scriptWalk struct {
	Target torus.Pos
	Speed  float64
}

// scriptModule is the module of a scenario's nodes: entities a script
// places, each walking in a straight line where the script says.
type scriptModule struct {
	r    *zone.Runtime
	geo  torus.World
	pos  *ecs.Store[zone.Position]
	walk *ecs.Store[scriptWalk]
	q    *ecs.Query2[zone.Position, scriptWalk]
}

var _ zone.Module = (*scriptModule)(nil)

func (m *scriptModule) Setup(r *zone.Runtime) error {
	m.r, m.geo, m.pos = r, r.Geometry(), r.Positions()
	if err := r.SyncPosition(1); err != nil {
		return err
	}
	var err error
	if m.walk, err = zone.Register(r, zone.Spec[scriptWalk]{Name: "script.walk", Handoff: zone.FixedCodec[scriptWalk]()}); err != nil {
		return err
	}
	m.q = zone.Query2(r, m.pos, m.walk)
	return r.AddSystem(ecs.System{Name: "script", Run: m.run})
}

func (m *scriptModule) create(id ecs.ID, p torus.Pos, w scriptWalk) error {
	if err := errors.Join(m.r.World().CreateEntity(id), m.pos.Add(id, zone.Position{Pos: m.geo.Normalise(p)}), m.walk.Add(id, w)); err != nil {
		return err
	}
	m.r.World().MarkMoved(id)
	return nil
}

func (m *scriptModule) setWalk(id ecs.ID, w scriptWalk) {
	if wk, ok := m.walk.Get(id); ok {
		*wk = w
	}
}

func (m *scriptModule) jump(id ecs.ID, to torus.Pos) {
	if p, ok := m.pos.Get(id); ok {
		p.Pos = m.geo.Normalise(to)
		m.pos.MarkDirty(id)
		m.r.World().MarkMoved(id)
	}
	m.setWalk(id, scriptWalk{Target: to})
}

func (m *scriptModule) run(w *ecs.World, t ecs.Tick) {
	m.q.Each(func(id ecs.ID, p *zone.Position, wk *scriptWalk) {
		if wk.Speed <= 0 {
			return
		}
		d := m.geo.Delta(p.Pos, wk.Target)
		dist := m.geo.Distance(p.Pos, wk.Target)
		step := wk.Speed * t.Seconds()
		if dist <= step {
			p.Pos, wk.Speed = m.geo.Normalise(wk.Target), 0
		} else {
			p.Pos = m.geo.Normalise(torus.Pos{X: p.Pos.X + d.X*step/dist, Y: p.Pos.Y + d.Y*step/dist, Z: p.Pos.Z})
		}
		m.pos.MarkDirty(id)
		w.MarkMoved(id)
	})
}
