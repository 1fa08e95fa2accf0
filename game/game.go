package game

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// Report describes one tick: the runtime's report and the game's counts.
type Report struct {
	zone.Report
	// Spawned and Died count mobs.
	Spawned, Died int
}

// Game is the reference game as a zone module: on one runtime it is one
// node's share of the world. Like the runtime, it is owned by one
// goroutine.
type Game struct {
	cfg Config
	r   *zone.Runtime
	geo torus.World
	w   *ecs.World
	c   components
	rng *rand.Rand

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

	spawned, died int

	masterQ *ecs.Query3[Master, Position, Path]
	petQ    *ecs.Query3[Pet, Position, Path]
	denQ    *ecs.Query2[Den, Position]
	mobQ    *ecs.Query3[Mob, Position, Path]
	moveQ   *ecs.Query4[Position, Path, Motion, Speed]

	econ econState // econ.go
}

// NewModule returns the game as a module for a zone runtime (zone.New).
// The runtime's torus must be cfg.Torus.
func NewModule(cfg Config) (*Game, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Game{
		cfg:       cfg,
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		masters:   make(map[account.ID]ecs.ID),
		accountOf: make(map[ecs.ID]account.ID),
		dens:      make(map[interest.Column]ecs.ID),
		denColumn: make(map[ecs.ID]interest.Column),
		players:   newPlayerGrid(),
	}, nil
}

// RuntimeConfig is the runtime configuration of a game alone in its world.
func (c Config) RuntimeConfig() zone.Config {
	c = c.WithDefaults()
	return zone.Config{
		Node:              c.Node,
		Grid:              cells.GridConfig{World: c.Torus, RegionEdge: c.RegionEdge},
		MaterialiseBudget: c.MaterialiseBudget,
		TickInterval:      c.TickInterval,
		Clock:             c.Clock,
	}
}

