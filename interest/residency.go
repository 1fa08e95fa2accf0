package interest

import (
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

// AnchorID identifies a simulation anchor (a player's master or pet); any
// entity id converts to it.
type AnchorID uint64

// ResidencyConfig configures a Residency. Zero fields take the defaults
// documented on them (see WithDefaults).
type ResidencyConfig struct {
	// AnchorRadius is how many columns around an anchor's column (ring
	// distance, wrap-aware) it keeps simulated. Default 5, the view radius.
	AnchorRadius int
	// MaterialiseBudget caps how many columns one Commit materialises; the
	// rest wait in order for later commits. Default 8.
	MaterialiseBudget int
}

// WithDefaults returns c with zero fields set to their defaults.
func (c ResidencyConfig) WithDefaults() ResidencyConfig {
	if c.AnchorRadius == 0 {
		c.AnchorRadius = 5
	}
	if c.MaterialiseBudget == 0 {
		c.MaterialiseBudget = 8
	}
	return c
}

// Validate checks c against world (after defaults).
func (c ResidencyConfig) Validate(world torus.World) error {
	if c.AnchorRadius < 0 {
		return errcode.Config("ResidencyConfig.AnchorRadius", c.AnchorRadius, "must be >= 0")
	}
	if side := 2*c.AnchorRadius + 1; side > world.ChunksX() || side > world.ChunksY() {
		return errcode.Config("ResidencyConfig.AnchorRadius", c.AnchorRadius, "anchor square wider than the torus")
	}
	if c.MaterialiseBudget < 1 {
		return errcode.Config("ResidencyConfig.MaterialiseBudget", c.MaterialiseBudget, "must be >= 1")
	}
	return nil
}

// ResidencyChanges is what a Commit decided. Both slices are owned by the
// Residency and valid until the next Commit.
type ResidencyChanges struct {
	// Materialised columns must now be simulated (spawn their residents).
	Materialised []Column
	// Dematerialised columns are no longer held by anyone at the end of the
	// tick and may be torn down.
	Dematerialised []Column
	// Waiting is how many held columns still wait to be materialised.
	Waiting int
}

type anchor struct{ center Column }

// Residency decides which columns are simulated, by refcounting holders per
// column: all clients together are one holder (a column is client-held while
// any subscriber holds any chunk in it), and each simulation anchor is
// another. Counts change immediately; the consequences are decided only at
// Commit (end of tick), so releasing and re-holding a column within one tick
// keeps it — and the ids of everything in it. Not safe for concurrent use.
type Residency struct {
	world torus.World
	cfg   ResidencyConfig

	holders      map[Column]int32
	clientChunks map[Column]int32
	anchors      map[AnchorID]anchor

	materialised map[Column]struct{}
	queue        []Column
	queued       map[Column]struct{}
	released     []Column
	releasedSet  map[Column]struct{}

	out ResidencyChanges
}

// NewResidency returns an empty Residency.
func NewResidency(world torus.World, cfg ResidencyConfig) (*Residency, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(world); err != nil {
		return nil, err
	}
	return &Residency{
		world:        world,
		cfg:          cfg,
		holders:      make(map[Column]int32),
		clientChunks: make(map[Column]int32),
		anchors:      make(map[AnchorID]anchor),
		materialised: make(map[Column]struct{}),
		queued:       make(map[Column]struct{}),
		releasedSet:  make(map[Column]struct{}),
	}, nil
}

// FollowClients makes r count the clients of subs as one holder, through
// subs' FirstSubscriber and LastSubscriber hooks.
func FollowClients[S comparable](r *Residency, subs *Subscriptions[S]) {
	subs.AddHooks(Hooks[S]{
		FirstSubscriber: r.ClientChunkHeld,
		LastSubscriber:  r.ClientChunkReleased,
	})
}

// ClientChunkHeld records that some client holds chunk c (call once per
// chunk going from no client subscriber to one).
func (r *Residency) ClientChunkHeld(c ChunkPos) {
	col := normaliseColumn(r.world, ColumnOf(c))
	if r.clientChunks[col]++; r.clientChunks[col] == 1 {
		r.hold(col)
	}
}

// ClientChunkReleased records that no client holds chunk c any more.
func (r *Residency) ClientChunkReleased(c ChunkPos) {
	col := normaliseColumn(r.world, ColumnOf(c))
	n, ok := r.clientChunks[col]
	if !ok {
		return
	}
	if n == 1 {
		delete(r.clientChunks, col)
		r.release(col)
		return
	}
	r.clientChunks[col] = n - 1
}

// SetAnchor places (or moves) anchor id at column at: it holds every column
// within AnchorRadius of it. Moving holds the new columns before releasing
// the old ones.
func (r *Residency) SetAnchor(id AnchorID, at Column) {
	at = normaliseColumn(r.world, at)
	old, had := r.anchors[id]
	if had && old.center == at {
		return
	}
	r.anchors[id] = anchor{center: at}
	rad := int32(r.cfg.AnchorRadius)
	for dy := -rad; dy <= rad; dy++ {
		for dx := -rad; dx <= rad; dx++ {
			col := normaliseColumn(r.world, Column{X: at.X + dx, Y: at.Y + dy})
			if !had || columnDistance(r.world, old.center, col) > r.cfg.AnchorRadius {
				r.hold(col)
			}
		}
	}
	if !had {
		return
	}
	for dy := -rad; dy <= rad; dy++ {
		for dx := -rad; dx <= rad; dx++ {
			col := normaliseColumn(r.world, Column{X: old.center.X + dx, Y: old.center.Y + dy})
			if columnDistance(r.world, at, col) > r.cfg.AnchorRadius {
				r.release(col)
			}
		}
	}
}

// RemoveAnchor releases everything anchor id held.
func (r *Residency) RemoveAnchor(id AnchorID) {
	a, ok := r.anchors[id]
	if !ok {
		return
	}
	delete(r.anchors, id)
	rad := int32(r.cfg.AnchorRadius)
	for dy := -rad; dy <= rad; dy++ {
		for dx := -rad; dx <= rad; dx++ {
			r.release(normaliseColumn(r.world, Column{X: a.center.X + dx, Y: a.center.Y + dy}))
		}
	}
}

func (r *Residency) hold(col Column) {
	r.holders[col]++
	if r.holders[col] != 1 {
		return
	}
	if _, ok := r.materialised[col]; ok {
		return // released and re-held before the commit: nothing to do
	}
	if _, ok := r.queued[col]; !ok {
		r.queued[col] = struct{}{}
		r.queue = append(r.queue, col)
	}
}

func (r *Residency) release(col Column) {
	n := r.holders[col]
	if n <= 0 {
		return
	}
	if n > 1 {
		r.holders[col] = n - 1
		return
	}
	delete(r.holders, col)
	if _, ok := r.releasedSet[col]; !ok {
		r.releasedSet[col] = struct{}{}
		r.released = append(r.released, col)
	}
}

// Holders returns how many holders hold col (clients count once).
func (r *Residency) Holders(col Column) int { return int(r.holders[normaliseColumn(r.world, col)]) }

// IsResident reports whether col is materialised.
func (r *Residency) IsResident(col Column) bool {
	_, ok := r.materialised[normaliseColumn(r.world, col)]
	return ok
}

// Commit ends the tick: columns left with no holder are dematerialised, and
// up to MaterialiseBudget held columns are materialised in the order they
// were first held. A queued column released before its turn is dropped.
func (r *Residency) Commit() ResidencyChanges {
	r.out.Materialised = r.out.Materialised[:0]
	r.out.Dematerialised = r.out.Dematerialised[:0]
	for _, col := range r.released {
		delete(r.releasedSet, col)
		if r.holders[col] > 0 {
			continue
		}
		if _, ok := r.materialised[col]; ok {
			delete(r.materialised, col)
			r.out.Dematerialised = append(r.out.Dematerialised, col)
		}
	}
	r.released = r.released[:0]

	budget := r.cfg.MaterialiseBudget
	k := 0
	for ; k < len(r.queue) && budget > 0; k++ {
		col := r.queue[k]
		delete(r.queued, col)
		if r.holders[col] == 0 {
			continue
		}
		r.materialised[col] = struct{}{}
		r.out.Materialised = append(r.out.Materialised, col)
		budget--
	}
	// Keep the still-held rest, in order, without reallocating; a column
	// released while it waited leaves the queue (it re-enters when held).
	n := 0
	for _, col := range r.queue[k:] {
		if r.holders[col] == 0 {
			delete(r.queued, col)
			continue
		}
		r.queue[n] = col
		n++
	}
	r.queue = r.queue[:n]
	r.out.Waiting = n
	return r.out
}
