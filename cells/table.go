package cells

import (
	"errors"
	"fmt"
	"slices"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/nodename"
	"github.com/shardwise/shardwise/torus"
)

// Errors of the region table. Each carries a stable code (errcode.Of).
var (
	// ErrInvalidTable matches every *TableError and every failure to parse
	// a table.
	ErrInvalidTable = errcode.New("CELLS.TABLE_INVALID", "invalid region table")
	// ErrGridMismatch is returned when two tables on different grids are
	// compared.
	ErrGridMismatch = errcode.New("CELLS.GRID_MISMATCH", "region tables are on different grids")
	// ErrStaleVersion is returned when a new table would not have a higher
	// version than the one it replaces.
	ErrStaleVersion = errcode.New("CELLS.STALE_VERSION", "region table version is not newer")
)

// TableError says what is wrong with a region table. It matches
// ErrInvalidTable with errors.Is and carries its code.
type TableError struct {
	// Region is the region at fault, or −1 when the fault is not one
	// region's (a bad version, a bad node list).
	Region RegionID
	// Node is the node name at fault, if any.
	Node string
	// Reason says what is wrong.
	Reason string
	// Err is the cause, if there is one: for a bad node name the
	// *errcode.ConfigError of nodename.Check, whose Field says where the
	// name was given ("owners[17]"). errors.As finds it through Unwrap.
	Err error
}

func (e *TableError) Error() string {
	switch {
	case e.Err != nil:
		// The cause names the field and the value; the region is in the
		// field already.
		return "invalid region table: " + e.Err.Error()
	case e.Region >= 0 && e.Node != "":
		return fmt.Sprintf("invalid region table: region %d, node %q: %s", e.Region, e.Node, e.Reason)
	case e.Region >= 0:
		return fmt.Sprintf("invalid region table: region %d: %s", e.Region, e.Reason)
	case e.Node != "":
		return fmt.Sprintf("invalid region table: node %q: %s", e.Node, e.Reason)
	}
	return "invalid region table: " + e.Reason
}

// ErrorCode returns the code of ErrInvalidTable.
func (e *TableError) ErrorCode() string { return ErrInvalidTable.ErrorCode() }

// Is makes errors.Is(err, ErrInvalidTable) true.
func (e *TableError) Is(target error) bool { return target == ErrInvalidTable }

// Unwrap returns the cause (nil when there is none).
func (e *TableError) Unwrap() error { return e.Err }

// badNode is the error for name, which nodename.Valid refused, given at
// field, for region r (−1 when the name is not one region's). Callers test
// Valid first so the field's name is formatted only for a bad name.
func badNode(field string, r RegionID, name string) error {
	err := nodename.Check(field, name)
	reason := "invalid node name"
	var ce *errcode.ConfigError
	if errors.As(err, &ce) {
		reason = ce.Reason
	}
	return &TableError{Region: r, Node: name, Reason: reason, Err: err}
}

// Table is a versioned assignment of every region of a grid to a node. It
// is immutable: build one with NewTable, Uniform or WithOwners, share it
// freely between goroutines, and replace the whole value (for example
// behind an atomic.Pointer) when the operator installs a new version.
// Authority is derived from it: the owner of an entity is OwnerOf its
// position.
//
// Internally every region holds an index into the sorted list of distinct
// nodes, so lookups compare integers, not strings.
type Table struct {
	grid    Grid
	version uint64
	nodes   []string // distinct owners, sorted
	owner   []int32  // region → index into nodes
}

