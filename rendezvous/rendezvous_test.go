package rendezvous

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"

	"github.com/shardwise/shardwise/errcode"
)

// bruteScore is the deliberately plain definition: build the whole string,
// convert it to UTF-16 with the standard library, hash every unit.
func bruteScore(node, key string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, u := range utf16.Encode([]rune(node + "\n" + key)) {
		h ^= uint64(u)
		h *= 0x100000001b3
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// bruteRank orders all nodes by score, best first, earlier node on ties.
func bruteRank(nodes []string, weights []float64, key string) []string {
	type scored struct {
		i int
		s float64
		r uint64
	}
	all := []scored{}
	for i, n := range nodes {
		r := bruteScore(n, key)
		s := 0.0
		if weights != nil {
			u := (float64(r>>11) + 0.5) / math.Exp2(53)
			s = -weights[i] / math.Log(u)
		}
		all = append(all, scored{i, s, r})
	}
	better := func(a, b scored) bool {
		if weights != nil {
			return a.s > b.s
		}
		return a.r > b.r
	}
	// Selection sort: obviously correct, stable on ties.
	out := []string{}
	for len(all) > 0 {
		best := 0
		for k := 1; k < len(all); k++ {
			if better(all[k], all[best]) {
				best = k
			}
		}
		out = append(out, nodes[all[best].i])
		all = slices.Delete(all, best, best+1)
	}
	return out
}

// Reference values that economy-lab's scopeRouter produces for the same
// nodes and keys.
func TestReferenceValues(t *testing.T) {
	if got := Score("node-a", "wrld_0"); got != 0xfa15f69bf9594361 {
		t.Fatalf("Score(node-a, wrld_0) = %#x, want 0xfa15f69bf9594361", got)
	}
	if got := bruteScore("node-a", "wrld_0"); got != 0xfa15f69bf9594361 {
		t.Fatalf("brute-force score = %#x", got)
	}
	tbl, err := New([]string{"node-a", "node-b"})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"wrld_own_0": "node-a", "wrld_ds_0": "node-b", "wrld_ds_2": "node-a"} {
		if got := tbl.Owner(key); got != want {
			t.Errorf("Owner(%s) = %s, want %s", key, got, want)
		}
	}
}

// UTF-16 units, not bytes: a non-ASCII key hashes each unit whole, and an
// astral character is two surrogate units.
func TestUTF16Units(t *testing.T) {
	cases := []struct {
		text  string
		units []uint16
	}{
		{"a", []uint16{'a'}},
		{"é", []uint16{0xe9}},
		{"€", []uint16{0x20ac}},
		{"😀", []uint16{0xd83d, 0xde00}},
		{"a\xffb", []uint16{'a', 0xfffd, 'b'}}, // invalid UTF-8 byte → U+FFFD
	}
	for _, c := range cases {
		h := uint64(fnvOffset)
		for _, u := range c.units {
			h = (h ^ uint64(u)) * fnvPrime
		}
		if got := fnvString(fnvOffset, c.text); got != h {
			t.Errorf("fnvString(%q) = %#x, want %#x over units %x", c.text, got, h, c.units)
		}
	}
	// The XOR is of the whole unit: hashing the UTF-8 bytes would differ.
	if Score("n", "é") == Score("n", "\u00c3\u00a9") {
		t.Error("é scored like its UTF-8 bytes")
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name  string
		nodes []string
		field string
	}{
		{"nil", nil, "nodes"},
		{"empty", []string{}, "nodes"},
		{"duplicate", []string{"a", "b", "a"}, "nodes[2]"},
	}
	for _, c := range cases {
		_, err := New(c.nodes)
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || errcode.Of(err) != "CONFIG.INVALID" {
			t.Errorf("%s: New = %v, want CONFIG.INVALID on %s", c.name, err, c.field)
		}
	}
	for _, w := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		_, err := NewWeighted([]Weighted{{"a", 1}, {"b", w}})
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != "nodes[1].Weight" {
			t.Errorf("weight %v: %v", w, err)
		}
	}
	if _, err := NewWeighted([]Weighted{{"a", 1}, {"a", 2}}); !errors.Is(err, errcode.ErrConfigInvalid) {
		t.Errorf("weighted duplicate: %v", err)
	}
	if _, err := NewWeighted(nil); !errors.Is(err, errcode.ErrConfigInvalid) {
		t.Errorf("weighted empty: %v", err)
	}
}

