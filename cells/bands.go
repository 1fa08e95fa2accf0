package cells

import (
	"fmt"
	"math"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

// Default band widths, in chunk edges of the world.
const (
	// DefaultGhostBandChunks: view radius 5 + release margin 1 + 1 for
	// interaction = 7 chunks (224 m on the default world).
	DefaultGhostBandChunks = 7
	// DefaultInteractionBandChunks: simulation ghosts live about one chunk
	// deep (interaction reach is about 10 m).
	DefaultInteractionBandChunks = 1
	// DefaultHandoffMarginChunks: an entity is handed over about one chunk
	// past the border, so pacing on the line never flips its owner.
	DefaultHandoffMarginChunks = 1
)

// Bands are the border widths of the partition, in metres. The zero value
// takes every default. Defaults are filled by WithDefaults and nowhere else.
type Bands struct {
	// Ghost is the width of the render-ghost band: foreign entities within
	// it of a node's territory are replicated to that node.
	// 0 means DefaultGhostBandChunks chunk edges (224 m).
	Ghost float64 `json:"ghost"`
	// Interaction is the width of the simulation-ghost band, where replicas
	// become real (marked) entities. 0 means DefaultInteractionBandChunks
	// chunk edges (32 m). It must not exceed Ghost.
	Interaction float64 `json:"interaction"`
	// HandoffMargin is how far past the border an entity must stand before
	// it is handed over (the hysteresis of HandoffTarget). 0 means
	// DefaultHandoffMarginChunks chunk edges (32 m). It must not exceed
	// Ghost, so the old owner still ghosts an entity it has not yet handed
	// over.
	HandoffMargin float64 `json:"handoffMargin"`
}

// DefaultBands returns the default bands for grid's world.
func DefaultBands(grid Grid) Bands { return Bands{}.WithDefaults(grid) }

// WithDefaults returns b with every zero field replaced by its default in
// grid's chunk edges.
func (b Bands) WithDefaults(grid Grid) Bands {
	edge := grid.world.ChunkEdge()
	if b.Ghost == 0 {
		b.Ghost = DefaultGhostBandChunks * edge
	}
	if b.Interaction == 0 {
		b.Interaction = DefaultInteractionBandChunks * edge
	}
	if b.HandoffMargin == 0 {
		b.HandoffMargin = DefaultHandoffMarginChunks * edge
	}
	return b
}

// Validate checks b (after defaults) against grid. Every error is an
// errcode.Config naming the field and its value. Each band must be finite
// and positive, Ghost less than half a region edge (so a region keeps an
// interior and the band-share formula holds), and Interaction and
// HandoffMargin no wider than Ghost.
func (b Bands) Validate(grid Grid) error {
	b = b.WithDefaults(grid)
	for _, f := range []struct {
		name string
		v    float64
	}{{"Ghost", b.Ghost}, {"Interaction", b.Interaction}, {"HandoffMargin", b.HandoffMargin}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return errcode.Config(f.name, f.v, "must be a finite positive number of metres")
		}
	}
	if 2*b.Ghost >= grid.edge {
		return errcode.Config("Ghost", b.Ghost, fmt.Sprintf("must be less than half the region edge (%v)", grid.edge))
	}
	if b.Interaction > b.Ghost {
		return errcode.Config("Interaction", b.Interaction, fmt.Sprintf("must not exceed Ghost (%v)", b.Ghost))
	}
	if b.HandoffMargin > b.Ghost {
		return errcode.Config("HandoffMargin", b.HandoffMargin, fmt.Sprintf("must not exceed Ghost (%v)", b.Ghost))
	}
	return nil
}

// window returns the block of regions within distance band of p, measured
// per axis (Chebyshev), wrap-aware: columns c0 … c0+nc−1 and rows
// r0 … r0+nr−1, each wrapping. closed includes regions at exactly band.
// ok is false for a non-finite p.
func (g Grid) window(p torus.Pos, band float64, closed bool) (c0, nc, r0, nr int, ok bool) {
	x, y := g.world.NormaliseX(p.X), g.world.NormaliseY(p.Y)
	if x != x || y != y { // NaN: the input was not finite
		return 0, 0, 0, 0, false
	}
	c0, nc = axisSpan(x, band, g.edge, g.cols, closed)
	r0, nr = axisSpan(y, band, g.edge, g.rows, closed)
	return c0, nc, r0, nr, true
}