// NewTable builds a table of grid at version from owners, the node name of
// every region in RegionID order (len(owners) == grid.Regions()). Every
// region must be assigned a valid node name (nodename.Check; a bad one is
// reported as the field "owners[r]", which is also its key path in the JSON
// form) and version must be at least 1 (0 is left to mean "no table").
// owners is copied.
func NewTable(grid Grid, version uint64, owners []string) (*Table, error) {
	if grid.cols == 0 {
		return nil, &TableError{Region: -1, Reason: "the grid is the zero Grid; use NewGrid or DefaultGrid"}
	}
	if version == 0 {
		return nil, &TableError{Region: -1, Reason: "version must be at least 1"}
	}
	if len(owners) != grid.Regions() {
		return nil, &TableError{Region: -1, Reason: fmt.Sprintf("%d owners for %d regions", len(owners), grid.Regions())}
	}
	nodes := make([]string, 0, 16)
	for r, id := range owners {
		if !nodename.Valid(id) {
			return nil, badNode(fmt.Sprintf("owners[%d]", r), RegionID(r), id)
		}
		if i, found := slices.BinarySearch(nodes, id); !found {
			nodes = slices.Insert(nodes, i, id)
		}
	}
	t := &Table{grid: grid, version: version, nodes: slices.Clip(nodes), owner: make([]int32, len(owners))}
	for r, id := range owners {
		i, _ := slices.BinarySearch(nodes, id)
		t.owner[r] = int32(i)
	}
	return t, nil
}

// Uniform builds a table that spreads the R regions of grid over the n
// nodes in contiguous row-major blocks of ⌊R/n⌋ or ⌈R/n⌉ regions: region r
// goes to nodes[⌊r·n/R⌋]. With
// a node count that divides the rows each node owns whole bands of rows,
// which keeps borders (and so ghosts and handoffs) few. nodes must be
// non-empty, valid and distinct (a bad name is reported as the field
// "nodes[i]"), and no more than the regions.
func Uniform(grid Grid, version uint64, nodes []string) (*Table, error) {
	if len(nodes) == 0 {
		return nil, &TableError{Region: -1, Reason: "no nodes"}
	}
	if len(nodes) > grid.Regions() {
		return nil, &TableError{Region: -1, Reason: fmt.Sprintf("%d nodes for %d regions", len(nodes), grid.Regions())}
	}
	seen := make(map[string]bool, len(nodes))
	for i, id := range nodes {
		if !nodename.Valid(id) {
			return nil, badNode(fmt.Sprintf("nodes[%d]", i), -1, id)
		}
		if seen[id] {
			return nil, &TableError{Region: -1, Node: id, Reason: "node listed twice"}
		}
		seen[id] = true
	}
	regions := grid.Regions()
	owners := make([]string, regions)
	for r := range owners {
		owners[r] = nodes[r*len(nodes)/regions]
	}
	return NewTable(grid, version, owners)
}

// WithOwners returns a new table at version with the regions in changes
// reassigned and every other region kept. version must be higher than t's
// (ErrStaleVersion otherwise): a table changes only by an explicit, newer
// version. A bad node name is reported as the field "changes[r]".
func (t *Table) WithOwners(version uint64, changes map[RegionID]string) (*Table, error) {
	if version <= t.version {
		return nil, ErrStaleVersion.Wrap("version %d, current %d", version, t.version)
	}
	owners := t.Owners()
	for r, id := range changes {
		if !t.grid.Valid(r) {
			return nil, &TableError{Region: r, Node: id, Reason: fmt.Sprintf("no such region (grid has %d)", t.grid.Regions())}
		}
		if !nodename.Valid(id) {
			return nil, badNode(fmt.Sprintf("changes[%d]", r), r, id)
		}
		owners[r] = id
	}
	return NewTable(t.grid, version, owners)
}

// Validate re-checks the invariants every constructor establishes. It
// exists for tables that did not come from a constructor: the zero Table,
// or one decoded with UnmarshalJSON.
func (t *Table) Validate() error {
	if t == nil || t.grid.cols == 0 || t.version == 0 || len(t.owner) != t.grid.Regions() || len(t.nodes) == 0 {
		return &TableError{Region: -1, Reason: "table is empty or was not built by a constructor"}
	}
	for r, i := range t.owner {
		if i < 0 || int(i) >= len(t.nodes) {
			return &TableError{Region: RegionID(r), Reason: "owner index out of range"}
		}
	}
	checked := make([]bool, len(t.nodes))
	for r, i := range t.owner {
		if checked[i] {
			continue
		}
		checked[i] = true
		if !nodename.Valid(t.nodes[i]) {
			return badNode(fmt.Sprintf("owners[%d]", r), RegionID(r), t.nodes[i])
		}
	}
	return nil
}