func TestZeroTable(t *testing.T) {
	var tbl Table
	if tbl.Owner("k") != "" || len(tbl.TopN("k", 3)) != 0 || tbl.Len() != 0 {
		t.Fatal("zero Table placed a key")
	}
}

func TestNodesIsACopy(t *testing.T) {
	in := []string{"a", "b"}
	tbl, _ := New(in)
	in[0] = "z"
	out := tbl.Nodes()
	out[1] = "y"
	if !slices.Equal(tbl.Nodes(), []string{"a", "b"}) {
		t.Fatalf("Nodes = %v", tbl.Nodes())
	}
}

// randomName mixes ASCII, two-byte, three-byte and astral characters.
func randomName(rng *rand.Rand, maxLen int) string {
	alphabet := []string{"a", "b", "z", "0", "_", ":", "-", "é", "ß", "€", "中", "😀", "𝄞", "\n"}
	var b strings.Builder
	for range rng.IntN(maxLen + 1) {
		b.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

func randomNodes(rng *rand.Rand) []string {
	n := 1 + rng.IntN(14)
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		var name string
		if rng.IntN(2) == 0 {
			name = "econ-" + strconv.Itoa(rng.IntN(40))
		} else {
			name = randomName(rng, 6)
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

// Owner and TopN against a brute-force max over many random node lists and
// keys, ASCII and not, long enough to pass the stack buffer.
func TestAgainstBruteForce(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		nodes := randomNodes(rng)
		tbl, err := New(nodes)
		if err != nil {
			t.Fatal(err)
		}
		for range 40 {
			var key string
			switch rng.IntN(4) {
			case 0:
				key = "wrld_" + strconv.Itoa(rng.IntN(1e6))
			case 1:
				key = randomName(rng, 12)
			case 2:
				key = randomName(rng, 200) // over 128 units
			default:
				key = strings.Repeat("x", rng.IntN(300))
			}
			want := bruteRank(nodes, nil, key)
			if got := tbl.Owner(key); got != want[0] {
				t.Fatalf("seed %d: Owner(%q) over %q = %q, want %q", seed, key, nodes, got, want[0])
			}
			n := rng.IntN(len(nodes) + 3)
			if got := tbl.TopN(key, n); !slices.Equal(got, want[:min(max(n, 0), len(nodes))]) {
				t.Fatalf("seed %d: TopN(%q, %d) = %q, want %q", seed, key, n, got, want)
			}
			node := nodes[rng.IntN(len(nodes))]
			if got := Score(node, key); got != bruteScore(node, key) {
				t.Fatalf("Score(%q, %q) = %#x, want %#x", node, key, got, bruteScore(node, key))
			}
		}
	}
}

func TestWeightedAgainstBruteForce(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 11))
		nodes := randomNodes(rng)
		weights := make([]float64, len(nodes))
		ws := make([]Weighted, len(nodes))
		for i := range nodes {
			weights[i] = 0.1 + rng.Float64()*10
			ws[i] = Weighted{nodes[i], weights[i]}
		}
		if len(nodes) == 1 {
			weights = nil // one weight is "all equal": the unweighted path
		}
		tbl, err := NewWeighted(ws)
		if err != nil {
			t.Fatal(err)
		}
		for range 30 {
			key := randomName(rng, 20)
			want := bruteRank(nodes, weights, key)
			if got := tbl.Owner(key); got != want[0] {
				t.Fatalf("seed %d: Owner(%q) = %q, want %q", seed, key, got, want[0])
			}
			n := 1 + rng.IntN(len(nodes))
			if got := tbl.TopN(key, n); !slices.Equal(got, want[:n]) {
				t.Fatalf("seed %d: TopN(%q, %d) = %q, want %q", seed, key, n, got, want[:n])
			}
		}
	}
}

