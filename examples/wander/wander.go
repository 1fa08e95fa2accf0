package wander

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// Wire types of the synced components. The numbers are the protocol.
const (
	WirePosition outbox.ComponentType = 1 // public in range: three float32 (zone.AppendPos)
	WireMood     outbox.ComponentType = 2 // public in range: one byte
	WireSecret   outbox.ComponentType = 3 // owner only: uint32, little endian
)

// Mood is a wanderer's public state, redrawn every MoodEvery steps.
type Mood struct{ Value uint8 }

// Secret is a wanderer's owner-only state, redrawn every SecretEvery
// steps.
type Secret struct{ Value uint32 }

// Walk is a wanderer's movement state. Everything in it is the wanderer's
// own count, never a tick number, so it means the same on any node.
type Walk struct {
	// Region is the region the wanderer spawned in and never leaves
	// (unless Config.Roam lets it); Home is its spawn point.
	Region cells.RegionID
	Home   torus.Pos
	// Leg numbers the waypoint it walks to; Target is that waypoint.
	Leg    uint32
	Target torus.Pos
	// Steps counts the ticks it has walked: the clock of its moods and
	// secrets.
	Steps uint32
}

// Module is the wanderers as a zone module. Like the runtime, it is owned
// by the goroutine that steps the runtime.
type Module struct {
	cfg  Config
	r    *zone.Runtime
	geo  torus.World
	grid cells.Grid

	pos    *ecs.Store[zone.Position]
	mood   *ecs.Store[Mood]
	secret *ecs.Store[Secret]
	walk   *ecs.Store[Walk]
	q      *ecs.Query4[zone.Position, Walk, Mood, Secret]

	created []ecs.ID
}

var _ zone.Module = (*Module)(nil)

// New returns the module for one runtime (zone.New(cfg, m)).
func New(cfg Config) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Module{cfg: cfg.WithDefaults()}, nil
}

// Config returns the module's configuration, defaults filled in.
func (m *Module) Config() Config { return m.cfg }

// Runtime returns the runtime the module was set up on (nil before).
func (m *Module) Runtime() *zone.Runtime { return m.r }

// Wanderers returns the ids of the wanderers Setup created on this node,
// in index order.
func (m *Module) Wanderers() []ecs.ID { return append([]ecs.ID(nil), m.created...) }

// ID returns the id of wanderer i: zone.DerivedID(i), the same on every
// node.
func ID(i int) (ecs.ID, error) { return zone.DerivedID(uint64(i)) }

// AccountOf returns the account that owns wanderer i.
func (c Config) AccountOf(i int) account.ID {
	c = c.WithDefaults()
	return account.ID(1 + i%c.Accounts)
}

