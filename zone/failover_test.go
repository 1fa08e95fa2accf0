package zone

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/rendezvous"
)

func TestStandbyMatchesBruteForceRendezvous(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, seed))
	for range 500 {
		n := 1 + rng.IntN(8)
		var live []string
		for i := range n {
			live = append(live, fmt.Sprintf("zone-%d", i))
		}
		owner := live[rng.IntN(n)]
		r := cells.RegionID(rng.IntN(256))
		got := Standby(r, owner, live)
		// The naive form: a rendezvous table over the others, sorted.
		others := slices.DeleteFunc(slices.Clone(live), func(s string) bool { return s == owner })
		want := ""
		if len(others) > 0 {
			tb, err := rendezvous.New(others)
			if err != nil {
				t.Fatal(err)
			}
			want = tb.Owner(standbyKey(r))
		}
		if got != want {
			t.Fatalf("Standby(%d, %q, %v) = %q, brute force %q", r, owner, live, got, want)
		}
		// The order the members are listed in does not matter.
		rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
		if again := Standby(r, owner, live); again != got {
			t.Fatalf("Standby depends on the order of live: %q then %q", got, again)
		}
	}
}

func TestStandbyIsNeverTheOwnerNorADeadNode(t *testing.T) {
	live := []string{"zone-1", "zone-2", "zone-3"}
	for r := range cells.RegionID(256) {
		for _, owner := range append(live, "zone-dead") {
			s := Standby(r, owner, live)
			if s == owner || !slices.Contains(live, s) {
				t.Fatalf("Standby(%d, %q, %v) = %q", r, owner, live, s)
			}
		}
	}
	if s := Standby(0, "zone-1", []string{"zone-1"}); s != "" {
		t.Fatalf("Standby with only the owner live = %q, want none", s)
	}
}

// A dead node's regions spread over every survivor, and a node leaving
// moves only the standbys it was.
func TestStandbySpreadsAndIsStable(t *testing.T) {
	grid := cells.DefaultGrid()
	tb, err := cells.Uniform(grid, 1, []string{"zone-1", "zone-2", "zone-3", "zone-4"})
	if err != nil {
		t.Fatal(err)
	}
	live := []string{"zone-2", "zone-3", "zone-4"}
	got := map[string]int{}
	dead := tb.RegionsOf("zone-1")
	for _, r := range dead {
		got[Standby(r, "zone-1", live)]++
	}
	for _, n := range live {
		// rendezvous over 3 nodes: a third each, give or take.
		if got[n] < len(dead)/6 {
			t.Fatalf("survivor %s takes %d of %d regions: %v", n, got[n], len(dead), got)
		}
	}
	for r := range cells.RegionID(grid.Regions()) {
		owner := tb.Owner(r)
		all := []string{"zone-1", "zone-2", "zone-3", "zone-4", "zone-5"}
		before := Standby(r, owner, all)
		after := Standby(r, owner, slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == "zone-5" }))
		if before != "zone-5" && before != after {
			t.Fatalf("region %d: zone-5 leaving moved the standby from %s to %s", r, before, after)
		}
	}
}

func TestPlanFailover(t *testing.T) {
	tb := uniform(t, 4, "zone-1", "zone-2", "zone-3")
	live := []string{"zone-1", "zone-3"}
	next, moved, err := PlanFailover(tb, live, []string{"zone-2"})
	if err != nil {
		t.Fatal(err)
	}
	if next.Version() != 5 {
		t.Fatalf("version %d, want 5", next.Version())
	}
	if !slices.Equal(moved["zone-2"], tb.RegionsOf("zone-2")) || len(moved) != 1 {
		t.Fatalf("moved = %v", moved)
	}
	for r := range cells.RegionID(tb.Grid().Regions()) {
		want := tb.Owner(r)
		if want == "zone-2" {
			want = Standby(r, "zone-2", live)
		}
		if next.Owner(r) != want {
			t.Fatalf("region %d: %s, want %s", r, next.Owner(r), want)
		}
	}
	// Nothing to do: the node owns nothing, or it is live again.
	for _, gone := range [][]string{{"zone-9"}, {"zone-1"}, nil} {
		if next, moved, err := PlanFailover(tb, live, gone); next != nil || moved != nil || err != nil {
			t.Fatalf("PlanFailover(gone %v) = %v, %v, %v; want nothing", gone, next, moved, err)
		}
	}
	// The only node left takes everything.
	next, _, err = PlanFailover(tb, []string{"zone-3"}, []string{"zone-1", "zone-2"})
	if err != nil || !slices.Equal(next.Nodes(), []string{"zone-3"}) {
		t.Fatalf("only zone-3 left: nodes %v, %v", next.Nodes(), err)
	}
	_, _, err = PlanFailover(tb, nil, []string{"zone-1"})
	wantCode(t, err, CodeNoStandby)
}

func uniform(t *testing.T, version uint64, names ...string) *cells.Table {
	t.Helper()
	tb, err := cells.Uniform(cells.DefaultGrid(), version, names)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := errcode.Of(err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
}
