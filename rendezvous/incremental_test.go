package rendezvous

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testseed"
)

// Random sequences of With and Without leave a table that places every key
// (owner and top-N) exactly like NewWeighted of the final node list, with
// weights that are sometimes all equal and sometimes not.
func TestWithWithoutEqualsRebuild(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	keys := make([]string, 300)
	for i := range keys {
		keys[i] = "scope:" + strconv.Itoa(rng.IntN(1<<30))
	}
	for round := range 40 {
		tbl := &Table{}
		var live []Weighted
		for step := range 60 {
			if len(live) > 0 && rng.IntN(3) == 0 {
				k := rng.IntN(len(live))
				tbl = tbl.Without(live[k].Node)
				live = slices.Delete(live, k, k+1)
			} else {
				w := 2.0
				if round%2 == 1 && rng.IntN(4) == 0 {
					w = float64(1 + rng.IntN(5))
				}
				n := Weighted{Node: "n" + strconv.Itoa(step), Weight: w}
				next, err := tbl.With(n.Node, n.Weight)
				if err != nil {
					t.Fatalf("round %d step %d: With(%v): %v", round, step, n, err)
				}
				tbl = next
				live = append(live, n)
			}
			if len(live) == 0 {
				if tbl.Len() != 0 || tbl.Owner("k") != "" {
					t.Fatalf("round %d step %d: empty table still places", round, step)
				}
				continue
			}
			want, err := NewWeighted(live)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tbl.nodes, want.nodes) || (tbl.weights == nil) != (want.weights == nil) || !slices.Equal(tbl.weights, want.weights) {
				t.Fatalf("round %d step %d: table %v/%v, rebuild %v/%v", round, step, tbl.nodes, tbl.weights, want.nodes, want.weights)
			}
			for _, k := range keys[:30] {
				if a, b := tbl.Owner(k), want.Owner(k); a != b {
					t.Fatalf("round %d step %d: Owner(%s) = %s, rebuild %s", round, step, k, a, b)
				}
				if a, b := tbl.TopN(k, 3), want.TopN(k, 3); !slices.Equal(a, b) {
					t.Fatalf("round %d step %d: TopN(%s) = %v, rebuild %v", round, step, k, a, b)
				}
			}
			for _, n := range live {
				if w, ok := tbl.Weight(n.Node); !ok || w != n.Weight {
					t.Fatalf("Weight(%s) = %v %v, want %v", n.Node, w, ok, n.Weight)
				}
			}
		}
	}
}

func TestWithLeavesOriginalAlone(t *testing.T) {
	a, _ := New([]string{"a", "b"})
	b, err := a.With("c", 1)
	if err != nil {
		t.Fatal(err)
	}
	c := b.Without("a")
	if !slices.Equal(a.Nodes(), []string{"a", "b"}) || !slices.Equal(b.Nodes(), []string{"a", "b", "c"}) || !slices.Equal(c.Nodes(), []string{"b", "c"}) {
		t.Fatalf("tables share state: %v %v %v", a.Nodes(), b.Nodes(), c.Nodes())
	}
	if a.Without("absent") != a {
		t.Fatal("Without(absent) made a new table")
	}
}

func TestWithValidation(t *testing.T) {
	a, _ := New([]string{"a"})
	for _, c := range []struct {
		node string
		w    float64
	}{{"a", 1}, {"b", 0}, {"b", -1}, {"b", math.Inf(1)}, {"b", math.NaN()}} {
		if _, err := a.With(c.node, c.w); !errors.Is(err, errcode.ErrConfigInvalid) {
			t.Errorf("With(%q, %v) = %v, want CONFIG.INVALID", c.node, c.w, err)
		}
	}
}