// Setup implements zone.Module: it registers the components and the
// system and creates the wanderers that spawn in regions this node owns.
func (m *Module) Setup(r *zone.Runtime) error {
	if m.r != nil {
		return errors.New("wander: a module runs on one runtime")
	}
	table := r.Table()
	grid := table.Grid()
	geo := grid.World()
	if e := grid.RegionEdge(); !(2*m.cfg.Margin < e) {
		return errcode.Config("Margin", m.cfg.Margin, fmt.Sprintf("must be less than half the region edge (%v m)", e))
	}
	if m.cfg.Area > min(geo.Width(), geo.Height()) {
		return errcode.Config("Area", m.cfg.Area, fmt.Sprintf("must fit the torus (%v × %v m)", geo.Width(), geo.Height()))
	}
	m.r, m.geo, m.grid = r, geo, grid
	if err := m.register(r); err != nil {
		return err
	}
	m.q = zone.Query4(r, m.pos, m.walk, m.mood, m.secret)
	if err := r.AddSystem(ecs.System{Name: "wander", Run: m.run}); err != nil {
		return err
	}
	for i := range m.cfg.Entities {
		if p := m.spawn(i); table.OwnerOf(p) == r.Name() {
			if err := m.create(i, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// register registers the components in the order appear bursts list
// them: position, mood, secret.
func (m *Module) register(r *zone.Runtime) error {
	m.pos = r.Positions()
	if err := r.SyncPosition(WirePosition); err != nil {
		return err
	}
	var err error
	if m.mood, err = zone.Register(r, zone.Spec[Mood]{Name: "wander.mood", Wire: WireMood,
		Handoff: zone.FixedCodec[Mood](),
		Encode:  func(dst []byte, v *Mood) []byte { return append(dst, v.Value) },
	}); err != nil {
		return err
	}
	if m.secret, err = zone.Register(r, zone.Spec[Secret]{Name: "wander.secret", Wire: WireSecret,
		Handoff:  zone.FixedCodec[Secret](),
		Audience: zone.OwnerOnly,
		Encode:   func(dst []byte, v *Secret) []byte { return binary.LittleEndian.AppendUint32(dst, v.Value) },
	}); err != nil {
		return err
	}
	m.walk, err = zone.Register(r, zone.Spec[Walk]{Name: "wander.walk", Handoff: zone.FixedCodec[Walk]()})
	return err
}

// create makes wanderer i at p, its spawn point.
func (m *Module) create(i int, p torus.Pos) error {
	id, err := ID(i)
	if err != nil {
		return err
	}
	acct := m.cfg.AccountOf(i)
	region := m.grid.RegionOf(p)
	if err := errors.Join(
		m.r.World().CreateEntity(id),
		m.pos.Add(id, zone.Position{Pos: p}),
		m.r.SetOwner(id, acct),
		m.walk.Add(id, Walk{Region: region, Home: p, Target: m.waypointFrom(id, region, p, 0)}),
		m.mood.Add(id, Mood{Value: m.moodAt(id, 0)}),
		m.secret.Add(id, Secret{Value: m.secretAt(id, 0)}),
	); err != nil {
		return fmt.Errorf("wander: create %d: %w", i, err)
	}
	m.r.World().MarkMoved(id)
	if i < m.cfg.Accounts {
		m.r.SetViewer(acct, id)
		m.r.SetAnchor(id)
	}
	m.created = append(m.created, id)
	return nil
}

// run is the one system: a step of every wanderer, then its mood and
// secret if their time has come.
func (m *Module) run(w *ecs.World, t ecs.Tick) {
	step := m.cfg.Speed * t.Seconds()
	m.q.Each(func(id ecs.ID, p *zone.Position, wk *Walk, mood *Mood, sec *Secret) {
		m.stepTowards(id, p, wk, step)
		m.pos.MarkDirty(id)
		if c, ok := m.r.ChunkOf(id); !ok || c != m.geo.ChunkOf(p.Pos) {
			w.MarkMoved(id)
		}
		wk.Steps++
		if v := m.moodAt(id, wk.Steps); v != mood.Value {
			mood.Value = v
			m.mood.MarkDirty(id)
		}
		if v := m.secretAt(id, wk.Steps); v != sec.Value {
			sec.Value = v
			m.secret.MarkDirty(id)
		}
	})
}

// stepTowards moves p by step metres towards the waypoint, and on arrival
// starts the next leg. Both ends lie in the region's inner rectangle in
// normalised coordinates, so the straight segment between them, not the
// torus's shortest one (the same unless the region spans more than half
// the world), is the path, and it stays inside. The clamp only undoes
// rounding.
func (m *Module) stepTowards(id ecs.ID, p *zone.Position, wk *Walk, step float64) {
	dx, dy := wk.Target.X-p.X, wk.Target.Y-p.Y
	dist := math.Hypot(dx, dy)
	if m.cfg.Roam > 0 {
		// Across borders: the torus's shortest path to the waypoint.
		d := m.geo.Delta(p.Pos, wk.Target)
		if dist := math.Hypot(d.X, d.Y); dist <= step {
			p.Pos = wk.Target
			wk.Leg++
			wk.Target = m.waypointFrom(id, wk.Region, wk.Home, wk.Leg)
		} else {
			f := step / dist
			p.Pos = m.geo.Translate(p.Pos, torus.Pos{X: d.X * f, Y: d.Y * f})
		}
		return
	}
	if dist <= step {
		p.Pos = wk.Target
		wk.Leg++
		wk.Target = m.waypoint(id, wk.Region, wk.Leg)
		return
	}
	x0, y0, x1, y1 := m.inner(wk.Region)
	f := step / dist
	p.X = min(max(p.X+dx*f, x0), x1)
	p.Y = min(max(p.Y+dy*f, y0), y1)
}

// inner is the rectangle of region r at least Margin from its borders, in
// normalised coordinates (closed).
func (m *Module) inner(r cells.RegionID) (x0, y0, x1, y1 float64) {
	x0, y0, x1, y1 = m.grid.Bounds(r)
	mg := m.cfg.Margin
	return x0 + mg, y0 + mg, x1 - mg, y1 - mg
}

// spawn is wanderer i's spawn point: a point of the spawn square (or the
// torus) drawn from (Seed, i), normalised, then clamped into the inner
// rectangle of the region it fell in, so it never starts in the margin.
func (m *Module) spawn(i int) torus.Pos {
	u, v := unit(m.draw(saltSpawnX, uint64(i), 0)), unit(m.draw(saltSpawnY, uint64(i), 0))
	var p torus.Pos
	if a := m.cfg.Area; a == 0 {
		p = torus.Pos{X: u * m.geo.Width(), Y: v * m.geo.Height()}
	} else {
		p = torus.Pos{X: m.cfg.Centre.X + (u-0.5)*a, Y: m.cfg.Centre.Y + (v-0.5)*a}
	}
	p = m.geo.Normalise(p)
	x0, y0, x1, y1 := m.inner(m.grid.RegionOf(p))
	return torus.Pos{X: min(max(p.X, x0), x1), Y: min(max(p.Y, y0), y1)}
}

// waypoint is the end of leg n of id: uniform in the inner rectangle of
// its region.
func (m *Module) waypoint(id ecs.ID, r cells.RegionID, leg uint32) torus.Pos {
	x0, y0, x1, y1 := m.inner(r)
	u, v := unit(m.draw(saltWaypointX, uint64(id), uint64(leg))), unit(m.draw(saltWaypointY, uint64(id), uint64(leg)))
	return torus.Pos{X: x0 + u*(x1-x0), Y: y0 + v*(y1-y0)}
}

// waypointFrom is waypoint, or with Config.Roam a point of the square of
// side Roam around home, on the torus.
func (m *Module) waypointFrom(id ecs.ID, r cells.RegionID, home torus.Pos, leg uint32) torus.Pos {
	if m.cfg.Roam <= 0 {
		return m.waypoint(id, r, leg)
	}
	u, v := unit(m.draw(saltWaypointX, uint64(id), uint64(leg))), unit(m.draw(saltWaypointY, uint64(id), uint64(leg)))
	return m.geo.Translate(home, torus.Pos{X: (u - 0.5) * m.cfg.Roam, Y: (v - 0.5) * m.cfg.Roam})
}

// moodAt is id's mood after steps steps: redrawn every MoodEvery steps, at
// a phase of its own so that wanderers created together do not all change
// in one tick.
func (m *Module) moodAt(id ecs.ID, steps uint32) uint8 {
	return uint8(m.draw(saltMood, uint64(id), m.epoch(saltMoodPhase, id, steps, m.cfg.MoodEvery)))
}

// secretAt is id's secret after steps steps, like moodAt.
func (m *Module) secretAt(id ecs.ID, steps uint32) uint32 {
	return uint32(m.draw(saltSecret, uint64(id), m.epoch(saltSecretPhase, id, steps, m.cfg.SecretEvery)))
}

// epoch numbers the period of every steps that steps falls in, shifted
// by a phase drawn from id.
func (m *Module) epoch(salt uint64, id ecs.ID, steps uint32, every int) uint64 {
	e := uint64(every)
	return (uint64(steps) + m.draw(salt, uint64(id), 0)%e) / e
}

// Salts of the draws: each stream of the module has its own.
const (
	saltSpawnX uint64 = iota + 1
	saltSpawnY
	saltWaypointX
	saltWaypointY
	saltMood
	saltMoodPhase
	saltSecret
	saltSecretPhase
)

// draw is the module's one source of randomness: a hash of the seed, the
// stream, a key (a wanderer's index or id) and a counter. Being a pure
// function, it gives every node the same value whatever order it visits
// wanderers in.
func (m *Module) draw(salt, key, n uint64) uint64 {
	return mix(mix(mix(m.cfg.Seed^salt*0x9e3779b97f4a7c15)+key) + n)
}

// mix is the splitmix64 finaliser (a bijection of uint64 with good
// avalanche), offset so that zero does not map to zero.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// unit maps a hash to [0, 1) with 53 bits.
func unit(h uint64) float64 { return float64(h>>11) * 0x1p-53 }
