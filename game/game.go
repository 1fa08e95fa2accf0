package game

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/entityid"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
)

// Subscriber is who receives batches: an account today (a node later).
type Subscriber = interest.Subscriber

// Report describes one tick.
type Report struct {
	Tick     uint64
	Entities int
	// Outbox is what the flush encoded and delivered.
	Outbox outbox.Stats
	// Materialised and Dematerialised count residency changes.
	Materialised, Dematerialised int
	// Intents is how many intents were applied.
	Intents int
	// Spawned and Died count mobs.
	Spawned, Died int
}

// Game is one node's world of the reference game. Like the ecs.World it
// wraps, it is owned by one goroutine.
type Game struct {
	cfg  Config
	geo  torus.World
	w    *ecs.World
	c    components
	subs *interest.Subscriptions[Subscriber]
	vis  *interest.Visibility[Subscriber, ecs.ID]
	res  *interest.Residency
	out  *outbox.Outbox[Subscriber, ecs.ID]
	view interest.View

	// Entity ids carry the boot time plus the ticks run: idClock is moved
	// to boot + tick × interval before each tick, never by the host.
	boot    time.Time
	idClock *clock.Fake
	ids     *entityid.Generator
	// phaseBase is the id an entity minted at boot would have with node
	// and sequence 0: staggering by an id's offset from it makes the
	// simulation the same whatever wall time the node booted at.
	phaseBase uint64
	rng       *rand.Rand

	intents, spareIntents []Intent
	// masters and accountOf are one relation kept both ways: the forget
	// hook runs after the entity's components are gone, so it can find the
	// account of a master only here.
	masters   map[account.ID]ecs.ID // account → master
	accountOf map[ecs.ID]account.ID // master → account
	// dens and denColumn are one relation kept both ways, for the same
	// reason.
	dens      map[interest.Column]ecs.ID
	denColumn map[ecs.ID]interest.Column
	players   playerGrid

	viewMoved []ecs.ID
	manifest  interest.Manifest
	residents []ecs.ID
	report    Report

	masterQ *ecs.Query3[Master, Position, Path]
	petQ    *ecs.Query3[Pet, Position, Path]
	denQ    *ecs.Query2[Den, Position]
	mobQ    *ecs.Query3[Mob, Position, Path]
	moveQ   *ecs.Query4[Position, Path, Motion, Speed]
}