// Version is the table's version; a higher version replaces a lower one.
func (t *Table) Version() uint64 { return t.version }

// Grid is the grid the table assigns.
func (t *Table) Grid() Grid { return t.grid }

// Owner returns the node that owns region r. r must be valid.
func (t *Table) Owner(r RegionID) string { return t.nodes[t.owner[r]] }

// OwnerOf returns the node that owns the region containing p: the single
// writer of an entity standing at p (outside a handoff). It does not
// allocate.
func (t *Table) OwnerOf(p torus.Pos) string {
	return t.nodes[t.owner[t.grid.RegionOf(p)]]
}

// OwnerOfChunk returns the node that owns the region containing chunk c.
func (t *Table) OwnerOfChunk(c torus.ChunkPos) string {
	return t.nodes[t.owner[t.grid.RegionOfChunk(c)]]
}

// Owners returns a fresh slice of every region's owner in RegionID order.
func (t *Table) Owners() []string {
	out := make([]string, len(t.owner))
	for r, i := range t.owner {
		out[r] = t.nodes[i]
	}
	return out
}

// Nodes returns the distinct owners, sorted (a fresh slice).
func (t *Table) Nodes() []string { return slices.Clone(t.nodes) }

// RegionsOf returns the regions node owns, ascending (nil if none).
func (t *Table) RegionsOf(node string) []RegionID {
	i := t.indexOf(node)
	if i < 0 {
		return nil
	}
	var out []RegionID
	for r, o := range t.owner {
		if o == i {
			out = append(out, RegionID(r))
		}
	}
	return out
}

// indexOf returns node's index in t.nodes, or −1 if it owns nothing.
func (t *Table) indexOf(node string) int32 {
	if i, ok := slices.BinarySearch(t.nodes, node); ok {
		return int32(i)
	}
	return -1
}

// Neighbours returns the eight regions around r with their owners and
// coordinate offsets (see Grid.Neighbours). A node can be its own
// neighbour, and one peer can appear twice at two offsets. r must be valid.
func (t *Table) Neighbours(r RegionID) [8]Neighbour {
	ns := t.grid.Neighbours(r)
	for i := range ns {
		ns[i].Node = t.nodes[t.owner[ns[i].Region]]
	}
	return ns
}

// Peers returns the nodes other than node that own a region bordering one
// of node's regions (diagonals included), sorted: the nodes it exchanges
// ghosts and handoffs with. Nil if node owns nothing or has no peer.
func (t *Table) Peers(node string) []string {
	self := t.indexOf(node)
	if self < 0 {
		return nil
	}
	seen := make([]bool, len(t.nodes))
	for r, o := range t.owner {
		if o != self {
			continue
		}
		for _, n := range t.grid.Neighbours(RegionID(r)) {
			seen[t.owner[n.Region]] = true
		}
	}
	var out []string
	for i, s := range seen {
		if s && int32(i) != self {
			out = append(out, t.nodes[i])
		}
	}
	return out
}

// Equal reports whether t and u assign the same grid the same way at the
// same version. Two nil tables are equal; nil and non-nil are not.
func (t *Table) Equal(u *Table) bool {
	if t == nil || u == nil {
		return t == u
	}
	if t.grid != u.grid || t.version != u.version || len(t.owner) != len(u.owner) {
		return false
	}
	for r := range t.owner {
		if t.nodes[t.owner[r]] != u.nodes[u.owner[r]] {
			return false
		}
	}
	return true
}

// Diff returns the regions whose owner differs between t and next,
// ascending: what a switch from t to next hands over. Both tables must be
// on the same grid (ErrGridMismatch).
func (t *Table) Diff(next *Table) ([]RegionID, error) {
	if t.grid != next.grid {
		return nil, ErrGridMismatch.Wrap("%+v vs %+v", t.grid.Config(), next.grid.Config())
	}
	var out []RegionID
	for r := range t.owner {
		if t.nodes[t.owner[r]] != next.nodes[next.owner[r]] {
			out = append(out, RegionID(r))
		}
	}
	return out, nil
}
