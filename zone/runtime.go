package zone

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/entityid"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/nodename"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/replica"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

// Module is a game the runtime hosts: it registers its components
// (Register, SyncPosition) and systems (AddSystem) and its hooks, and may
// create its first entities. The runtime owns the world, the tick-end
// pipeline and everything distributed.
type Module interface {
	// Setup runs once, inside New, before any tick.
	Setup(r *Runtime) error
}

// Territory is where a runtime reads which regions it simulates: the
// region table it holds and the fence of its lease. zonecoord's *Ownership is one;
// Solo is the territory of a node alone in its world.
type Territory interface {
	// Table is the table the node holds now; never nil.
	Table() *cells.Table
	// Fenced is closed once the node may no longer write anything.
	Fenced() <-chan struct{}
}

// solo is a one-node territory: one table, never fenced.
type solo struct{ t *cells.Table }

func (s solo) Table() *cells.Table     { return s.t }
func (s solo) Fenced() <-chan struct{} { return nil }

// Solo returns the territory of a node that owns every region of grid.
func Solo(name string, grid cells.Grid) (Territory, error) {
	t, err := cells.Uniform(grid, 1, []string{name})
	if err != nil {
		return nil, err
	}
	return solo{t}, nil
}

// Config configures a Runtime. Zero fields take the defaults documented
// on them, filled by withDefaults.
type Config struct {
	// Name is the node's name (nodename rules): its coord member name and
	// link peer id, and its owner entry in the region table. Default
	// "solo".
	Name string
	// Node is the node's number, 0–255: the entity-id node part. Default 0.
	Node int
	// Grid is the world and its region grid. Default cells.DefaultGridConfig().
	Grid cells.GridConfig
	// Bands are the border widths. Zero fields take cells' defaults.
	Bands cells.Bands
	// Territory says which regions the node simulates. nil: Solo(Name):
	// the node owns the whole world.
	Territory Territory
	// View is every client's view around its viewer entity. Zero:
	// interest.DefaultView().
	View interest.View
	// MaterialiseBudget caps columns materialised per tick. Default 64.
	MaterialiseBudget int
	// TickInterval is the fixed step. Default 50 ms (20 Hz).
	TickInterval time.Duration
	// Clock is the wall clock, read once by New: entity ids count from
	// that boot reading plus the ticks run, so a node restarted with the
	// same node part mints ids above those of its previous run. nil means
	// clock.Real(); tests inject a clock.Fake to get the same ids twice.
	Clock clock.Clock
	// Logger receives the runtime's records. Default: discard.
	Logger *slog.Logger
	// Transport connects the node to its peers: chunk subscriptions,
	// render ghosts, account routing and remote intents travel over it.
	// Over the node link it is zone/zonelink's LinkTransport (the host
	// adds the link's peers, by the names the region table uses, and
	// closes the link after the runtime); in a simulation an in-memory
	// network's endpoint (zone/zonesim). The runtime opens it in New and
	// closes it in Close. nil: the node is alone (its Territory must then
	// give it every region it needs).
	Transport Transport
	// Lease is the lease id the node's messages carry (its coord lease).
	// Default: the Territory's, when it has one (zonecoord's Ownership does).
	Lease int64
	// NoHandoff turns entity handoff off: an entity then stays with the
	// node that simulates it wherever it walks, and a region move leaves
	// it there. By default an entity that walks more than the handoff
	// margin past the node's territory, or stands in a region the node
	// lost, is handed to the owner of its position (handoff.go). A node
	// always takes entities handed to it.
	NoHandoff bool
	// NoCheckpoint turns the checkpoint stream off (checkpoint.go): the
	// node sends its standbys nothing, so a failover of this node brings
	// none of its entities back (a standby still keeps what others send
	// it). For measuring what the stream costs.
	NoCheckpoint bool
	// Accept, if set, says whether a message from peer, stamped with the
	// peer's lease, may be applied: the fence against a peer that lost its
	// lease (a host answers from coord's membership). nil accepts all.
	Accept func(peer string, lease int64) bool
	// LivePeers, if set, returns the live zone members other than this
	// node, each with its lease (a host answers from coord's membership,
	// as for Accept). A region this node gains, or holds at its first
	// table, has its columns set up only once every one of them has said,
	// under that lease, that it follows the same table. nil: the held
	// table's nodes and the peers heard from stand in for them, which is
	// weaker: a live node in neither (stuck on an old table that named
	// it) is not waited for.
	LivePeers func() map[string]int64
	// WorldStore keeps players between sessions (the gateway role): the
	// node that simulates a player saves it every SaveEvery and when it
	// logs out, and a gateway loads it at login; and it keeps the
	// terrain's edits (terrain.go). nil: players are not kept (every login
	// starts at the module's Home) and the ground is its base alone.
	WorldStore worldstore.Store
	// SaveEvery is how often each player is saved. Default 10 s.
	SaveEvery time.Duration
	// WorldSeed seeds the terrain's base (package terrain): the same on
	// every node of a world.
	WorldSeed uint64
	// Timers are the cluster protocol's waits in ticks. Zero fields take
	// their defaults (DefaultTimers); New refuses a timer below one tick
	// and timers that break the relations Timers documents.
	Timers Timers
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "solo"
	}
	c.Grid = c.Grid.WithDefaults()
	if c.View == (interest.View{}) {
		c.View = interest.DefaultView()
	}
	if c.MaterialiseBudget == 0 {
		c.MaterialiseBudget = 64
	}
	if c.TickInterval == 0 {
		c.TickInterval = 50 * time.Millisecond
	}
	if c.SaveEvery == 0 {
		c.SaveEvery = 10 * time.Second
	}
	c.Timers = c.Timers.WithDefaults()
	c.Clock = clock.OrReal(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate checks c after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := nodename.Check("Config.Name", c.Name); err != nil {
		return err
	}
	if c.Transport != nil && c.Transport.ID() != c.Name {
		return errcode.Config("Config.Transport", c.Transport.ID(), "must be the transport of the node named by Config.Name "+c.Name)
	}
	if c.SaveEvery < c.TickInterval {
		return errcode.Config("Config.SaveEvery", c.SaveEvery, "must be at least one tick")
	}
	if c.Node < 0 || c.Node > entityid.MaxNode {
		return errcode.Config("Config.Node", c.Node, "must be within [0, 255]")
	}
	if err := c.Grid.Validate(); err != nil {
		return err
	}
	grid, err := cells.NewGrid(c.Grid)
	if err != nil {
		return err
	}
	if err := c.Bands.WithDefaults(grid).Validate(grid); err != nil {
		return err
	}
	switch {
	case c.MaterialiseBudget < 1:
		return errcode.Config("Config.MaterialiseBudget", c.MaterialiseBudget, "must be at least 1")
	case c.TickInterval <= 0:
		return errcode.Config("Config.TickInterval", c.TickInterval, "must be positive")
	}
	return c.Timers.Validate()
}

