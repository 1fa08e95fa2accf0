package cells_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

func TestBandsDefaultsAndValidate(t *testing.T) {
	g := cells.DefaultGrid()
	d := cells.DefaultBands(g)
	if d != (cells.Bands{Ghost: 224, Interaction: 32, HandoffMargin: 32}) {
		t.Fatalf("DefaultBands = %+v", d)
	}
	small := mustGrid(t, cells.GridConfig{World: torus.Config{Width: 1600, Height: 1600, ChunkEdge: 10}, RegionEdge: 800})
	if got := cells.DefaultBands(small); got != (cells.Bands{Ghost: 70, Interaction: 10, HandoffMargin: 10}) {
		t.Fatalf("bands follow the chunk edge: %+v", got)
	}
	cases := []struct {
		name  string
		b     cells.Bands
		field string
	}{
		{"zero", cells.Bands{}, ""},
		{"explicit", cells.Bands{Ghost: 300, Interaction: 10, HandoffMargin: 48}, ""},
		{"negative ghost", cells.Bands{Ghost: -1}, "Ghost"},
		{"nan interaction", cells.Bands{Interaction: math.NaN()}, "Interaction"},
		{"inf margin", cells.Bands{HandoffMargin: math.Inf(1)}, "HandoffMargin"},
		{"ghost half region", cells.Bands{Ghost: 4000}, "Ghost"},
		{"interaction over ghost", cells.Bands{Ghost: 100, Interaction: 101}, "Interaction"},
		{"margin over ghost", cells.Bands{HandoffMargin: 225}, "HandoffMargin"},
	}
	for _, c := range cases {
		err := c.b.Validate(g)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: Validate = %v, want config error on %s", c.name, err, c.field)
		}
	}
}

// quadrants gives the default grid four owners: a (west-south), b (east-
// south), c (west-north), d (east-north). Borders run along x = 0, 64 000
// and y = 0, 64 000; the ones at 0 are the seam.
func quadrants(t testing.TB) *cells.Table {
	return tableFrom(t, cells.DefaultGrid(), func(col, row int) string {
		return string(rune('a' + col/8 + 2*(row/8)))
	})
}

func TestForeignOwnersTable(t *testing.T) {
	tab := quadrants(t)
	const band = 224
	cases := []struct {
		name string
		p    torus.Pos
		want []string
	}{
		{"deep inside", torus.Pos{X: 30_000, Y: 30_000}, nil},
		{"inside, on an internal region border", torus.Pos{X: 8000, Y: 8000}, nil},
		{"east border of a", torus.Pos{X: 63_900, Y: 30_000}, []string{"b"}},
		{"west border of b", torus.Pos{X: 64_100, Y: 30_000}, []string{"a"}},
		{"seam, west side of a", torus.Pos{X: 5, Y: 30_000}, []string{"b"}},
		{"seam, east side of b", torus.Pos{X: 127_990, Y: 30_000}, []string{"a"}},
		{"negative coordinate", torus.Pos{X: -10, Y: 30_000}, []string{"a"}},
		{"corner across both seams", torus.Pos{X: 5, Y: 5}, []string{"b", "c", "d"}},
		{"inner corner", torus.Pos{X: 64_010, Y: 63_990}, []string{"a", "c", "d"}},
		{"exactly band away is outside", torus.Pos{X: 64_000 - band, Y: 30_000}, nil},
		{"just inside band", torus.Pos{X: 64_000 - band + 0.001, Y: 30_000}, []string{"b"}},
		{"on the line", torus.Pos{X: 64_000, Y: 30_000}, []string{"a"}},
	}
	for _, c := range cases {
		got := tab.AppendForeignOwners(nil, c.p, band)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: AppendForeignOwners(%+v) = %v, want %v", c.name, c.p, got, c.want)
		}
		if in := tab.InForeignBand(c.p, band); in != (len(c.want) > 0) {
			t.Errorf("%s: InForeignBand = %v", c.name, in)
		}
	}
	// An entity of a standing 20 m inside b's region (within the handoff
	// margin): a keeps it, so b needs a ghost and a must not be asked for one.
	inB := torus.Pos{X: 64_020, Y: 30_000}
	if got := tab.AppendOwnersWithin(nil, inB, band, "a"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("AppendOwnersWithin(actual owner a) = %v, want [b]", got)
	}
	if !tab.OtherOwnerWithin(inB, band, "a") || tab.OtherOwnerWithin(torus.Pos{X: 30_000, Y: 30_000}, band, "a") {
		t.Error("OtherOwnerWithin wrong")
	}
	// dst is extended, not overwritten, and deduplication is per call.
	dst := tab.AppendForeignOwners([]string{"b"}, torus.Pos{X: 5, Y: 5}, band)
	if len(dst) != 4 || dst[0] != "b" {
		t.Fatalf("appended %v", dst)
	}
	for _, b := range []float64{0, -1, math.NaN()} {
		if tab.InForeignBand(torus.Pos{X: 64_000}, b) || len(tab.AppendForeignOwners(nil, torus.Pos{X: 64_000}, b)) != 0 {
			t.Errorf("band %v counted as inside", b)
		}
	}
	nan := torus.Pos{X: math.NaN()}
	if tab.InForeignBand(nan, band) || tab.AppendForeignOwners(nil, nan, band) != nil {
		t.Error("NaN position counted as inside a band")
	}
}