// New builds the world, logs the players in at their homes, and registers
// the systems. Nothing is sent until the first Step.
func New(cfg Config) (*Game, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	geo, err := torus.New(cfg.Torus)
	if err != nil {
		return nil, err
	}
	w, err := ecs.New(ecs.Config{TickInterval: cfg.TickInterval})
	if err != nil {
		return nil, err
	}
	c, err := registerComponents(w)
	if err != nil {
		return nil, err
	}
	// Whole milliseconds, so that two boots shift every id by the same
	// amount whatever the sub-millisecond part of their readings.
	boot := cfg.Clock.Now().Truncate(time.Millisecond)
	base, err := entityid.Make(boot.UnixMilli()-entityid.EpochUnixMilli, 0, 0)
	if err != nil {
		return nil, errcode.Config("Clock", boot, "reads outside the entity id range (from 2024-01-01)")
	}
	idClock := clock.NewFake(boot)
	ids, err := entityid.NewGenerator(entityid.Config{Node: cfg.Node, Clock: idClock})
	if err != nil {
		return nil, err
	}
	subs := interest.NewSubscriptions[Subscriber](geo)
	res, err := interest.NewResidency(geo, interest.ResidencyConfig{MaterialiseBudget: cfg.MaterialiseBudget})
	if err != nil {
		return nil, err
	}
	interest.FollowClients(res, subs)
	g := &Game{
		cfg: cfg, geo: geo, w: w, c: c,
		subs: subs, vis: interest.NewVisibility[Subscriber, ecs.ID](subs), res: res,
		view: interest.DefaultView(),
		boot: boot, idClock: idClock, ids: ids, phaseBase: uint64(base),
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		masters:   make(map[account.ID]ecs.ID),
		accountOf: make(map[ecs.ID]account.ID),
		dens:      make(map[interest.Column]ecs.ID),
		denColumn: make(map[ecs.ID]interest.Column),
		players:   newPlayerGrid(),
	}
	g.out = outbox.New[Subscriber, ecs.ID](outboxWorld{g})
	if err := g.registerEncoders(); err != nil {
		return nil, err
	}
	g.masterQ = ecs.NewQuery3(c.master, c.pos, c.path).Without(c.frozen)
	g.petQ = ecs.NewQuery3(c.pet, c.pos, c.path).Without(c.frozen)
	g.denQ = ecs.NewQuery2(c.den, c.pos).Without(c.frozen)
	g.mobQ = ecs.NewQuery3(c.mob, c.pos, c.path).Without(c.frozen)
	g.moveQ = ecs.NewQuery4(c.pos, c.path, c.motion, c.speed).Without(c.frozen)
	w.OnDestroy(g.onDestroy)
	w.OnForget(g.onForget)
	for _, s := range []ecs.System{
		{Name: "intents", Order: 0, Run: g.applyIntents},
		{Name: "players", Order: 10, Run: g.runPlayers},
		{Name: "pets", Order: 11, Run: g.runPets},
		{Name: "dens", Order: 20, Run: g.runDens},
		{Name: "mobs", Order: 30, Run: g.runMobs},
		{Name: "movement", Order: 40, Run: g.runMovement},
	} {
		if err := w.AddSystem(s); err != nil {
			return nil, err
		}
	}
	w.OnTickEnd(g.endTick)
	for a := 1; a <= cfg.Players; a++ {
		if err := g.login(account.ID(a)); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// World returns the ecs world (for tests, tools and the node that hosts
// the game).
func (g *Game) World() *ecs.World { return g.w }

// Geometry returns the torus.
func (g *Game) Geometry() torus.World { return g.geo }

// Attach routes an account's batches to sink. Accounts with no sink have
// their messages dropped and counted.
func (g *Game) Attach(account account.ID, sink outbox.Sink) {
	g.out.Attach(interest.Account(account), sink)
}

// Master returns the master entity of an account, while this world holds
// it (a master destroyed or evicted is forgotten).
func (g *Game) Master(account account.ID) (ecs.ID, bool) {
	id, ok := g.masters[account]
	return id, ok
}

// Step runs one tick and reports it.
func (g *Game) Step() Report {
	next := g.w.CurrentTick().N + 1
	// Entity ids carry the boot time plus the simulated time. Run in real
	// time (ecs.Run never runs a tick early) that is never ahead of the
	// wall clock, so a restart, which reads the wall clock again, mints
	// above every id of the run before.
	if at := g.boot.Add(time.Duration(next) * g.cfg.TickInterval); at.After(g.idClock.Now()) {
		g.idClock.Set(at)
	}
	g.report = Report{}
	g.w.Step()
	return g.report
}

// newID mints an entity id. A simulated millisecond holds 2048 ids; when a
// burst of spawns spends them, the id clock moves on by a millisecond
// rather than waiting for a tick that the caller itself would produce.
func (g *Game) newID() (ecs.ID, error) {
	for {
		id, err := g.ids.TryNext()
		if errors.Is(err, entityid.ErrSequenceExhausted) {
			g.idClock.Advance(time.Millisecond)
			continue
		}
		return id, err
	}
}

// home returns account's start position: seeded, inside the square of
// side Area centred on the origin (so across both seams).
func (g *Game) home(account account.ID) torus.Pos {
	r := rand.New(rand.NewPCG(g.cfg.Seed, uint64(account)))
	return g.geo.Normalise(torus.Pos{
		X: (r.Float64() - 0.5) * g.cfg.Area,
		Y: (r.Float64() - 0.5) * g.cfg.Area,
	})
}

func (g *Game) login(account account.ID) error {
	_, err := g.spawnPlayer(account, g.home(account))
	return err
}

// spawnPlayer creates account's master at home and its pet beside it.
func (g *Game) spawnPlayer(account account.ID, home torus.Pos) (ecs.ID, error) {
	masterID, err := g.newID()
	if err != nil {
		return 0, err
	}
	petID, err := g.newID()
	if err != nil {
		return 0, err
	}
	home = g.geo.Normalise(home)
	c := g.c
	errs := []error{
		g.w.CreateEntity(masterID),
		c.pos.Add(masterID, Position{home}),
		c.path.Add(masterID, Path{}),
		c.speed.Add(masterID, Speed{MPS: 5}),
		c.visual.Add(masterID, Visual{KindPlayer}),
		c.health.Add(masterID, Health{HP: 100, Max: 100}),
		c.exp.Add(masterID, Exp{}),
		c.owner.Add(masterID, Owner{account}),
		c.motion.Add(masterID, Motion{}),
		c.master.Add(masterID, Master{Pet: petID, Home: home}),

		g.w.CreateEntity(petID),
		c.pos.Add(petID, Position{g.geo.Translate(home, torus.Pos{X: -1.5, Y: -1.5})}),
		c.path.Add(petID, Path{}),
		c.speed.Add(petID, Speed{MPS: 6}),
		c.visual.Add(petID, Visual{KindPet}),
		c.health.Add(petID, Health{HP: 60, Max: 60}),
		c.owner.Add(petID, Owner{account}),
		c.motion.Add(petID, Motion{}),
		c.pet.Add(petID, Pet{Master: masterID}),
	}
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("game: login %d: %w", account, err)
	}
	g.w.MarkMoved(masterID)
	g.w.MarkMoved(petID)
	g.masters[account] = masterID
	g.accountOf[masterID] = account
	return masterID, nil
}

// endTick is the output pipeline, run after the tick's structural changes
// are applied.
func (g *Game) endTick(w *ecs.World, t ecs.Tick) {
	w.DrainMoved(g.reindex)
	for _, id := range g.viewMoved {
		g.refreshView(id)
	}
	g.viewMoved = g.viewMoved[:0]

	changes := g.res.Commit()
	g.report.Materialised = len(changes.Materialised)
	g.report.Dematerialised = len(changes.Dematerialised)
	for _, col := range changes.Dematerialised {
		if id, ok := g.dens[col]; ok {
			_ = w.Destroy(id) // its listener takes its mobs with it; the forget hook unlists it
		}
	}
	for _, col := range changes.Materialised {
		g.spawnDen(col)
	}

	g.out.AddDeliveries(g.vis.Drain())
	g.drainDirty(g.c.pos, WirePosition)
	g.drainDirty(g.c.path, WirePath)
	g.drainDirty(g.c.speed, WireSpeed)
	g.drainDirty(g.c.visual, WireVisual)
	g.drainDirty(g.c.health, WireHealth)
	g.drainDirty(g.c.exp, WireExp)
	g.report.Outbox = g.out.Flush(t.N)
	g.report.Tick = t.N
	g.report.Entities = w.Len()
}

func (g *Game) drainDirty(c ecs.Component, wire outbox.ComponentType) {
	c.DrainDirty(func(id ecs.ID) { g.out.MarkDirty(id, wire) })
}

// reindex files an entity under its current chunk, moves the residency
// anchor of a master or pet, and queues a master's view for refresh.
func (g *Game) reindex(id ecs.ID) {
	p, ok := g.c.pos.Get(id)
	if !ok {
		return
	}
	chunk := g.geo.ChunkOf(p.Pos)
	if m, ok := g.c.motion.Get(id); ok {
		m.Chunk = chunk
	}
	g.vis.Reindex(id, chunk)
	if g.c.master.Has(id) || g.c.pet.Has(id) {
		g.res.SetAnchor(interest.AnchorID(id), interest.ColumnOf(chunk))
	}
	if g.c.master.Has(id) {
		g.players.move(id, chunk)
		g.viewMoved = append(g.viewMoved, id)
	}
}

// refreshView keeps a player's announced set on its 11 × 11 × 3 view and,
// headless, delivers every newly announced chunk at once.
func (g *Game) refreshView(master ecs.ID) {
	o, ok := g.c.owner.Get(master)
	if !ok {
		return
	}
	m, ok := g.c.motion.Get(master)
	if !ok {
		return
	}
	sub := interest.Account(o.Account)
	g.subs.ViewManifest(sub, m.Chunk, g.view, &g.manifest)
	g.subs.Apply(sub, g.manifest)
	for _, c := range g.manifest.Added {
		g.subs.MarkSent(sub, c)
	}
}

// denSite says whether column col is a den cell and where in it the den
// stands: a pure function of the seed and the normalised column, so every
// node agrees.
func (g *Game) denSite(col interest.Column) (at torus.Pos, key interest.Column, ok bool) {
	n := g.geo.NormaliseChunk(torus.ChunkPos{X: col.X, Y: col.Y})
	key = interest.Column{X: n.X, Y: n.Y}
	r := rand.New(rand.NewPCG(g.cfg.Seed^0xd0e5, uint64(uint32(n.X))<<32|uint64(uint32(n.Y))))
	if r.Float64() >= g.cfg.DenChance {
		return torus.Pos{}, key, false
	}
	// Keep a margin inside the column so the den's chunk is the cell.
	edge := g.geo.ChunkEdge()
	origin := g.geo.ChunkOrigin(n)
	return torus.Pos{X: origin.X + 1 + r.Float64()*(edge-2), Y: origin.Y + 1 + r.Float64()*(edge-2)}, key, true
}

func (g *Game) spawnDen(col interest.Column) {
	at, key, ok := g.denSite(col)
	if !ok {
		return
	}
	if _, dup := g.dens[key]; dup {
		return
	}
	id, err := g.newID()
	if err != nil {
		return
	}
	if errors.Join(
		g.w.CreateEntity(id),
		g.c.pos.Add(id, Position{at}),
		g.c.visual.Add(id, Visual{KindDen}),
		g.c.den.Add(id, Den{Column: key}),
		g.c.motion.Add(id, Motion{}),
	) != nil {
		return
	}
	g.dens[key] = id
	g.denColumn[id] = key
	g.reindex(id)
}

func (g *Game) onDestroy(w *ecs.World, id ecs.ID) {
	reason := interest.Gone
	if d, ok := g.c.dying.Get(id); ok {
		reason = d.Reason
	}
	g.vis.Remove(id, reason)
	if m, ok := g.c.mob.Get(id); ok {
		if d, ok := g.c.den.Get(m.Den); ok {
			for i, x := range d.Mobs {
				if x == id {
					d.Mobs = append(d.Mobs[:i], d.Mobs[i+1:]...)
					break
				}
			}
		}
	}
	if d, ok := g.c.den.Get(id); ok {
		for _, m := range d.Mobs {
			_ = w.Destroy(m)
		}
	}
}

// onForget removes everything the game keeps about an entity outside its
// components, on Destroy and Evict alike: its place in the visibility
// index (without a vanish: an evicted entity goes on existing, written
// elsewhere), the player grid, its residency anchor, its account's master
// entry and its column's den entry. It runs after the components are
// gone, so it reads none: every step is a lookup by id that does nothing
// for an entity it does not concern.
func (g *Game) onForget(id ecs.ID) {
	g.vis.Evict(id)
	g.players.remove(id)
	g.res.RemoveAnchor(interest.AnchorID(id))
	if a, ok := g.accountOf[id]; ok {
		delete(g.accountOf, id)
		if g.masters[a] == id {
			delete(g.masters, a)
		}
	}
	if col, ok := g.denColumn[id]; ok {
		delete(g.denColumn, id)
		if g.dens[col] == id {
			delete(g.dens, col)
		}
	}
}

// walk starts or redirects a path. The client gets the path and the speed;
// a standing entity's start position goes with them, while a walking one is
// redirected from where the client already animates it.
func (g *Game) walk(id ecs.ID, path *Path, target torus.Pos, mps float64) {
	if !path.Active {
		g.c.pos.MarkDirty(id)
	}
	path.Target = g.geo.Normalise(target)
	path.Active = true
	g.c.path.MarkDirty(id)
	if s, ok := g.c.speed.Get(id); ok && s.MPS != mps {
		s.MPS = mps
		g.c.speed.MarkDirty(id)
	}
}

// randomAround returns a point uniformly within radius r of p.
func (g *Game) randomAround(p torus.Pos, r float64) torus.Pos {
	a := g.rng.Float64() * 2 * math.Pi
	d := r * math.Sqrt(g.rng.Float64())
	return g.geo.Translate(p, torus.Pos{X: d * math.Cos(a), Y: d * math.Sin(a)})
}
