package cells_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

func mustTable(t testing.TB, g cells.Grid, version uint64, owners []string) *cells.Table {
	t.Helper()
	tab, err := cells.NewTable(g, version, owners)
	if err != nil {
		t.Fatalf("NewTable: %v", err)
	}
	return tab
}

// tableFrom assigns every region of g the node f(col, row).
func tableFrom(t testing.TB, g cells.Grid, f func(col, row int) string) *cells.Table {
	t.Helper()
	owners := make([]string, g.Regions())
	for id := range owners {
		col, row := g.Coords(cells.RegionID(id))
		owners[id] = f(col, row)
	}
	return mustTable(t, g, 1, owners)
}

func repeat(n int, id string) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = id
	}
	return s
}

func TestNewTableValidation(t *testing.T) {
	g := cells.DefaultGrid()
	with := func(r int, id string) []string {
		s := repeat(256, "a")
		s[r] = id
		return s
	}
	cases := []struct {
		name    string
		grid    cells.Grid
		version uint64
		owners  []string
		region  cells.RegionID // −1: not one region's fault
	}{
		{"version 0", g, 0, repeat(256, "a"), -1},
		{"too few", g, 1, repeat(255, "a"), -1},
		{"too many", g, 1, repeat(257, "a"), -1},
		{"nil", g, 1, nil, -1},
		{"zero grid", cells.Grid{}, 1, nil, -1},
		{"empty id", g, 1, with(17, ""), 17},
		{"space", g, 1, with(3, "node a"), 3},
		{"tab", g, 1, with(255, "a\tb"), 255},
		{"control", g, 1, with(0, "a\x00"), 0},
		{"bad utf-8", g, 1, with(9, "a\xffb"), 9},
		{"unicode", g, 1, with(9, "zoné"), 9},
		{"upper case", g, 1, with(4, "Zone-A"), 4},
		{"dot", g, 1, with(1, "."), 1},
		{"dot dot", g, 1, with(2, ".."), 2},
		{"leading dash", g, 1, with(2, "-a"), 2},
		{"slash", g, 1, with(2, "a/b"), 2},
		{"too long", g, 1, with(100, strings.Repeat("x", 65)), 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tab, err := cells.NewTable(c.grid, c.version, c.owners)
			if tab != nil || !errors.Is(err, cells.ErrInvalidTable) || errcode.Of(err) != "CELLS.TABLE_INVALID" {
				t.Fatalf("NewTable = %v, %v; want ErrInvalidTable", tab, err)
			}
			var te *cells.TableError
			if !errors.As(err, &te) || te.Region != c.region {
				t.Fatalf("error %v: want region %d", err, c.region)
			}
			if c.region < 0 {
				return
			}
			// A bad name is a configuration error naming the owner's
			// place in the list and the name as given.
			var ce *errcode.ConfigError
			field := fmt.Sprintf("owners[%d]", c.region)
			if !errors.As(err, &ce) || ce.Field != field || ce.Value != c.owners[c.region] || !strings.Contains(err.Error(), field+" = ") {
				t.Fatalf("error %v does not name %s = %q", err, field, c.owners[c.region])
			}
		})
	}
	ok := mustTable(t, g, 7, with(5, strings.Repeat("x", 64)))
	if ok.Version() != 7 || ok.Owner(5) != strings.Repeat("x", 64) || ok.Validate() != nil {
		t.Fatal("valid table rejected or mangled")
	}
	if err := (&cells.Table{}).Validate(); !errors.Is(err, cells.ErrInvalidTable) {
		t.Fatalf("zero Table Validate = %v", err)
	}
}

// Uniform and WithOwners name the argument a bad name came in.
func TestBuildersNameTheBadNode(t *testing.T) {
	g := cells.DefaultGrid()
	v1 := mustTable(t, g, 1, repeat(256, "a"))
	for _, c := range []struct {
		err   error
		field string
		value string
	}{
		{func() error { _, err := cells.Uniform(g, 1, []string{"a", "B"}); return err }(), "nodes[1]", "B"},
		{func() error { _, err := cells.Uniform(g, 1, []string{".hidden"}); return err }(), "nodes[0]", ".hidden"},
		{func() error { _, err := v1.WithOwners(2, map[cells.RegionID]string{7: "zone 7"}); return err }(), "changes[7]", "zone 7"},
	} {
		var ce *errcode.ConfigError
		if !errors.Is(c.err, cells.ErrInvalidTable) || !errors.As(c.err, &ce) || ce.Field != c.field || ce.Value != c.value {
			t.Errorf("error %v, want ErrInvalidTable naming %s = %q", c.err, c.field, c.value)
		}
	}
}