func TestEqualWeightsPlaceLikeNew(t *testing.T) {
	nodes := []string{"econ-1", "econ-2", "econ-3", "econ-4", "econ-5"}
	plain, _ := New(nodes)
	var ws []Weighted
	for _, n := range nodes {
		ws = append(ws, Weighted{n, 3.5})
	}
	weighted, _ := NewWeighted(ws)
	for i := range 2000 {
		k := "scope:" + strconv.Itoa(i)
		if a, b := plain.Owner(k), weighted.Owner(k); a != b {
			t.Fatalf("Owner(%s): New %s, equal weights %s", k, a, b)
		}
	}
	if w, ok := weighted.Weight("econ-2"); !ok || w != 3.5 {
		t.Fatalf("Weight = %v, %v", w, ok)
	}
}

// Shares follow weights: 1:2:5 over 80,000 keys, each within 3% of the
// expected share.
func TestWeightedShares(t *testing.T) {
	tbl, _ := NewWeighted([]Weighted{{"s", 1}, {"m", 2}, {"l", 5}})
	counts := map[string]int{}
	const keys = 80000
	for i := range keys {
		counts[tbl.Owner("k"+strconv.Itoa(i))]++
	}
	for node, share := range map[string]float64{"s": 1.0 / 8, "m": 2.0 / 8, "l": 5.0 / 8} {
		got := float64(counts[node]) / keys
		if math.Abs(got-share) > 0.03 {
			t.Errorf("%s: share %.3f, want %.3f", node, got, share)
		}
	}
	if w, ok := tbl.Weight("l"); !ok || w != 5 {
		t.Fatalf("Weight(l) = %v %v", w, ok)
	}
	if _, ok := tbl.Weight("nope"); ok {
		t.Fatal("Weight of an absent node")
	}
}

// Removing a node moves only its keys; the others stay sticky, and each
// moved key goes to its former runner-up.
func TestMinimalDisruption(t *testing.T) {
	nodes := []string{"econ-1", "econ-2", "econ-3", "econ-4", "econ-5", "econ-6"}
	all, _ := New(nodes)
	fewer, _ := New(slices.Delete(slices.Clone(nodes), 2, 3)) // without econ-3
	moved := 0
	for i := range 5000 {
		k := "scope:" + strconv.Itoa(i)
		top := all.TopN(k, 2)
		now := fewer.Owner(k)
		switch {
		case top[0] != "econ-3" && now != top[0]:
			t.Fatalf("%s moved from %s to %s though its owner stayed", k, top[0], now)
		case top[0] == "econ-3":
			moved++
			if now != top[1] {
				t.Fatalf("%s went to %s, runner-up was %s", k, now, top[1])
			}
		}
	}
	if moved < 5000/6/2 || moved > 5000/6*2 {
		t.Fatalf("%d keys moved, expected about %d", moved, 5000/6)
	}
}

func TestConcurrentUse(t *testing.T) {
	tbl, _ := New([]string{"a", "b", "c", "d", "e"})
	want := map[string]string{}
	for i := range 500 {
		k := "k" + strconv.Itoa(i)
		want[k] = tbl.Owner(k)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for range 4 {
		wg.Go(func() {
			for k, w := range want {
				if got := tbl.Owner(k); got != w {
					errs <- fmt.Sprintf("Owner(%s) = %s, want %s", k, got, w)
					return
				}
				_ = tbl.TopN(k, 3)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestOwnerDoesNotAllocate(t *testing.T) {
	nodes := make([]string, 100)
	for i := range nodes {
		nodes[i] = "econ-" + strconv.Itoa(i)
	}
	tbl, _ := New(nodes)
	ws := make([]Weighted, len(nodes))
	for i, n := range nodes {
		ws[i] = Weighted{n, float64(1 + i%3)}
	}
	wtbl, _ := NewWeighted(ws)
	for _, key := range []string{"wrld_own_0", "région-été-😀", strings.Repeat("é", 128)} {
		if a := testing.AllocsPerRun(100, func() { _ = tbl.Owner(key) }); a != 0 {
			t.Errorf("Owner(%q): %v allocs", key, a)
		}
		if a := testing.AllocsPerRun(100, func() { _ = wtbl.Owner(key) }); a != 0 {
			t.Errorf("weighted Owner(%q): %v allocs", key, a)
		}
	}
}