// InForeignBand reports whether p lies within band of a region owned by a
// node other than the owner of p's own region: whether an entity at p must
// be ghosted to some neighbour. Distance is per axis (a square band, like
// the square view window of chunks), wrap-aware, and strict: a region at
// exactly band does not count, and band ≤ 0 is never inside. It does not
// allocate. For an entity whose owner is not its region's owner (one
// standing inside the handoff margin), use OtherOwnerWithin with the
// actual owner.
func (t *Table) InForeignBand(p torus.Pos, band float64) bool {
	return t.otherWithin(p, band, t.owner[t.grid.RegionOf(p)])
}

// OtherOwnerWithin reports whether a node other than except owns a region
// within band of p (measured as in InForeignBand; the region containing p
// counts, at distance 0). It does not allocate.
func (t *Table) OtherOwnerWithin(p torus.Pos, band float64, except string) bool {
	return t.otherWithin(p, band, t.indexOf(except))
}

func (t *Table) otherWithin(p torus.Pos, band float64, except int32) bool {
	if !(band > 0) {
		return false
	}
	c0, nc, r0, nr, ok := t.grid.window(p, band, false)
	if !ok {
		return false
	}
	cols, rows := t.grid.cols, t.grid.rows
	row := r0
	for range nr {
		base, col := row*cols, c0
		for range nc {
			if t.owner[base+col] != except {
				return true
			}
			if col++; col == cols {
				col = 0
			}
		}
		if row++; row == rows {
			row = 0
		}
	}
	return false
}

// AppendForeignOwners appends to dst, once each, the nodes other than the
// owner of p's region that own a region within band of p (measured as in
// InForeignBand), and returns the extended slice: the nodes that must
// ghost an entity at p. It allocates only when dst lacks capacity; with
// band below half a region edge there are at most three such nodes. For an
// entity whose owner is not its region's owner, use AppendOwnersWithin
// with the actual owner: the region's owner must then get a ghost too.
func (t *Table) AppendForeignOwners(dst []string, p torus.Pos, band float64) []string {
	return t.appendWithin(dst, p, band, t.owner[t.grid.RegionOf(p)])
}

// AppendOwnersWithin appends to dst, once each, the nodes other than
// except that own a region within band of p (the region containing p
// included), and returns the extended slice. An except that owns nothing
// excludes nobody. It allocates only when dst lacks capacity.
func (t *Table) AppendOwnersWithin(dst []string, p torus.Pos, band float64, except string) []string {
	return t.appendWithin(dst, p, band, t.indexOf(except))
}

func (t *Table) appendWithin(dst []string, p torus.Pos, band float64, except int32) []string {
	if !(band > 0) {
		return dst
	}
	c0, nc, r0, nr, ok := t.grid.window(p, band, false)
	if !ok {
		return dst
	}
	start := len(dst)
	cols, rows := t.grid.cols, t.grid.rows
	row := r0
	for range nr {
		base, col := row*cols, c0
		for range nc {
			if o := t.owner[base+col]; o != except {
				node := t.nodes[o]
				if !contains(dst[start:], node) {
					dst = append(dst, node)
				}
			}
			if col++; col == cols {
				col = 0
			}
		}
		if row++; row == rows {
			row = 0
		}
	}
	return dst
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// HandoffTarget decides whether an entity at p, currently owned by
// current, must be handed over, and to whom. It returns the owner of p's
// region and true only when that owner is not current and p lies more than
// margin (per axis, wrap-aware) from every region current owns; otherwise
// "" and false. So an entity pacing on a border, or standing up to margin
// past it, keeps its owner, and one that walks margin past the line moves
// exactly once. A current that owns no region at all (it lost them in a
// table change) hands over at once. A negative or NaN margin counts as 0; a
// non-finite p never hands over. It does not allocate.
func (t *Table) HandoffTarget(current string, p torus.Pos, margin float64) (string, bool) {
	target := t.owner[t.grid.RegionOf(p)]
	if t.nodes[target] == current {
		return "", false
	}
	if !(margin >= 0) { // negative or NaN
		margin = 0
	}
	c0, nc, r0, nr, ok := t.grid.window(p, margin, true)
	if !ok {
		return "", false
	}
	self := t.indexOf(current)
	if self < 0 {
		return t.nodes[target], true
	}
	cols, rows := t.grid.cols, t.grid.rows
	row := r0
	for range nr {
		base, col := row*cols, c0
		for range nc {
			if t.owner[base+col] == self {
				return "", false
			}
			if col++; col == cols {
				col = 0
			}
		}
		if row++; row == rows {
			row = 0
		}
	}
	return t.nodes[target], true
}