func TestNewTableCopiesOwners(t *testing.T) {
	owners := repeat(256, "a")
	tab := mustTable(t, cells.DefaultGrid(), 1, owners)
	owners[0] = "b"
	if tab.Owner(0) != "a" {
		t.Fatal("table shares the caller's slice")
	}
	got := tab.Owners()
	got[1] = "c"
	if tab.Owner(1) != "a" {
		t.Fatal("Owners() exposes the table's storage")
	}
}

func TestUniform(t *testing.T) {
	g := cells.DefaultGrid()
	for _, n := range []int{1, 2, 3, 7, 16, 255, 256} {
		nodes := make([]string, n)
		for i := range nodes {
			nodes[i] = "zone-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		}
		tab, err := cells.Uniform(g, 3, nodes)
		if err != nil {
			t.Fatalf("Uniform(%d): %v", n, err)
		}
		if tab.Version() != 3 {
			t.Fatalf("version %d", tab.Version())
		}
		for i, node := range nodes {
			rs := tab.RegionsOf(node)
			// Each node owns a contiguous run of 256/n (rounded) regions.
			if len(rs) < 256/n || len(rs) > 256/n+1 {
				t.Fatalf("Uniform(%d): node %d owns %d regions", n, i, len(rs))
			}
			for j := 1; j < len(rs); j++ {
				if rs[j] != rs[j-1]+1 {
					t.Fatalf("Uniform(%d): node %d owns a broken run %v", n, i, rs)
				}
			}
		}
		sorted := slices.Sorted(slices.Values(nodes))
		if !slices.Equal(tab.Nodes(), sorted) {
			t.Fatalf("Nodes() = %v, want %v", tab.Nodes(), sorted)
		}
	}
	// 16 nodes on 16 rows: node i owns exactly row i.
	nodes := make([]string, 16)
	for i := range nodes {
		nodes[i] = string(rune('a' + i))
	}
	tab, _ := cells.Uniform(g, 1, nodes)
	if tab.OwnerOf(torus.Pos{X: 127_990, Y: 5}) != "a" || tab.OwnerOf(torus.Pos{X: 5, Y: 127_990}) != "p" || tab.OwnerOf(torus.Pos{Y: -1}) != "p" {
		t.Fatal("row striping wrong at the seam")
	}
	for _, bad := range [][]string{nil, {}, {"a", "a"}, {"a", ""}, {"a b"}, make([]string, 257)} {
		if _, err := cells.Uniform(g, 1, bad); !errors.Is(err, cells.ErrInvalidTable) {
			t.Errorf("Uniform(%q) = %v, want ErrInvalidTable", bad, err)
		}
	}
	if _, err := cells.Uniform(g, 0, []string{"a"}); !errors.Is(err, cells.ErrInvalidTable) {
		t.Errorf("Uniform at version 0 = %v", err)
	}
}

func TestOwnerOfAtSeam(t *testing.T) {
	g := cells.DefaultGrid()
	// West half "w", east half "e": the seam at x = 0 is a w|e border too.
	tab := tableFrom(t, g, func(col, _ int) string {
		if col < 8 {
			return "w"
		}
		return "e"
	})
	cases := []struct {
		p    torus.Pos
		want string
	}{
		{torus.Pos{X: 5}, "w"},
		{torus.Pos{X: 127_990}, "e"},
		{torus.Pos{X: -5}, "e"},
		{torus.Pos{X: 63_999.99}, "w"},
		{torus.Pos{X: 64_000}, "e"},
		{torus.Pos{X: W + 5, Y: -3 * W}, "w"},
	}
	for _, c := range cases {
		if got := tab.OwnerOf(c.p); got != c.want {
			t.Errorf("OwnerOf(%+v) = %q, want %q", c.p, got, c.want)
		}
		if got := tab.OwnerOfChunk(g.World().ChunkOf(c.p)); got != c.want {
			t.Errorf("OwnerOfChunk(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}

func TestWithOwnersAndDiff(t *testing.T) {
	g := cells.DefaultGrid()
	v1, err := cells.Uniform(g, 1, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v1.WithOwners(1, map[cells.RegionID]string{0: "b"}); !errors.Is(err, cells.ErrStaleVersion) || errcode.Of(err) != "CELLS.STALE_VERSION" {
		t.Fatalf("same version: %v", err)
	}
	if _, err := v1.WithOwners(2, map[cells.RegionID]string{256: "b"}); !errors.Is(err, cells.ErrInvalidTable) {
		t.Fatalf("bad region: %v", err)
	}
	if _, err := v1.WithOwners(2, map[cells.RegionID]string{3: ""}); !errors.Is(err, cells.ErrInvalidTable) {
		t.Fatalf("bad node: %v", err)
	}
	v2, err := v1.WithOwners(2, map[cells.RegionID]string{0: "c", 200: "a", 5: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if v1.Owner(0) != "a" || v1.Version() != 1 {
		t.Fatal("WithOwners changed the original")
	}
	if v2.Owner(0) != "c" || v2.Owner(200) != "a" || v2.Owner(1) != "a" || v2.Owner(255) != "b" || v2.Version() != 2 {
		t.Fatal("WithOwners result wrong")
	}
	diff, err := v1.Diff(v2)
	if err != nil || !slices.Equal(diff, []cells.RegionID{0, 200}) {
		t.Fatalf("Diff = %v, %v; want [0 200]", diff, err)
	}
	if !slices.Equal(v2.Nodes(), []string{"a", "b", "c"}) {
		t.Fatalf("Nodes = %v", v2.Nodes())
	}
	if v1.Equal(v2) || !v1.Equal(v1) {
		t.Fatal("Equal wrong")
	}
	same, _ := cells.Uniform(g, 1, []string{"a", "b"})
	if !v1.Equal(same) {
		t.Fatal("equal tables not Equal")
	}
	other := mustTable(t, mustGrid(t, cells.GridConfig{RegionEdge: 16_000}), 1, repeat(64, "a"))
	if _, err := v1.Diff(other); !errors.Is(err, cells.ErrGridMismatch) || errcode.Of(err) != "CELLS.GRID_MISMATCH" {
		t.Fatalf("Diff across grids: %v", err)
	}
	if v1.Equal(other) {
		t.Fatal("tables on different grids Equal")
	}
	if v1.RegionsOf("nobody") != nil {
		t.Fatal("RegionsOf unknown node")
	}
}

func TestTableNeighboursAndPeers(t *testing.T) {
	// Two columns of regions: a owns the west one, b the east one. Region 0
	// (a) has b on both sides, at offsets 0 (east) and −W (west), and is
	// its own neighbour to the north and south.
	g := mustGrid(t, cells.GridConfig{RegionEdge: 64_000})
	tab := tableFrom(t, g, func(col, _ int) string { return []string{"a", "b"}[col] })
	ns := tab.Neighbours(0)
	var bOffsets []float64
	for _, n := range ns {
		if n.Node == "b" && n.DY == 0 {
			bOffsets = append(bOffsets, n.OffsetX)
		}
		if n.DX == 0 && n.Node != "a" {
			t.Fatalf("north/south neighbour of region 0: %+v", n)
		}
	}
	if !slices.Equal(bOffsets, []float64{-W, 0}) {
		t.Fatalf("peer b at offsets %v, want [−W 0]", bOffsets)
	}
	if !slices.Equal(tab.Peers("a"), []string{"b"}) || !slices.Equal(tab.Peers("b"), []string{"a"}) {
		t.Fatalf("Peers: %v %v", tab.Peers("a"), tab.Peers("b"))
	}
	// One node owning everything is its own neighbour everywhere, no peers.
	solo := mustTable(t, cells.DefaultGrid(), 1, repeat(256, "solo"))
	for _, n := range solo.Neighbours(0) {
		if n.Node != "solo" {
			t.Fatalf("solo neighbour %+v", n)
		}
	}
	if solo.Peers("solo") != nil || solo.Peers("x") != nil {
		t.Fatal("solo table has peers")
	}
	// Sixteen row stripes: each node borders the rows above and below it,
	// and the first and last rows border each other across the seam.
	nodes := make([]string, 16)
	for i := range nodes {
		nodes[i] = string(rune('a' + i))
	}
	rows, _ := cells.Uniform(cells.DefaultGrid(), 1, nodes)
	if !slices.Equal(rows.Peers("a"), []string{"b", "p"}) || !slices.Equal(rows.Peers("h"), []string{"g", "i"}) {
		t.Fatalf("row peers: %v %v", rows.Peers("a"), rows.Peers("h"))
	}
}

// TestTableConcurrentReads backs the claim that a Table can be shared
// between goroutines without locks (run under -race).
func TestTableConcurrentReads(t *testing.T) {
	tab := quadrants(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([]string, 0, 4)
			for j := range 2000 {
				p := torus.Pos{X: float64(i*1000 + j*37), Y: float64(j * 61)}
				_ = tab.OwnerOf(p)
				dst = tab.AppendForeignOwners(dst[:0], p, 224)
				_, _ = tab.HandoffTarget("a", p, 32)
				_ = tab.Neighbours(cells.RegionID(j % 256))
				_ = tab.Peers("b")
				_ = tab.Owners()
			}
		}()
	}
	wg.Wait()
}