// Report describes one tick of the runtime.
type Report struct {
	Tick     uint64
	Entities int
	// Outbox is what the flush encoded and delivered.
	Outbox outbox.Stats
	// Materialised and Dematerialised count residency changes of columns
	// this node owns.
	Materialised, Dematerialised int
	// Intents is how many intents were handed to the module.
	Intents int
}

// Intent is a request to change an entity, addressed to it and applied by
// its own owner, through the module's intent handler (OnIntent), at the
// start of the next tick. A system never writes another entity's state:
// the target may live on another node.
type Intent struct {
	Kind           uint16 // the module's kinds are below FirstReservedIntent
	Source, Target ecs.ID
	Amount         int64
	// Data is the module's, at most 1 KiB; it travels with the intent.
	Data []byte
}

// ColumnHooks are the module's calls when a column of a region this node
// owns becomes resident or stops being resident.
type ColumnHooks struct {
	Materialise   func(col interest.Column)
	Dematerialise func(col interest.Column)
}

// Runtime is one zone node's world. Like the ecs.World it wraps, it is
// owned by one goroutine: the one that calls Step.
type Runtime struct {
	cfg  Config
	geo  torus.World
	grid cells.Grid
	terr Territory
	w    *ecs.World
	subs *interest.Subscriptions[Subscriber]
	vis  *interest.Visibility[Subscriber, ecs.ID]
	res  *interest.Residency
	out  *outbox.Outbox[Subscriber, ecs.ID]

	codecs []codec // every handed-over component's, sorted by name

	pos    *ecs.Store[Position]
	owner  *ecs.Store[Owner]
	ghost  *ecs.Store[Ghost]
	frozen *ecs.Store[Frozen]
	synced []synced
	// inFlush memoises isGhost for the entity the outbox last asked about
	// while Flush runs (flushGhost): the flush asks of one entity once per
	// encoder call and observer query, and no phase changes during it.
	inFlush bool
	memo    ghostMemo
	// burstBody and burstPayload are appendBurst's scratch.
	burstBody, burstPayload []byte

	// Entity ids carry the boot time plus the ticks run: idClock is moved
	// to boot + tick × interval before each tick, never by the host.
	boot      time.Time
	idClock   *clock.Fake
	ids       *entityid.Generator
	phaseBase uint64

	intents, spareIntents []Intent
	onIntent              func(w *ecs.World, in Intent)
	companions            func(dst []ecs.ID, id ecs.ID) []ecs.ID

	viewerOf  map[account.ID]ecs.ID
	viewerAcc map[ecs.ID]account.ID
	anchors   map[ecs.ID]struct{}
	reasons   map[ecs.ID]interest.VanishReason
	viewMoved []ecs.ID
	posDirty  []ecs.ID
	ownerSet  []ecs.ID
	manifest  interest.Manifest
	residents []ecs.ID

	party    func(dst []account.ID, owner account.ID) []account.ID
	partyBuf []account.ID
	columns  ColumnHooks
	// resident is every resident column (owned or not); columnsAt and
	// columnsTable are the table the column hooks last followed.
	resident     map[interest.Column]struct{}
	columnsAt    uint64
	columnsTable *cells.Table
	// unreleased is every region this node owns but may not run the
	// columns of yet: gained while a peer may still run them
	// (commitColumns).
	unreleased map[cells.RegionID]struct{}
	onReindex  []func(id ecs.ID, chunk torus.ChunkPos)

	cluster *cluster // nil when the node is alone
	fenced  bool
	closed  bool

	// The gateway role (players.go): the module's player hooks, work posted
	// by gateway goroutines, the sessions this node is the gateway of, the
	// view positions of viewers not yet seen here, and the saver.
	players        *Players
	opsMu          sync.Mutex
	ops            []func()
	gateway        Gateway // under opsMu
	gw             map[account.ID]*gwSession
	leaving        map[account.ID]*leavingPlayer // logged out here, the save not yet landed
	displacedBy    map[account.ID]displacement   // the newest session a takeover named
	dueJoins       []account.ID
	viewHint       map[account.ID]torus.ChunkPos
	saver          saver
	saveEveryTicks uint64
	pstats         PlayerStats
	lost           lostPlayers // what a dead node took with it (lostplayers.go)
	ground         ground

	report Report
}