// New builds a game alone in its world: a runtime that owns every region,
// hosting the module. Nothing is sent until the first Step.
func New(cfg Config) (*Game, error) {
	g, err := NewModule(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := zone.New(g.cfg.RuntimeConfig(), g); err != nil {
		return nil, err
	}
	return g, nil
}

// Setup implements zone.Module: it registers the components, systems and
// hooks, and logs in the players whose homes lie in regions this node
// owns.
func (g *Game) Setup(r *zone.Runtime) error {
	if g.r != nil {
		return errors.New("game: a module runs on one runtime")
	}
	if r.Geometry().Config() != g.cfg.Torus {
		return fmt.Errorf("game: the runtime's torus %+v is not the game's %+v", r.Geometry().Config(), g.cfg.Torus)
	}
	c, err := registerComponents(r)
	if err != nil {
		return err
	}
	g.r, g.geo, g.w, g.c = r, r.Geometry(), r.World(), c
	if err := g.setupEconomy(r); err != nil {
		return err
	}
	// The runtime's constructors leave out ghosts and frozen entities.
	g.masterQ = zone.Query3(r, c.master, c.pos, c.path)
	g.petQ = zone.Query3(r, c.pet, c.pos, c.path)
	g.denQ = zone.Query2(r, c.den, c.pos)
	g.mobQ = zone.Query3(r, c.mob, c.pos, c.path)
	g.moveQ = zone.Query4(r, c.pos, c.path, c.motion, c.speed)
	g.w.OnDestroy(g.onDestroy)
	g.w.OnForget(g.onForget)
	r.OnIntent(g.onIntent)
	r.OnReindex(g.reindexed)
	r.OnColumns(zone.ColumnHooks{Materialise: g.spawnDen, Dematerialise: g.removeDen})
	r.SetParty(g.appendParty)
	r.SetCompanions(g.appendCompanions)
	r.SetPlayers(g.playerHooks())
	for _, s := range []ecs.System{
		{Name: "players", Order: 10, Run: g.runPlayers},
		{Name: "pets", Order: 11, Run: g.runPets},
		{Name: "dens", Order: 20, Run: g.runDens},
		{Name: "mobs", Order: 30, Run: g.runMobs},
		{Name: "movement", Order: 40, Run: g.runMovement},
	} {
		if err := r.AddSystem(s); err != nil {
			return err
		}
	}
	table := r.Table()
	for a := 1; a <= g.cfg.Players && !g.cfg.NoBots; a++ {
		if home := g.home(account.ID(a)); table.OwnerOf(home) == r.Name() {
			if _, err := g.spawnPlayer(account.ID(a), home); err != nil {
				return err
			}
		}
	}
	return nil
}

// Config returns the game's configuration, defaults filled in.
func (g *Game) Config() Config { return g.cfg }

// Runtime returns the runtime the game runs on.
func (g *Game) Runtime() *zone.Runtime { return g.r }

// World returns the ecs world (for tests, tools and the node that hosts
// the game).
func (g *Game) World() *ecs.World { return g.w }

// Geometry returns the torus.
func (g *Game) Geometry() torus.World { return g.geo }

// Attach routes an account's batches to sink. Accounts with no sink have
// their messages dropped and counted.
func (g *Game) Attach(account account.ID, sink outbox.Sink) { g.r.Attach(account, sink) }

// Master returns the master entity of an account, while this world holds
// it (a master destroyed or evicted is forgotten).
func (g *Game) Master(account account.ID) (ecs.ID, bool) {
	id, ok := g.masters[account]
	return id, ok
}

// Step runs one tick of the runtime and reports it.
func (g *Game) Step() Report {
	g.spawned, g.died = 0, 0
	rep := g.r.Step()
	return Report{Report: rep, Spawned: g.spawned, Died: g.died}
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

// spawnPlayer creates account's master at home and its pet beside it: a
// bot, which the account's view follows here.
func (g *Game) spawnPlayer(account account.ID, home torus.Pos) (ecs.ID, error) {
	masterID, err := g.r.NewID()
	if err != nil {
		return 0, err
	}
	petID, err := g.r.NewID()
	if err != nil {
		return 0, err
	}
	if err := g.createPlayer(account, masterID, petID, home, newPlayerState(), false); err != nil {
		return 0, err
	}
	g.r.SetViewer(account, masterID)
	return masterID, nil
}

// createPlayer creates a player's master and pet with the given ids at
// home, from st; manual for a client's player, else a bot.
func (g *Game) createPlayer(a account.ID, masterID, petID ecs.ID, home torus.Pos, st playerState, manual bool) error {
	home = g.geo.Normalise(home)
	c := g.c
	errs := []error{
		g.w.CreateEntity(masterID),
		c.pos.Add(masterID, Position{Pos: home}),
		c.path.Add(masterID, Path{}),
		c.speed.Add(masterID, Speed{MPS: 5}),
		c.visual.Add(masterID, Visual{KindPlayer}),
		c.health.Add(masterID, Health{HP: int32(st.hp), Max: 100}),
		c.exp.Add(masterID, Exp{Points: st.exp}),
		g.r.SetOwner(masterID, a),
		c.motion.Add(masterID, Motion{}),
		c.master.Add(masterID, Master{Pet: petID, Home: home, Manual: manual}),

		g.w.CreateEntity(petID),
		c.pos.Add(petID, Position{Pos: g.geo.Translate(home, torus.Pos{X: -1.5, Y: -1.5})}),
		c.path.Add(petID, Path{}),
		c.speed.Add(petID, Speed{MPS: 6}),
		c.visual.Add(petID, Visual{KindPet}),
		c.health.Add(petID, Health{HP: int32(st.petHP), Max: 60}),
		g.r.SetOwner(petID, a),
		c.motion.Add(petID, Motion{}),
		c.pet.Add(petID, Pet{Master: masterID}),
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("game: login %d: %w", a, err)
	}
	g.w.MarkMoved(masterID)
	g.w.MarkMoved(petID)
	g.masters[a] = masterID
	g.accountOf[masterID] = a
	if err := g.joinEconomy(masterID); err != nil {
		return fmt.Errorf("game: login %d: %w", a, err)
	}
	g.r.SetAnchor(masterID)
	g.r.SetAnchor(petID)
	return nil
}

// reindexed keeps the game's own indices on an entity's new chunk.
func (g *Game) reindexed(id ecs.ID, chunk torus.ChunkPos) {
	if m, ok := g.c.motion.Get(id); ok {
		m.Chunk = chunk
	}
	// The player grid holds every player master standing here, local or
	// a simulation ghost of another node's, by its look: perception
	// across a border finds both.
	if v, ok := g.c.visual.Get(id); ok && v.Kind == KindPlayer {
		g.players.move(id, chunk)
	}
}

// appendParty appends the other accounts of owner's party: consecutive
// accounts in groups of PartySize.
func (g *Game) appendParty(dst []account.ID, acct account.ID) []account.ID {
	size := account.ID(g.cfg.PartySize)
	first := (acct-1)/size*size + 1
	for a := first; a < first+size && a <= account.ID(g.cfg.Players); a++ {
		if a != acct {
			dst = append(dst, a)
		}
	}
	return dst
}

// appendCompanions appends what travels with id in a handoff: a master's
// pet, a pet's master. A mob's den and target, and a den's mobs, do not:
// they are referred to by id, valid on every node, and each crosses when
// it walks over the margin itself.
func (g *Game) appendCompanions(dst []ecs.ID, id ecs.ID) []ecs.ID {
	if m, ok := g.c.master.Get(id); ok && m.Pet != 0 {
		dst = append(dst, m.Pet)
	}
	if p, ok := g.c.pet.Get(id); ok && p.Master != 0 {
		dst = append(dst, p.Master)
	}
	return dst
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

// denID is the id of the den of a normalised column: derived from the
// column alone, so every node names it the same.
func (g *Game) denID(key interest.Column) (ecs.ID, error) {
	cx := uint64(g.geo.Config().Width) / uint64(g.geo.ChunkEdge())
	return zone.DerivedID(uint64(key.Y)*cx + uint64(key.X))
}

// spawnDen creates the den of col, if col is a den cell. The runtime calls
// it only for columns of regions this node owns.
func (g *Game) spawnDen(col interest.Column) {
	at, key, ok := g.denSite(col)
	if !ok {
		return
	}
	if _, dup := g.dens[key]; dup {
		return
	}
	id, err := g.denID(key)
	if err != nil || !g.r.ClaimID(id) {
		return
	}
	if errors.Join(
		g.w.CreateEntity(id),
		g.c.pos.Add(id, Position{Pos: at}),
		g.c.visual.Add(id, Visual{KindDen}),
		g.c.den.Add(id, Den{Column: key}),
		g.c.motion.Add(id, Motion{}),
	) != nil {
		return
	}
	g.dens[key] = id
	g.denColumn[id] = key
	g.r.Reindex(id)
}

// removeDen tears down the den of a column that stopped being resident.
func (g *Game) removeDen(col interest.Column) {
	if id, ok := g.dens[col]; ok {
		_ = g.w.Destroy(id) // its listener takes its mobs with it; the forget hook unlists it
	}
}

func (g *Game) onDestroy(w *ecs.World, id ecs.ID) {
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
// components, on Destroy and Evict alike: the player grid, its account's
// master entry and its column's den entry (the runtime forgets its own:
// the visibility index, the residency anchor, the view). It runs after the
// components are gone, so it reads none: every step is a lookup by id
// that does nothing for an entity it does not concern.
func (g *Game) onForget(id ecs.ID) {
	g.players.remove(id)
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