// regionDistance is the brute-force wrap-aware Chebyshev distance from p to
// the square of region r.
func regionDistance(g cells.Grid, p torus.Pos, r cells.RegionID) float64 {
	w := g.World()
	minX, minY, maxX, maxY := g.Bounds(r)
	return max(axisDistance(w.NormaliseX(p.X), minX, maxX, w.Width()), axisDistance(w.NormaliseY(p.Y), minY, maxY, w.Height()))
}

func axisDistance(v, lo, hi, width float64) float64 {
	best := math.Inf(1)
	for k := -1.0; k <= 1; k++ {
		a, b := lo+k*width, hi+k*width
		switch {
		case v < a:
			best = min(best, a-v)
		case v > b:
			best = min(best, v-b)
		default:
			return 0
		}
	}
	return best
}

func naiveForeignOwners(tab *cells.Table, p torus.Pos, band float64) []string {
	g := tab.Grid()
	own := tab.OwnerOf(p)
	var out []string
	for id := range g.Regions() {
		r := cells.RegionID(id)
		if n := tab.Owner(r); n != own && regionDistance(g, p, r) < band && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func naiveOwnersWithin(tab *cells.Table, p torus.Pos, band float64, except string) []string {
	g := tab.Grid()
	var out []string
	for id := range g.Regions() {
		r := cells.RegionID(id)
		if n := tab.Owner(r); n != except && regionDistance(g, p, r) < band && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func naiveHandoff(tab *cells.Table, current string, p torus.Pos, margin float64) (string, bool) {
	g := tab.Grid()
	target := tab.OwnerOf(p)
	if target == current {
		return "", false
	}
	for id := range g.Regions() {
		r := cells.RegionID(id)
		if tab.Owner(r) == current && regionDistance(g, p, r) <= max(margin, 0) {
			return "", false
		}
	}
	return target, true
}

func randomTable(t testing.TB, r *rand.Rand, g cells.Grid, nodes int) *cells.Table {
	owners := make([]string, g.Regions())
	for i := range owners {
		owners[i] = fmt.Sprintf("n%d", r.IntN(nodes))
	}
	return mustTable(t, g, 1, owners)
}

// TestBandsMatchBruteForce checks AppendForeignOwners, InForeignBand and
// HandoffTarget against brute force over every region, on grids from one
// region to the default, for random tables, positions (raw, negative, near
// borders and seams) and widths (including wider than the world).
func TestBandsMatchBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	grids := []cells.GridConfig{
		{},
		{RegionEdge: 128_000},
		{RegionEdge: 64_000},
		{World: torus.Config{Width: 96_000, Height: 32_000}, RegionEdge: 32_000},
		{World: torus.Config{Width: 320, Height: 224}, RegionEdge: 32},
	}
	for _, cfg := range grids {
		g := mustGrid(t, cfg)
		w := g.World()
		e := g.RegionEdge()
		for range 20 {
			tab := randomTable(t, r, g, 1+r.IntN(4))
			for range 300 {
				var p torus.Pos
				if r.IntN(2) == 0 { // near a region corner, often across the seam
					p = torus.Pos{
						X: float64(r.IntN(g.Cols()+1))*e + dyadic(r, -300, 300),
						Y: float64(r.IntN(g.Rows()+1))*e + dyadic(r, -300, 300),
					}
				} else {
					p = torus.Pos{X: dyadic(r, -w.Width(), 2*w.Width()), Y: dyadic(r, -w.Height(), 2*w.Height())}
				}
				band := []float64{dyadic(r, 0, 400), dyadic(r, 0, e), dyadic(r, 0, 2*w.Width()), 224, 32, float64(r.IntN(300))}[r.IntN(6)]
				got := tab.AppendForeignOwners(nil, p, band)
				slices.Sort(got)
				want := naiveForeignOwners(tab, p, band)
				if !slices.Equal(got, want) {
					t.Fatalf("%+v: AppendForeignOwners(%+v, %v) = %v, brute force %v", cfg, p, band, got, want)
				}
				if in := tab.InForeignBand(p, band); in != (len(want) > 0) {
					t.Fatalf("%+v: InForeignBand(%+v, %v) = %v, brute force %v", cfg, p, band, in, want)
				}
				for _, cur := range append(tab.Nodes(), "gone") {
					got := tab.AppendOwnersWithin(nil, p, band, cur)
					slices.Sort(got)
					if want := naiveOwnersWithin(tab, p, band, cur); !slices.Equal(got, want) {
						t.Fatalf("%+v: AppendOwnersWithin(%+v, %v, %s) = %v, brute force %v", cfg, p, band, cur, got, want)
					} else if in := tab.OtherOwnerWithin(p, band, cur); in != (len(want) > 0) {
						t.Fatalf("%+v: OtherOwnerWithin(%+v, %v, %s) = %v, brute force %v", cfg, p, band, cur, in, want)
					}
					gn, gok := tab.HandoffTarget(cur, p, band)
					wn, wok := naiveHandoff(tab, cur, p, band)
					if gn != wn || gok != wok {
						t.Fatalf("%+v: HandoffTarget(%s, %+v, %v) = %q %v, brute force %q %v", cfg, cur, p, band, gn, gok, wn, wok)
					}
				}
			}
		}
	}
}

// TestBandShareMatchesPredicate measures the share of a region that
// InForeignBand reports, when every region has its own owner, on a lattice
// of points, and compares it with the formula.
func TestBandShareMatchesPredicate(t *testing.T) {
	g := cells.DefaultGrid()
	owners := make([]string, g.Regions())
	for i := range owners {
		owners[i] = fmt.Sprintf("r%d", i)
	}
	tab := mustTable(t, g, 1, owners)
	const steps = 400 // 20 m lattice over an 8 km region
	for _, band := range []float64{32, 224, 1000} {
		for _, region := range []cells.RegionID{0, 17, 255} { // corner ones touch the seam
			minX, minY, _, _ := g.Bounds(region)
			in := 0
			for i := range steps {
				for j := range steps {
					p := torus.Pos{X: minX + (float64(i)+0.5)*8000/steps, Y: minY + (float64(j)+0.5)*8000/steps}
					if tab.InForeignBand(p, band) {
						in++
					}
				}
			}
			got := float64(in) / steps / steps
			if want := cells.BandShare(8000, band); math.Abs(got-want) > 0.005 {
				t.Errorf("band %v region %d: measured share %.4f, formula %.4f", band, region, got, want)
			}
		}
	}
}

// walker applies HandoffTarget once per tick, as the zone engine will,
// and records where each handoff happened.
type walker struct {
	tab      *cells.Table
	owner    string
	margin   float64
	handoffs []torus.Pos
}

func (w *walker) step(p torus.Pos) {
	if next, ok := w.tab.HandoffTarget(w.owner, p, w.margin); ok {
		w.owner = next
		w.handoffs = append(w.handoffs, p)
	}
}

func TestHandoffHysteresis(t *testing.T) {
	tab := quadrants(t)
	const margin = 32
	for _, line := range []float64{64_000, 0, 128_000} { // an inner border and the seam, both spellings
		w := &walker{tab: tab, owner: tab.OwnerOf(torus.Pos{X: line - 100, Y: 30_000}), margin: margin}
		west := w.owner
		east := tab.OwnerOf(torus.Pos{X: line + 100, Y: 30_000})
		// Pace across the line, up to 31 m either side, for 20 000 ticks.
		for i := range 20_000 {
			w.step(torus.Pos{X: line + 31*math.Sin(float64(i)/7), Y: 30_000})
		}
		if len(w.handoffs) != 0 || w.owner != west {
			t.Fatalf("line %v: pacing on the line handed over %d times", line, len(w.handoffs))
		}
		// Walk one chunk (and a bit) past the line: exactly one handoff.
		for x := line - 31.0; x <= line+40; x += 0.25 {
			w.step(torus.Pos{X: x, Y: 30_000})
		}
		if len(w.handoffs) != 1 || w.owner != east || w.handoffs[0].X <= line+margin {
			t.Fatalf("line %v: crossing gave %v, owner %s", line, w.handoffs, w.owner)
		}
		// Pacing back over the line keeps the new owner...
		for i := range 20_000 {
			w.step(torus.Pos{X: line + 31*math.Sin(float64(i)/7), Y: 30_000})
		}
		if len(w.handoffs) != 1 {
			t.Fatalf("line %v: pacing after the handoff handed back", line)
		}
		// ...until it stands one chunk past the line on the other side.
		w.step(torus.Pos{X: line - margin, Y: 30_000})
		if len(w.handoffs) != 1 {
			t.Fatalf("line %v: handed back at exactly the margin", line)
		}
		w.step(torus.Pos{X: line - margin - 0.001, Y: 30_000})
		if len(w.handoffs) != 2 || w.owner != west {
			t.Fatalf("line %v: did not hand back past the margin", line)
		}
	}
}

// TestHandoffRandomWalk walks an entity at running speed around a corner
// of four owners for a long time and checks the promises of the predicate:
// an entity is never owned by a node whose territory is more than the
// margin away, and an entity handed from X to Y is handed back to X only
// after moving more than the margin (at a corner the two handoff points can
// be that close; on a straight border they are two margins apart, see
// TestHandoffHysteresis).
func TestHandoffRandomWalk(t *testing.T) {
	tab := quadrants(t)
	g := tab.Grid()
	world := g.World()
	const margin = 32
	r := rand.New(rand.NewPCG(12, 34))
	p := torus.Pos{X: 64_000, Y: 64_000}
	owner := tab.OwnerOf(p)
	type handoff struct {
		from, to string
		at       torus.Pos
	}
	var hs []handoff
	territory := map[string][]cells.RegionID{}
	for _, n := range tab.Nodes() {
		// Only the regions near the corner matter to the distance.
		for _, reg := range tab.RegionsOf(n) {
			if regionDistance(g, p, reg) < 1000 {
				territory[n] = append(territory[n], reg)
			}
		}
	}
	heading := 0.0
	for range 200_000 {
		// 0.3 m per 50 ms tick on a wandering heading, kept within 100 m of
		// the corner.
		heading += r.NormFloat64() * 0.2
		a := heading
		p.X = min(max(p.X+0.3*math.Cos(a), 63_900), 64_100)
		p.Y = min(max(p.Y+0.3*math.Sin(a), 63_900), 64_100)
		if next, ok := tab.HandoffTarget(owner, p, margin); ok {
			hs = append(hs, handoff{from: owner, to: next, at: p})
			owner = next
		}
		dist := math.Inf(1)
		for _, reg := range territory[owner] {
			dist = min(dist, regionDistance(g, p, reg))
		}
		if dist > margin {
			t.Fatalf("owner %s is %v m from the entity at %+v", owner, dist, p)
		}
	}
	if len(hs) < 10 {
		t.Fatalf("a long walk around a corner handed over only %d times", len(hs))
	}
	for i := 1; i < len(hs); i++ {
		a, b := hs[i-1], hs[i]
		if b.to != a.from {
			continue
		}
		if d := max(math.Abs(world.DeltaX(a.at.X, b.at.X)), math.Abs(world.DeltaY(a.at.Y, b.at.Y))); d <= margin {
			t.Fatalf("handed %s→%s and back only %v m apart: %+v %+v", a.from, a.to, d, a.at, b.at)
		}
	}
	t.Logf("%d handoffs in 200 000 ticks around a four-owner corner", len(hs))
}

func TestHandoffTargetEdgeCases(t *testing.T) {
	tab := quadrants(t)
	p := torus.Pos{X: 100_000, Y: 30_000} // deep in b
	if n, ok := tab.HandoffTarget("b", p, 32); ok || n != "" {
		t.Errorf("owner asked to hand to itself: %q %v", n, ok)
	}
	if n, ok := tab.HandoffTarget("a", p, 32); !ok || n != "b" {
		t.Errorf("deep inside b, owned by a: %q %v", n, ok)
	}
	// A node that owns nothing (its regions moved in a new table) hands
	// over at once, even on a border.
	if n, ok := tab.HandoffTarget("retired", torus.Pos{X: 64_000, Y: 30_000}, 32); !ok || n != "b" {
		t.Errorf("retired owner: %q %v", n, ok)
	}
	// Diagonal: within the margin of a's corner on both axes keeps a.
	if _, ok := tab.HandoffTarget("a", torus.Pos{X: 64_020, Y: 64_020}, 32); ok {
		t.Error("handed over within the margin of the corner")
	}
	if n, ok := tab.HandoffTarget("a", torus.Pos{X: 64_040, Y: 64_010}, 32); !ok || n != "d" {
		t.Errorf("past the margin at the corner: %q %v", n, ok)
	}
	// Negative and NaN margins count as zero; NaN positions never move.
	if n, ok := tab.HandoffTarget("a", torus.Pos{X: 64_000.5, Y: 30_000}, -5); !ok || n != "b" {
		t.Errorf("negative margin: %q %v", n, ok)
	}
	if n, ok := tab.HandoffTarget("a", torus.Pos{X: 64_000.5, Y: 30_000}, math.NaN()); !ok || n != "b" {
		t.Errorf("NaN margin: %q %v", n, ok)
	}
	if _, ok := tab.HandoffTarget("zz", torus.Pos{X: math.NaN(), Y: 1}, 32); ok {
		t.Error("NaN position handed over")
	}
}

// TestTranslatedTable checks the seam property for the partition: shifting
// both the table and the positions by whole regions (so that the seam moves
// into the middle of the scene, or anywhere else) changes no answer.
func TestTranslatedTable(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 21))
	g := cells.DefaultGrid()
	e := g.RegionEdge()
	for range 30 {
		tab := randomTable(t, r, g, 2+r.IntN(4))
		k, m := r.IntN(g.Cols()), r.IntN(g.Rows())
		if r.IntN(2) == 0 {
			k, m = g.Cols()/2, g.Rows()/2 // the seam lands in the middle
		}
		shifted := make([]string, g.Regions())
		for id := range g.Regions() {
			col, row := g.Coords(cells.RegionID(id))
			shifted[g.RegionAt(col+k, row+m)] = tab.Owner(cells.RegionID(id))
		}
		moved := mustTable(t, g, 1, shifted)
		for range 500 {
			// Near the seam corner in the original scene, raw coordinates.
			p := torus.Pos{X: dyadic(r, -400, 400), Y: dyadic(r, -400, 400)}
			q := torus.Pos{X: p.X + float64(k)*e, Y: p.Y + float64(m)*e}
			if a, b := tab.OwnerOf(p), moved.OwnerOf(q); a != b {
				t.Fatalf("OwnerOf %+v = %s, shifted %+v = %s", p, a, q, b)
			}
			band := dyadic(r, 0, 400)
			a := tab.AppendForeignOwners(nil, p, band)
			b := moved.AppendForeignOwners(nil, q, band)
			slices.Sort(a)
			slices.Sort(b)
			if !slices.Equal(a, b) {
				t.Fatalf("AppendForeignOwners %+v = %v, shifted %v", p, a, b)
			}
			for _, cur := range tab.Nodes() {
				n1, ok1 := tab.HandoffTarget(cur, p, band)
				n2, ok2 := moved.HandoffTarget(cur, q, band)
				if n1 != n2 || ok1 != ok2 {
					t.Fatalf("HandoffTarget(%s) %+v = %s %v, shifted %s %v", cur, p, n1, ok1, n2, ok2)
				}
			}
		}
	}
}