// New builds the runtime and sets up mod on it. Nothing is sent until the
// first Step.
func New(cfg Config, mod Module) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	grid, err := cells.NewGrid(cfg.Grid)
	if err != nil {
		return nil, err
	}
	cfg.Bands = cfg.Bands.WithDefaults(grid)
	terr := cfg.Territory
	if terr == nil {
		if terr, err = Solo(cfg.Name, grid); err != nil {
			return nil, err
		}
	}
	if terr.Table() == nil {
		return nil, ErrNoTable.Wrap("the territory holds no region table yet (wait for one: zonecoord.Ownership.WaitVersion)")
	}
	if got := terr.Table().Grid().Config(); got != cfg.Grid {
		return nil, errcode.Config("Config.Grid", cfg.Grid, fmt.Sprintf("differs from the region table's grid %+v", got))
	}
	geo, err := torus.New(cfg.Grid.World)
	if err != nil {
		return nil, err
	}
	w, err := ecs.New(ecs.Config{TickInterval: cfg.TickInterval})
	if err != nil {
		return nil, err
	}
	// Whole milliseconds, so that two boots shift every id by the same
	// amount whatever the sub-millisecond part of their readings.
	boot := cfg.Clock.Now().Truncate(time.Millisecond)
	if boot.UnixMilli()-entityid.EpochUnixMilli < derivedMillis {
		return nil, errcode.Config("Config.Clock", boot, "reads before the entity id range (from 2024-01-01T04:40Z: earlier ids are derived ones)")
	}
	base, err := entityid.Make(boot.UnixMilli()-entityid.EpochUnixMilli, 0, 0)
	if err != nil {
		return nil, errcode.Config("Config.Clock", boot, "reads outside the entity id range")
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
	r := &Runtime{
		cfg: cfg, geo: geo, grid: grid, terr: terr, w: w,
		subs: subs, vis: interest.NewVisibility[Subscriber, ecs.ID](subs), res: res,
		boot: boot, idClock: idClock, ids: ids, phaseBase: uint64(base),
		viewerOf:    make(map[account.ID]ecs.ID),
		viewerAcc:   make(map[ecs.ID]account.ID),
		anchors:     make(map[ecs.ID]struct{}),
		reasons:     make(map[ecs.ID]interest.VanishReason),
		resident:    make(map[interest.Column]struct{}),
		gw:          make(map[account.ID]*gwSession),
		leaving:     make(map[account.ID]*leavingPlayer),
		displacedBy: make(map[account.ID]displacement),
		viewHint:    make(map[account.ID]torus.ChunkPos),
		saver:       saver{store: cfg.WorldStore},
	}
	r.saveEveryTicks = max(uint64(cfg.SaveEvery/cfg.TickInterval), 1)
	if err := r.startGround(); err != nil {
		return nil, err
	}
	r.saver.log = cfg.Logger.Warn
	r.saver.post = r.Post
	r.out = outbox.New[Subscriber, ecs.ID](outboxWorld{r})
	if err := r.registerBuiltins(); err != nil {
		return nil, err
	}
	w.OnDestroy(r.destroyed)
	w.OnForget(r.forget)
	if err := w.AddSystem(ecs.System{Name: "zone.intents", Order: math.MinInt32, Run: r.applyIntents}); err != nil {
		return nil, err
	}
	w.OnTickEnd(r.endTick)
	if tr := cfg.Transport; tr != nil {
		if r.cluster, err = newCluster(r, tr); err != nil {
			return nil, err
		}
	}
	if err := mod.Setup(r); err != nil {
		r.Close()
		return nil, err
	}
	r.saver.start()
	if err := r.checkComponents(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Close closes the runtime's transport (a LinkTransport joins its sender
// goroutines) and stops the saver and the ground's loader. It is
// idempotent and does not close the link, the territory or the coord
// client.
func (r *Runtime) Close() error {
	r.closed = true
	if r.cluster != nil {
		r.cluster.close()
	}
	r.saver.close()
	r.ground.close()
	return nil
}

// lease is the lease id the node's messages carry.
func (r *Runtime) lease() int64 {
	if r.cfg.Lease != 0 {
		return r.cfg.Lease
	}
	if l, ok := r.terr.(interface{ Lease() int64 }); ok {
		return l.Lease()
	}
	return 0
}

// accept is the fence on what peers send. A lease accepted is remembered,
// so that the node notices when the peer loses it (fencedPeers).
func (r *Runtime) accept(peer string, f wire.Fence) bool {
	ok := r.cfg.Accept == nil || r.cfg.Accept(peer, f.Lease)
	if ok && r.cluster != nil {
		r.cluster.sawFence(peer, f)
	}
	return ok
}

// Fenced reports whether the node lost its lease: it then simulates and
// sends nothing, for good.
func (r *Runtime) Fenced() bool {
	if r.fenced {
		return true
	}
	select {
	case <-r.terr.Fenced():
		r.fenced = true
		r.cfg.Logger.Warn("zone: lease lost: the node stops simulating and sending", "node", r.cfg.Name)
	default:
	}
	return r.fenced
}

// fencedNow is Fenced without noting it: it writes nothing, so that a
// read like Simulated stays a read.
func (r *Runtime) fencedNow() bool {
	if r.fenced {
		return true
	}
	select {
	case <-r.terr.Fenced():
		return true
	default:
		return false
	}
}

// positionName is the built-in position's component name.
const positionName = "zone.position"

func (r *Runtime) registerBuiltins() error {
	var err error
	r.pos, err = Register(r, Spec[Position]{Name: positionName, Handoff: FixedCodec[Position]()})
	if err != nil {
		return err
	}
	if r.owner, err = Register(r, Spec[Owner]{Name: "zone.owner", Handoff: FixedCodec[Owner]()}); err != nil {
		return err
	}
	if r.ghost, err = Register(r, Spec[Ghost]{Name: "zone.ghost", Local: true}); err != nil {
		return err
	}
	r.frozen, err = Register(r, Spec[Frozen]{Name: "zone.frozen", Local: true})
	return err
}

// Name is the node's name.
func (r *Runtime) Name() string { return r.cfg.Name }

// World returns the ecs world.
func (r *Runtime) World() *ecs.World { return r.w }

// Geometry returns the torus.
func (r *Runtime) Geometry() torus.World { return r.geo }

// Grid returns the region grid.
func (r *Runtime) Grid() cells.Grid { return r.grid }

// Table returns the region table the node holds.
func (r *Runtime) Table() *cells.Table { return r.terr.Table() }

// Positions is the built-in position store.
func (r *Runtime) Positions() *ecs.Store[Position] { return r.pos }

// Owners is the built-in owner store.
func (r *Runtime) Owners() *ecs.Store[Owner] { return r.owner }

// Frozen is the built-in frozen marker's store: an entity has it while a
// handoff of it is in flight (invariant 5). Read it (Has, Count); only the
// runtime writes it. A module's queries leave frozen entities out without
// it (Query1 … Query4).
func (r *Runtime) Frozen() *ecs.Store[Frozen] { return r.frozen }

// Ghosts is the built-in ghost marker's store: the simulation ghosts here
// (invariant 7). Read it (Has, Count); only the runtime writes it. A
// module's queries leave ghosts out without it (Query1 … Query4).
func (r *Runtime) Ghosts() *ecs.Store[Ghost] { return r.ghost }

// NotSimulated lists the markers a system's query must exclude: ghosts and
// frozen entities.
//
// Deprecated: build a system's queries with Query1 … Query4, to which the
// runtime adds these terms itself; a query that forgot them wrote entities
// another node simulates.
func (r *Runtime) NotSimulated() []ecs.Component { return r.notSimulated() }

// Simulated reports whether this node simulates id: alive, not leaving,
// not a ghost, not frozen, and the node not fenced (a node that lost its
// lease simulates nothing, though its entities stay in its world).
func (r *Runtime) Simulated(id ecs.ID) bool {
	return r.w.Alive(id) && !r.w.Leaving(id) && !r.ghost.Has(id) && !r.frozen.Has(id) && !r.fencedNow()
}

// AddSystem adds a module system. Orders below math.MinInt32+16 are the
// runtime's.
func (r *Runtime) AddSystem(s ecs.System) error {
	if s.Order < math.MinInt32+16 {
		return errcode.Config("System.Order", s.Order, "is reserved for the runtime (below math.MinInt32+16)")
	}
	return r.w.AddSystem(s)
}

// OnIntent sets the module's intent handler, called once per intent
// addressed to an entity this node simulates, in the order sent.
func (r *Runtime) OnIntent(fn func(w *ecs.World, in Intent)) { r.onIntent = fn }

// SetCompanions sets which entities travel with an entity that is handed
// over (a master and its pet): fn appends them to dst. A companion goes in
// the same transfer when this node simulates it and it already stands in
// the target's territory; one still on this side follows on its own when
// it crosses the margin. Ids in components stay valid on every node, so a
// companion left behind goes on referring to the other through its ghost.
func (r *Runtime) SetCompanions(fn func(dst []ecs.ID, id ecs.ID) []ecs.ID) { r.companions = fn }

// OnColumns sets the module's column hooks.
func (r *Runtime) OnColumns(h ColumnHooks) { r.columns = h }

// OnReindex adds a hook called with every entity filed under a new chunk
// at the end of a tick (after the runtime's own bookkeeping).
func (r *Runtime) OnReindex(fn func(id ecs.ID, chunk torus.ChunkPos)) {
	r.onReindex = append(r.onReindex, fn)
}

// SetParty sets how owner-and-party audiences find an account's party:
// fn appends the other members of owner's party.
func (r *Runtime) SetParty(fn func(dst []account.ID, owner account.ID) []account.ID) { r.party = fn }

// Attach routes an account's batches to sink (nil detaches it): the
// account's client is here. What other nodes send the account (owner-only
// and party messages forwarded over the link) reaches the same sink.
// Accounts with no sink here and no route to another node have their
// messages dropped and counted.
func (r *Runtime) Attach(a account.ID, sink outbox.Sink) {
	r.out.Attach(interest.Account(a), sink)
	if r.cluster != nil {
		r.cluster.attachLocal(a, sink)
	}
}

// SetViewer makes id the entity an account's view follows: at the end of
// every tick it moved, the account's subscriptions are kept on the view
// around its chunk.
func (r *Runtime) SetViewer(a account.ID, id ecs.ID) {
	if old, ok := r.viewerOf[a]; ok {
		delete(r.viewerAcc, old)
	}
	r.viewerOf[a] = id
	r.viewerAcc[id] = a
	r.viewMoved = append(r.viewMoved, id)
}

// Viewer returns the entity an account's view follows.
func (r *Runtime) Viewer(a account.ID) (ecs.ID, bool) {
	id, ok := r.viewerOf[a]
	return id, ok
}

// SetAnchor makes id a residency anchor: the columns around it are kept
// resident while it stands there.
func (r *Runtime) SetAnchor(id ecs.ID) {
	r.anchors[id] = struct{}{}
	if c, ok := r.vis.ChunkOf(id); ok {
		r.res.SetAnchor(interest.AnchorID(id), interest.ColumnOf(c))
	}
}

// SetOwner gives id to an account (adding or changing its Owner). At the
// end of the tick the account is sent the entity's owner-only and party
// components, wherever the entity stands: they are routed by account, not
// by sight, so the owner knows them before it ever sees the entity.
func (r *Runtime) SetOwner(id ecs.ID, a account.ID) error {
	if o, ok := r.owner.Get(id); ok {
		o.Account = a
	} else if err := r.owner.Add(id, Owner{Account: a}); err != nil {
		return err
	}
	r.ownerSet = append(r.ownerSet, id)
	return nil
}

// Destroy destroys id with a vanish of reason to everyone who sees it
// (ecs.World.Destroy gives interest.Gone).
func (r *Runtime) Destroy(id ecs.ID, reason interest.VanishReason) error {
	if !r.w.Alive(id) {
		return r.w.Destroy(id) // the world's error
	}
	r.reasons[id] = reason
	return r.w.Destroy(id)
}

// Send queues an intent for its target's owner.
func (r *Runtime) Send(in Intent) { r.intents = append(r.intents, in) }

// NewID mints an entity id. A simulated millisecond holds 2048 ids; when a
// burst of spawns spends them, the id clock moves on by a millisecond
// rather than waiting for a tick that the caller itself would produce.
func (r *Runtime) NewID() (ecs.ID, error) {
	for {
		id, err := r.ids.TryNext()
		if errors.Is(err, entityid.ErrSequenceExhausted) {
			r.idClock.Advance(time.Millisecond)
			continue
		}
		return id, err
	}
}

// derivedMillis: ids whose time part is below it are derived ones
// (DerivedID); New refuses a clock that reads inside that range.
const derivedMillis = 1 << 24

// MaxDerivedKey is the largest key DerivedID takes.
const MaxDerivedKey = derivedMillis<<(entityid.NodeBits+entityid.SeqBits) - 2

// DerivedID returns the id of the thing key names (a den of a column, a
// fixed spawn), the same on every node and in every run: key + 1, an id
// whose time part lies before any a Generator mints (New refuses clocks
// that read there). Keys above MaxDerivedKey are refused.
func DerivedID(key uint64) (ecs.ID, error) {
	if key > MaxDerivedKey {
		return 0, errcode.Config("key", key, "is above zone.MaxDerivedKey")
	}
	return ecs.ID(key + 1), nil
}

// IsDerived reports whether id is a DerivedID rather than a minted one.
func IsDerived(id ecs.ID) bool { return uint64(id) <= MaxDerivedKey+1 }

// Phase is a minted id's offset from the id an entity minted at boot
// would have, and a derived id itself: a stagger of per-entity work by
// Phase is the same whatever wall time the node booted at.
func (r *Runtime) Phase(id ecs.ID) uint64 {
	if IsDerived(id) {
		return uint64(id)
	}
	return uint64(id) - r.phaseBase
}

// Step runs one tick and reports it. A fenced node (Fenced) runs nothing
// and sends nothing: Step returns a zero Report.
func (r *Runtime) Step() Report {
	if r.closed || r.Fenced() {
		return Report{}
	}
	if r.cluster != nil {
		r.cluster.drain()
	}
	r.runOps()
	next := r.w.CurrentTick().N + 1
	r.checkTakeovers(next)
	r.savePeriodically(next)
	// Entity ids carry the boot time plus the simulated time. Run in real
	// time (ecs.Run never runs a tick early) that is never ahead of the
	// wall clock, so a restart, which reads the wall clock again, mints
	// above every id of the run before.
	if at := r.boot.Add(time.Duration(next) * r.cfg.TickInterval); at.After(r.idClock.Now()) {
		r.idClock.Set(at)
	}
	r.report = Report{}
	r.w.Step()
	return r.report
}

// EachWithin calls fn for every indexed entity with a position within
// radius rad of p (wrap-aware, inclusive), with its squared distance. It
// walks the chunks of the visibility index within ceil(rad / chunk edge)
// columns of p's chunk on p's slab, so membership is as of the last
// reindex (the end of the previous tick) and distance is current.
func (r *Runtime) EachWithin(p torus.Pos, rad float64, fn func(id ecs.ID, d2 float64)) {
	rc := int(math.Ceil(rad / r.geo.ChunkEdge()))
	r2 := rad * rad
	for c := range r.geo.ChunksWithin(r.geo.ChunkOf(p), rc, 0) {
		r.residents = r.vis.AppendResidents(r.residents[:0], c)
		for _, id := range r.residents {
			q, ok := r.pos.Get(id)
			if !ok {
				continue
			}
			if d2 := r.geo.DistanceSq(p, q.Pos); d2 <= r2 {
				fn(id, d2)
			}
		}
	}
}

// applyIntents hands last tick's intents to the module, in the order they
// were sent. Intents sent while applying go to the next tick.
func (r *Runtime) applyIntents(w *ecs.World, t ecs.Tick) {
	batch := r.intents
	if r.cluster != nil {
		batch = r.cluster.releaseAwaited(batch) // its fenced owner's entity is back
	}
	r.intents = r.spareIntents[:0]
	for _, in := range batch {
		if r.isGhost(in.Target) {
			r.cluster.routeIntent(in) // its owner applies it, once
			continue
		}
		if r.cluster != nil && r.cluster.holdIntent(in) {
			continue // frozen in a handoff: it follows the entity or waits here
		}
		if !r.Simulated(in.Target) || (r.onIntent == nil && in.Kind < FirstReservedIntent) {
			if r.cluster != nil {
				r.cluster.dropIntents(&r.cluster.stats.IntentsLapsed, 1)
			}
			continue // no such entity (destroyed, or never here): it lapses
		}
		if in.Kind >= FirstReservedIntent {
			r.applyPlayerIntent(in)
			continue
		}
		r.report.Intents++
		r.onIntent(w, in)
	}
	clear(batch)
	r.spareIntents = batch[:0]
}

// endTick is the output pipeline, run after the tick's structural changes
// are applied.
func (r *Runtime) endTick(w *ecs.World, t ecs.Tick) {
	// A position marked dirty is checked for a new chunk, so a module
	// that marks every move needs no MarkMoved; one that does not (the
	// reference game resends positions every 8th step) marks the chunk
	// changes with MarkMoved.
	r.posDirty = r.posDirty[:0]
	r.pos.DrainDirty(func(id ecs.ID) {
		r.posDirty = append(r.posDirty, id)
		if p, ok := r.pos.Get(id); ok {
			if c, ok := r.vis.ChunkOf(id); !ok || c != r.geo.ChunkOf(p.Pos) {
				w.MarkMoved(id)
			}
		}
	})
	w.DrainMoved(r.reindex)
	if r.cluster != nil && !r.Fenced() {
		r.cluster.sendHandoffs(t.N)
		r.cluster.checkHandoffs(t.N)
		r.cluster.checkpoint(t.N)
	}
	for _, id := range r.viewMoved {
		r.refreshView(id)
	}
	r.viewMoved = r.viewMoved[:0]

	r.commitColumns(r.res.Commit(), r.terr.Table())

	if r.cluster != nil {
		r.cluster.updateWants()
		r.cluster.resolveHeld()
		r.cluster.sweepParked()
		r.cluster.sweepFenceHeld()
	}
	r.out.AddDeliveries(r.ownDeliveries(r.vis.Drain()))
	if r.cluster != nil {
		r.cluster.announceAdopted()
	}
	for _, id := range r.ownerSet {
		r.markPrivate(id, true)
	}
	r.ownerSet = r.ownerSet[:0]
	for _, s := range r.synced {
		if s.store == ecs.Component(r.pos) {
			for _, id := range r.posDirty {
				r.out.MarkDirty(id, s.wire)
			}
			continue
		}
		s.store.DrainDirty(func(id ecs.ID) { r.out.MarkDirty(id, s.wire) })
	}
	r.inFlush, r.memo = true, ghostMemo{}
	r.report.Outbox = r.out.Flush(t.N)
	r.inFlush = false
	r.flushSessions(t.N)
	r.report.Tick = t.N
	r.report.Entities = w.Len()
	if r.cluster != nil {
		if !r.Fenced() {
			r.cluster.publish(r.seq())
			r.cluster.flushControl(t.N)
		}
		r.cluster.clearTick()
	}
}

// ownDeliveries drops render ghosts from what node subscribers are told:
// a node hears of an entity only from the node that simulates it. That
// covers a vanish the index raised for an entity adopted this tick while
// it was still a ghost here (its last update, before its transfer, moved
// it out of a peer's chunks): that peer was never told of it by this
// node, and holds it from the old owner (cluster.wasGhost).
func (r *Runtime) ownDeliveries(ds []interest.Delivery[Subscriber, ecs.ID]) []interest.Delivery[Subscriber, ecs.ID] {
	if r.cluster == nil {
		return ds
	}
	for i := range ds {
		d := &ds[i]
		if d.Subscriber.Kind != interest.NodeSubscriber {
			continue
		}
		d.Appeared = slices.DeleteFunc(d.Appeared, r.isGhost)
		d.Vanished = slices.DeleteFunc(d.Vanished, func(v interest.Vanished[ecs.ID]) bool {
			return r.cluster.notOurVanish(v, d.Subscriber)
		})
	}
	r.cluster.clearVanishScratch()
	return ds
}

// snapshot is the state of this node's entities in chunk ch, as node
// subscriber sub sees it: every local entity filed there, each as an
// appear burst of its public components (and appendWent's).
func (r *Runtime) snapshot(ch torus.ChunkPos, seq uint64, sub Subscriber) wire.Snapshot {
	s := wire.Snapshot{Chunk: ch}
	r.residents = r.vis.AppendResidents(r.residents[:0], ch)
	if len(r.residents) > 0 {
		s.Entries = make([]wire.SnapshotEntry, 0, len(r.residents))
	}
	// The bursts are cut from one buffer: when it grows, those cut
	// before keep the old array (no entry's bytes ever change).
	var frames []byte
	for _, e := range r.residents {
		if r.isGhost(e) {
			continue
		}
		start := len(frames)
		frames = r.appendBurst(frames, e)
		s.Entries = append(s.Entries, wire.SnapshotEntry{Entity: uint64(e), Epoch: r.cluster.epochOf(e), Seq: seq, Frames: frames[start:len(frames):len(frames)]})
	}
	return r.cluster.appendWent(s, sub)
}

// ReplicaStats returns the render-ghost store's counters (zero for a node
// alone).
func (r *Runtime) ReplicaStats() replica.Stats {
	if r.cluster == nil {
		return replica.Stats{}
	}
	return r.cluster.rep.Stats()
}

// ClusterStats returns the link counters (zero for a node alone).
func (r *Runtime) ClusterStats() ClusterStats {
	if r.cluster == nil {
		return ClusterStats{}
	}
	s := r.cluster.stats
	s.IntentsAwaiting, s.IntentsInFlight = r.cluster.ifate.held, r.cluster.intentsInFlight()
	s.IntentsHeld = len(r.intents)
	for _, e := range r.cluster.ents.outgoing {
		s.IntentsHeld += len(e.out.intents)
	}
	return s
}

// RenderGhosts reports how many render ghosts the node holds.
func (r *Runtime) RenderGhosts() int {
	if r.cluster == nil {
		return 0
	}
	return r.cluster.rep.Len()
}

// tickMillis is the simulated wall time of tick n, in Unix milliseconds.
func (r *Runtime) tickMillis(n uint64) uint64 {
	return uint64(r.boot.Add(time.Duration(n) * r.cfg.TickInterval).UnixMilli())
}

// seq is the replication sequence of this tick's messages: the simulated
// wall time in milliseconds, which rises every tick and across restarts
// (a restarted node boots later).
func (r *Runtime) seq() uint64 { return uint64(r.idClock.Now().UnixMilli()) }

func (r *Runtime) materialise(col interest.Column) {
	r.report.Materialised++
	if r.columns.Materialise != nil {
		r.columns.Materialise(col)
	}
}

func (r *Runtime) dematerialise(col interest.Column) {
	r.report.Dematerialised++
	if r.columns.Dematerialise != nil {
		r.columns.Dematerialise(col)
	}
}

func (r *Runtime) ownsColumn(t *cells.Table, col interest.Column) bool {
	return t.OwnerOfChunk(torus.ChunkPos{X: col.X, Y: col.Y}) == r.cfg.Name
}

// isUnreleased reports whether col lies in a region this node owns but
// may not run the columns of yet (commitColumns). Regions are those of
// the held table's grid, which a grid change replaces.
func (r *Runtime) isUnreleased(col interest.Column) bool {
	if len(r.unreleased) == 0 {
		return false
	}
	grid := r.grid
	if r.columnsTable != nil {
		grid = r.columnsTable.Grid()
	}
	_, ok := r.unreleased[grid.RegionOfChunk(torus.ChunkPos{X: col.X, Y: col.Y})]
	return ok
}

// commitColumns applies the tick's residency changes and the held table
// to the column hooks. A column is set up (Materialise) on the node that
// owns its region while it is resident, and torn down when either stops.
// Two nodes must never run one column at once: its den has the id the
// column derives. So a region this node gains — by a table change, at its
// first table, or when the grid changes — is unreleased until every live
// peer has said, under its current lease, that its columns follow the same
// table version as this node's (peersFollow): a peer whose fence names
// the version has torn down what that table takes from it (the fence of
// every message names columnsAt, and is stamped after this), and that
// table gives the region to this node alone. A peer that names a higher
// version means this node is behind: it waits for that table, and a
// region the newer table gives elsewhere is forgotten.
//
// Order matters: columns that stop being resident are torn down under the
// table they were set up by, before the table changes; columns that
// become resident are set up under the new table, after the gains are
// noted.
func (r *Runtime) commitColumns(changes interest.ResidencyChanges, table *cells.Table) {
	held := r.columnsTable
	if held == nil {
		held = table
	}
	for _, col := range changes.Dematerialised {
		delete(r.resident, col)
		if r.ownsColumn(held, col) && !r.isUnreleased(col) {
			r.dematerialise(col)
		}
	}
	if v := table.Version(); v != r.columnsAt {
		old := r.columnsTable
		if old != nil {
			newGrid := old.Grid() != table.Grid() // every column changes hands
			for _, col := range r.sortedResident() {
				if r.ownsColumn(old, col) && (newGrid || !r.ownsColumn(table, col)) && !r.isUnreleased(col) {
					r.dematerialise(col)
				}
			}
		}
		r.columnsAt, r.columnsTable = v, table
		r.noteGains(old, table)
		if r.cluster != nil {
			r.cluster.announceTable = true // peers learn the version at once
		}
	}
	for _, col := range changes.Materialised {
		r.resident[col] = struct{}{}
		if r.ownsColumn(table, col) && !r.isUnreleased(col) {
			r.materialise(col)
		}
	}
	r.columnsReleased(table)
}

// sortedResident is the resident columns in row-major order.
func (r *Runtime) sortedResident() []interest.Column {
	cols := make([]interest.Column, 0, len(r.resident))
	for col := range r.resident {
		cols = append(cols, col)
	}
	slices.SortFunc(cols, func(a, b interest.Column) int {
		if a.Y != b.Y {
			return int(a.Y) - int(b.Y)
		}
		return int(a.X) - int(b.X)
	})
	return cols
}

// noteGains records the regions table gives this node that it did not run
// under old (every region it owns when old is nil or of another grid):
// their columns wait for the peers (commitColumns). A region still waiting
// that table gives elsewhere is forgotten. A node alone has no peers to
// wait for.
func (r *Runtime) noteGains(old, table *cells.Table) {
	if r.cluster == nil {
		return
	}
	fresh := old == nil || old.Grid() != table.Grid()
	if fresh {
		clear(r.unreleased)
	}
	for reg := range r.unreleased {
		if table.Owner(reg) != r.cfg.Name {
			delete(r.unreleased, reg)
		}
	}
	for reg := range table.Grid().Regions() {
		id := cells.RegionID(reg)
		if table.Owner(id) != r.cfg.Name || (!fresh && old.Owner(id) == r.cfg.Name) {
			continue
		}
		if r.unreleased == nil {
			r.unreleased = map[cells.RegionID]struct{}{}
		}
		r.unreleased[id] = struct{}{}
	}
}

// peersFollow reports whether every live peer has said, under its current
// lease, that its columns follow table version v: the peers Config.LivePeers
// names, or, without it, the nodes of the held table and every peer heard
// from, less those whose lease ended (fencedPeers).
func (r *Runtime) peersFollow(v uint64) bool {
	return r.cluster.peersFollow(v, r.columnsTable.Nodes())
}

// peersFollow is Runtime.peersFollow, with nodes those of the table the
// columns follow.
func (c *cluster) peersFollow(v uint64, nodes []string) bool {
	r := c.r
	if r.cfg.LivePeers != nil {
		for p, lease := range r.cfg.LivePeers() {
			if p == r.cfg.Name {
				continue
			}
			if l, ok := c.leaseOf[p]; !ok || l != lease || c.peerTable[p] != v {
				return false
			}
		}
		return true
	}
	follows := func(p string) bool {
		if _, fenced := c.fenced[p]; fenced || p == r.cfg.Name {
			return true
		}
		return c.peerTable[p] == v
	}
	for _, p := range nodes {
		if !follows(p) {
			return false
		}
	}
	for p := range c.leaseOf {
		if !follows(p) {
			return false
		}
	}
	return true
}

// columnsReleased sets up the resident columns of the unreleased regions
// once every live peer follows this node's table (peersFollow).
func (r *Runtime) columnsReleased(table *cells.Table) {
	if len(r.unreleased) == 0 || !r.peersFollow(r.columnsAt) || r.AdoptionPending() {
		// (An adoption in flight brings the dead owner's dens back from
		// their checkpoints first: set up now, a den would start afresh.)
		return
	}
	var cols []interest.Column
	for _, col := range r.sortedResident() {
		if r.isUnreleased(col) && r.ownsColumn(table, col) {
			cols = append(cols, col)
		}
	}
	clear(r.unreleased)
	for _, col := range cols {
		r.materialise(col)
	}
}

// Reindex files id under the chunk of its position now, instead of at the
// end of the tick it was marked moved in: for an entity a hook creates
// after the tick's reindex (a den stocked at residency commit), so that it
// is seen in this tick's flush.
func (r *Runtime) Reindex(id ecs.ID) { r.reindex(id) }

// reindex files an entity under its current chunk, moves its residency
// anchor, and queues its account's view for refresh.
func (r *Runtime) reindex(id ecs.ID) {
	p, ok := r.pos.Get(id)
	if !ok {
		return
	}
	chunk := r.geo.ChunkOf(p.Pos)
	r.vis.Reindex(id, chunk)
	r.followed(id, chunk)
	for _, fn := range r.onReindex {
		fn(id, chunk)
	}
	if r.cluster != nil {
		r.cluster.considerHandoff(id, p.Pos)
	}
}

// followed moves what follows an entity (its residency anchor, the view
// of the account it is the viewer of) to chunk: for a local entity at
// reindex, for a ghost when its owner moves it.
func (r *Runtime) followed(id ecs.ID, chunk torus.ChunkPos) {
	if _, ok := r.anchors[id]; ok {
		r.res.SetAnchor(interest.AnchorID(id), interest.ColumnOf(chunk))
	}
	if _, ok := r.viewerAcc[id]; ok {
		r.viewMoved = append(r.viewMoved, id)
	}
}

// refreshView keeps an account's announced set on the view around its
// viewer and, headless, delivers every newly announced chunk at once.
func (r *Runtime) refreshView(viewer ecs.ID) {
	a, ok := r.viewerAcc[viewer]
	if !ok {
		return
	}
	chunk, ok := r.vis.ChunkOf(viewer)
	if !ok {
		// Not seen here yet (a player brought in on another node): the
		// view stands where it was told to until its ghost arrives.
		if chunk, ok = r.viewHint[a]; !ok {
			return
		}
	}
	sub := interest.Account(a)
	r.subs.ViewManifest(sub, chunk, r.cfg.View, &r.manifest)
	r.subs.Apply(sub, r.manifest)
	r.columnsAdded(a, r.manifest.Added)
	for _, c := range r.manifest.Added {
		r.subs.MarkSent(sub, c)
	}
}

func (r *Runtime) destroyed(w *ecs.World, id ecs.ID) {
	if a, ok := r.viewerAcc[id]; ok && !r.isGhost(id) {
		delete(r.viewerAcc, id)
		if r.viewerOf[a] == id {
			delete(r.viewerOf, a)
		}
	}
	reason, ok := r.reasons[id]
	if !ok {
		reason = interest.Gone
	}
	if r.cluster != nil && !r.isGhost(id) {
		r.cluster.part(id)
	}
	r.vis.Remove(id, reason)
}

// forget removes everything the runtime keeps about an entity outside its
// components, on Destroy and Evict alike: its place in the visibility
// index (without a vanish: an evicted entity goes on existing, written
// elsewhere), its residency anchor and its pending vanish reason.
func (r *Runtime) forget(id ecs.ID) {
	if r.isGhost(id) {
		return // a simulation ghost leaving the band: its render ghost stays indexed
	}
	if r.cluster != nil {
		r.cluster.forgetLocal(id) // before the index entry goes: its vanish names its chunk
	}
	r.vis.Evict(id)
	if _, ok := r.anchors[id]; ok {
		delete(r.anchors, id)
		r.res.RemoveAnchor(interest.AnchorID(id))
	}
	// The viewer entry stays: an evicted entity lives on elsewhere, and the
	// view follows its ghost (a destroyed one is dropped by destroyed).
	delete(r.reasons, id)
}

// outboxWorld answers the outbox's questions at flush.
type outboxWorld struct{ r *Runtime }

// AppendObserversOf appends who sees e. A render ghost is never sent on to
// another node: its own owner sends it to whoever subscribes there.
func (o outboxWorld) AppendObserversOf(dst []Subscriber, e ecs.ID) []Subscriber {
	n := len(dst)
	dst = o.r.vis.AppendObserversOf(dst, e)
	if o.r.flushGhost(e) {
		kept := slices.DeleteFunc(dst[n:], isNode)
		dst = dst[:n+len(kept)]
	}
	return dst
}

func isNode(s Subscriber) bool { return s.Kind == interest.NodeSubscriber }

// AppendObserverIndices, SubscriberAt and SubscriberEpoch give the outbox
// the dense fast path (outbox.IndexedWorld).
func (o outboxWorld) AppendObserverIndices(dst []int32, e ecs.ID) []int32 {
	n := len(dst)
	dst = o.r.vis.AppendObserverIndices(dst, e)
	if o.r.flushGhost(e) {
		kept := slices.DeleteFunc(dst[n:], func(i int32) bool { return isNode(o.r.vis.SubscriberAt(i)) })
		dst = dst[:n+len(kept)]
	}
	return dst
}

func (o outboxWorld) SubscriberAt(i int32) Subscriber { return o.r.vis.SubscriberAt(i) }

func (o outboxWorld) SubscriberEpoch() uint64 { return o.r.vis.SubscriberEpoch() }

func (o outboxWorld) OwnerOf(e ecs.ID) (Subscriber, bool) {
	ow, ok := o.r.owner.Get(e)
	if !ok {
		return Subscriber{}, false
	}
	return interest.Account(ow.Account), true
}

func (o outboxWorld) AppendParty(dst []Subscriber, owner Subscriber) []Subscriber {
	acct, ok := owner.Account()
	if !ok || !acct.Valid() || o.r.party == nil {
		return dst
	}
	o.r.partyBuf = o.r.party(o.r.partyBuf[:0], acct)
	for _, a := range o.r.partyBuf {
		dst = append(dst, interest.Account(a))
	}
	return dst
}

// resendPrivate queues, for accounts that just became reachable, every
// component they may receive only as owner or party member: what was sent
// before the route existed was dropped.
func (r *Runtime) resendPrivate(accts []account.ID) {
	if len(accts) == 0 {
		return
	}
	owners := make(map[account.ID]bool) // owner → whether it is one of accts
	for _, a := range accts {
		owners[a] = true
		if r.party != nil {
			for _, m := range r.party(nil, a) {
				if !owners[m] {
					owners[m] = false
				}
			}
		}
	}
	r.owner.Each(func(id ecs.ID, o *Owner) {
		if self, ok := owners[o.Account]; ok && !r.isGhost(id) {
			r.markPrivate(id, self)
		}
	})
}

// markPrivate queues id's party components and, if owner, its owner-only
// ones.
func (r *Runtime) markPrivate(id ecs.ID, owner bool) {
	for _, s := range r.synced {
		if !s.enc.HasFunc(id) {
			continue
		}
		switch s.enc.AudienceFunc(id).Kind {
		case outbox.OwnerOnly:
			if owner {
				r.out.MarkDirty(id, s.wire)
			}
		case outbox.OwnerAndParty:
			r.out.MarkDirty(id, s.wire)
		}
	}
}

// ChunkOf returns the chunk id is filed under, if it is indexed.
func (r *Runtime) ChunkOf(id ecs.ID) (torus.ChunkPos, bool) { return r.vis.ChunkOf(id) }

// ColumnHolders is how many anchors and client chunks hold col resident.
func (r *Runtime) ColumnHolders(col interest.Column) int { return r.res.Holders(col) }

// IsResident reports whether col is resident.
func (r *Runtime) IsResident(col interest.Column) bool { return r.res.IsResident(col) }

// AppendPending appends the intents sent and not yet applied (what this
// tick sent, until the next tick applies it).
func (r *Runtime) AppendPending(dst []Intent) []Intent { return append(dst, r.intents...) }
