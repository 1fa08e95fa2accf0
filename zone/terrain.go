package zone

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/terrain"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

// The ground (the gateway role's terrain): every node generates any
// column's base from the world seed (package terrain), keeps the edits of
// the columns its clients hold, as the world store has them, and sends
// each client base + edits for every column its view reaches, and again
// whenever the column is edited. An edit is written to the store by the
// node of the player who made it, which then tells every other node the
// column's new revision; a node that holds the column reloads it.

// column names a chunk column (a normalised ChunkPos without its slab).
type column struct{ X, Y int32 }

func (c column) chunk() torus.ChunkPos { return torus.ChunkPos{X: c.X, Y: c.Y} }

type columnEdits struct {
	rev   uint64
	edits []terrain.Edit
}

// TerrainStats count the ground's work on this node since New (read on the
// world goroutine).
type TerrainStats struct {
	// Sent counts Terrain messages queued for clients; Loads the columns
	// read from the store; Edits the edits this node wrote; Dropped the
	// loads and edits refused because the store's queue was full or the
	// store failed.
	Sent, Loads, Edits, Dropped int
}

// TerrainStats returns the ground's counters.
func (r *Runtime) TerrainStats() TerrainStats { return r.ground.stats }

type ground struct {
	gen     *terrain.Generator
	edits   map[column]*columnEdits
	loading map[column]bool // a load in flight; true: load again when it lands (a newer revision was announced)
	stats   TerrainStats

	jobs chan func(context.Context)
	wg   sync.WaitGroup
	once sync.Once
	ctx  context.Context
	stop context.CancelFunc
}

func (r *Runtime) startGround() error {
	gen, err := terrain.New(r.cfg.WorldSeed, r.geo)
	if err != nil {
		return err
	}
	g := &r.ground
	g.gen, g.edits, g.loading = gen, make(map[column]*columnEdits), make(map[column]bool)
	if r.cfg.WorldStore == nil {
		return nil
	}
	g.ctx, g.stop = context.WithCancel(context.Background())
	g.jobs = make(chan func(context.Context), 4096)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for job := range g.jobs {
			job(g.ctx)
		}
	}()
	return nil
}

func (g *ground) close() {
	g.once.Do(func() {
		if g.jobs != nil {
			close(g.jobs)
			g.wg.Wait()
			g.stop()
		}
	})
}

// do queues store work for the ground's goroutine; false if the queue is
// full.
func (g *ground) do(job func(context.Context)) bool {
	if g.jobs == nil {
		return false
	}
	select {
	case g.jobs <- job:
		return true
	default:
		g.stats.Dropped++
		return false
	}
}

// columnsAdded sends the ground of the columns newly in an account's view
// to its client, if this node is the account's gateway.
func (r *Runtime) columnsAdded(a account.ID, chunks []torus.ChunkPos) {
	s := r.gw[a]
	if s == nil {
		return
	}
	for _, c := range chunks {
		c = r.geo.NormaliseChunk(c)
		r.sendColumn(s, column{c.X, c.Y}, false)
	}
}

// sendColumn queues the column's ground for the session unless it has it
// at this revision already (force: whatever it has); a column whose edits
// are not known here yet is sent as its base now and again once they are.
func (r *Runtime) sendColumn(s *gwSession, col column, force bool) {
	g := &r.ground
	e := g.edits[col]
	if e == nil {
		if _, inFlight := g.loading[col]; !inFlight {
			r.loadColumn(col)
		}
		e = &columnEdits{}
	}
	if sent, ok := s.cols[col]; ok && sent == e.rev && !force {
		return
	}
	if s.cols == nil {
		s.cols = make(map[column]uint64)
	}
	s.cols[col] = e.rev
	ch := terrain.Chunk{X: col.X, Y: col.Y, Revision: e.rev, Heights: g.gen.Base(col.chunk()), Edits: e.edits}
	s.s.SendTerrain(terrain.AppendChunk(nil, &ch))
	g.stats.Sent++
}

// loadColumn reads the column's edits from the store, one load at a time
// per column; asked again while one is in flight, it loads once more when
// that one lands.
func (r *Runtime) loadColumn(col column) {
	g := &r.ground
	if r.cfg.WorldStore == nil {
		return
	}
	if _, inFlight := g.loading[col]; inFlight {
		g.loading[col] = true
		return
	}
	store := r.cfg.WorldStore
	if g.do(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		rev, edits, err := store.Edits(ctx, col.chunk(), 0)
		cancel()
		r.Post(func() { r.columnLoaded(col, rev, edits, err) })
	}) {
		g.loading[col] = false
	}
}

func (r *Runtime) columnLoaded(col column, rev uint64, stored []worldstore.RevEdit, err error) {
	g := &r.ground
	again := g.loading[col]
	delete(g.loading, col)
	if again {
		defer r.loadColumn(col)
	}
	if err != nil {
		g.stats.Dropped++
		r.cfg.Logger.Warn("zone: load terrain edits", "column", col, "err", err)
		return
	}
	g.stats.Loads++
	if old := g.edits[col]; old != nil && old.rev >= rev {
		return
	}
	edits := make([]terrain.Edit, len(stored))
	for i, e := range stored {
		edits[i] = terrain.Edit{Kind: e.Edit.Kind, Data: e.Edit.Data, Account: e.Edit.Account}
	}
	g.edits[col] = &columnEdits{rev: rev, edits: edits}
	for _, s := range r.gw {
		if sent, ok := s.cols[col]; ok && sent != rev {
			r.sendColumn(s, col, true)
		}
	}
}

// ErrNoWorldStore: terrain edits need Config.WorldStore.
var ErrNoWorldStore = errors.New("zone: no world store (Config.WorldStore): edits are not kept")

// EditTerrain records a player's edit of the column under p (on the world
// goroutine): the store writes it at the column's next revision, and every
// node's clients that hold the column get the new ground. The edit is
// checked before it is queued (worldstore.ValidateEdit).
func (r *Runtime) EditTerrain(p torus.Pos, e terrain.Edit) error {
	if r.cfg.WorldStore == nil {
		return ErrNoWorldStore
	}
	we := worldstore.Edit{Kind: e.Kind, Data: e.Data, Account: e.Account}
	if err := worldstore.ValidateEdit(we); err != nil {
		return err
	}
	c := r.geo.ChunkOf(p)
	col := column{c.X, c.Y}
	store := r.cfg.WorldStore
	if !r.ground.do(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		rev, err := appendEdit(ctx, store, col.chunk(), we)
		if err != nil {
			r.Post(func() {
				r.ground.stats.Dropped++
				r.cfg.Logger.Warn("zone: terrain edit", "column", col, "err", err)
			})
			return
		}
		r.Post(func() { r.columnEdited(col, rev) })
	}) {
		return fmt.Errorf("zone: terrain edit of %v: the store's queue is full", col)
	}
	return nil
}

// appendEdit writes e at the column's next revision, rereading it after a
// conflict (another node's edit got there first).
func appendEdit(ctx context.Context, store worldstore.ChunkEdits, ch torus.ChunkPos, e worldstore.Edit) (uint64, error) {
	rev, _, err := store.Edits(ctx, ch, ^uint64(0))
	for range 8 {
		if err != nil {
			return 0, err
		}
		var next uint64
		next, err = store.AppendEdit(ctx, ch, rev, e)
		if err == nil {
			return next, nil
		}
		var ce *worldstore.ConflictError
		if !errors.As(err, &ce) {
			return 0, err
		}
		rev, err = ce.Current, nil
	}
	return 0, fmt.Errorf("zone: terrain edit of %v: eight conflicts in a row", ch)
}

// columnEdited follows this node's own edit: reload the column, and tell
// every other node.
func (r *Runtime) columnEdited(col column, rev uint64) {
	r.ground.stats.Edits++
	r.loadColumn(col)
	if r.cluster == nil {
		return
	}
	payload := wire.Terrain{Fence: r.cluster.fence(), Chunk: col.chunk(), Rev: rev}.Append(nil)
	for _, n := range r.Table().Nodes() {
		if n != r.Name() {
			r.cluster.queue(n, wire.KindTerrain, payload)
		}
	}
}

func (c *cluster) receiveTerrain(from string, payload []byte) error {
	m, err := wire.DecodeTerrain(payload)
	if err != nil {
		return err
	}
	if !c.r.accept(from, m.Fence) {
		c.stats.Refused++
		return nil
	}
	r := c.r
	col := column{m.Chunk.X, m.Chunk.Y}
	if e := r.ground.edits[col]; e != nil && e.rev >= m.Rev {
		return nil
	}
	held := r.ground.edits[col] != nil
	for _, s := range r.gw {
		if _, ok := s.cols[col]; ok {
			held = true
			break
		}
	}
	if held {
		r.loadColumn(col) // what is known meanwhile is sent as it is: older, never wrong
	}
	return nil
}
