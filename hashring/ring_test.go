package hashring

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testseed"
)

// tableHash returns a hash whose values for the listed labels are chosen by
// hand, so a test can work out placement on paper. Other strings hash with
// FNV into the range above 1000 to stay clear of the hand-placed points.
func tableHash(m map[string]uint32) HashFunc {
	return func(s string) uint32 {
		if v, ok := m[s]; ok {
			return v
		}
		h := fnv.New32a()
		h.Write([]byte(s))
		return 1000 + h.Sum32()%1000000
	}
}

// tinyHash has only `size` distinct values, to force collisions.
func tinyHash(size uint32) HashFunc {
	return func(s string) uint32 { return SHA1(s) % size }
}

func TestPlacementByHand(t *testing.T) {
	hash := tableHash(map[string]uint32{
		"a-0": 100, "a-1": 300,
		"b-0": 200, "b-1": 100, // collides with a-0, so it is salted
		"b-1#1": 300, // collides again, with a-1
		"b-1#2": 400,
		"k50":   50, "k100": 100, "k150": 150, "k200": 200, "k399": 399,
		"k400": 400, "k500": 500, "k0": 0,
	})
	r := New(hash)
	mustAdd(t, r, "a", 2)
	mustAdd(t, r, "b", 2)
	if got := r.Points(); got != 4 {
		t.Fatalf("points = %d, want 4", got)
	}
	cases := []struct {
		key   string
		want  string
		wantN []string
	}{
		{"k0", "a", []string{"a", "b"}},   // first point > 0 is 100 (a)
		{"k50", "a", []string{"a", "b"}},  // 100 (a)
		{"k100", "b", []string{"b", "a"}}, // exactly on 100: strictly greater is 200 (b)
		{"k150", "b", []string{"b", "a"}}, // 200 (b)
		{"k200", "a", []string{"a", "b"}}, // 300 (a)
		{"k399", "b", []string{"b", "a"}}, // 400 (b, the salted b-1#2)
		{"k400", "a", []string{"a", "b"}}, // past the largest point: wrap to 100 (a)
		{"k500", "a", []string{"a", "b"}}, // wrap
	}
	for _, c := range cases {
		got, ok := r.Get(c.key)
		if !ok || got != c.want {
			t.Errorf("Get(%s) = %q, %v; want %q", c.key, got, ok, c.want)
		}
		if gotN := r.GetN(c.key, 5); !slices.Equal(gotN, c.wantN) {
			t.Errorf("GetN(%s, 5) = %v, want %v", c.key, gotN, c.wantN)
		}
		if gotN := r.GetN(c.key, 1); !slices.Equal(gotN, c.wantN[:1]) {
			t.Errorf("GetN(%s, 1) = %v, want %v", c.key, gotN, c.wantN[:1])
		}
	}
}

func TestSaltingAgainstOwnPoints(t *testing.T) {
	// The second vnode of "s" collides with its own first one.
	hash := tableHash(map[string]uint32{"s-0": 10, "s-1": 10, "s-1#1": 20, "k15": 15})
	r := New(hash)
	mustAdd(t, r, "s", 2)
	if r.Points() != 2 {
		t.Fatalf("points = %d, want 2", r.Points())
	}
	other := New(hash)
	mustAdd(t, other, "t", 1)
	mustAdd(t, r, "t", 1)
	if id, _ := r.Get("k15"); id != "s" {
		t.Fatalf("Get(k15) = %q, want s (the salted point 20)", id)
	}
}

func TestExistingPointsNeverMove(t *testing.T) {
	// b's first label collides with a's point; a keeps it, b is salted, and
	// removing a does not move b's salted point back (as in the TypeScript
	// ring).
	hash := tableHash(map[string]uint32{"a-0": 100, "b-0": 100, "b-0#1": 500, "c-0": 300, "k200": 200, "k50": 50, "k400": 400})
	r := New(hash)
	mustAdd(t, r, "a", 1)
	mustAdd(t, r, "b", 1)
	mustAdd(t, r, "c", 1)
	for key, want := range map[string]string{"k50": "a", "k200": "c", "k400": "b"} {
		if id, _ := r.Get(key); id != want {
			t.Fatalf("Get(%s) = %q, want %s", key, id, want)
		}
	}
	r.Remove("a")
	// b stays on 500: k50 → c (300), k400 → b (500).
	for key, want := range map[string]string{"k50": "c", "k200": "c", "k400": "b"} {
		if id, _ := r.Get(key); id != want {
			t.Fatalf("after Remove(a): Get(%s) = %q, want %s", key, id, want)
		}
	}
}

// Without gives the label salted against the removed node its unsalted
// point back: the ring it returns is the ring a fresh process builds from
// the remaining nodes in order. It leaves the ring it was called on alone,
// and after a Remove that kept a salted point it rebuilds.
func TestWithoutEqualsRebuild(t *testing.T) {
	hash := tableHash(map[string]uint32{"a-0": 100, "b-0": 100, "b-0#1": 500, "c-0": 300, "k50": 50, "k200": 200, "k400": 400})
	r := New(hash)
	mustAdd(t, r, "a", 1)
	mustAdd(t, r, "b", 1)
	mustAdd(t, r, "c", 1)
	w := r.Without("a")
	fresh := New(hash)
	mustAdd(t, fresh, "b", 1)
	mustAdd(t, fresh, "c", 1)
	// b is back on 100: k50 → b, k200 → c, k400 → b (wraps to 100).
	for key, want := range map[string]string{"k50": "b", "k200": "c", "k400": "b"} {
		if id, _ := w.Get(key); id != want {
			t.Errorf("Without(a): Get(%s) = %q, want %s", key, id, want)
		}
		if id, _ := fresh.Get(key); id != want {
			t.Errorf("fresh ring: Get(%s) = %q, want %s", key, id, want)
		}
	}
	if id, _ := r.Get("k50"); id != "a" || r.Len() != 3 {
		t.Fatalf("Without changed the ring it was called on: Get(k50) = %q, %d nodes", id, r.Len())
	}
	// Removing a node nobody salted against changes nothing else.
	if id, _ := w.Without("c").Get("k200"); id != "b" {
		t.Errorf("Without(a, c): Get(k200) = %q, want b", id)
	}
	// A Remove that kept b salted, then Without of an unrelated node:
	// the result is the fresh ring of b and c all the same.
	r.Remove("a")
	mustAdd(t, r, "d", 1)
	if id, _ := r.Without("d").Get("k50"); id != "b" {
		t.Errorf("Remove(a), Add(d), Without(d): Get(k50) = %q, want b (a rebuild)", id)
	}
}

func TestAddValidation(t *testing.T) {
	r := New(nil)
	for _, v := range []int{0, -1, MaxVNodes + 1} {
		err := r.Add("n", v)
		if !errors.Is(err, errcode.ErrConfigInvalid) || errcode.Of(err) != errcode.ConfigInvalid {
			t.Errorf("Add(n, %d) = %v, want CONFIG.INVALID", v, err)
		}
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != "vnodes" || ce.Value != v {
			t.Errorf("Add(n, %d): config error %+v does not name vnodes=%d", v, ce, v)
		}
	}
	if r.Len() != 0 || r.Points() != 0 {
		t.Fatal("a refused Add changed the ring")
	}
	mustAdd(t, r, "n", 3)
	// Present id: no change, weight kept.
	if err := r.Add("n", 50); err != nil {
		t.Fatalf("re-Add: %v", err)
	}
	if v, ok := r.VNodes("n"); !ok || v != 3 || r.Points() != 3 {
		t.Fatalf("re-Add changed the node: vnodes %d points %d", v, r.Points())
	}
	// An invalid count is refused even for a present id.
	if err := r.Add("n", 0); !errors.Is(err, errcode.ErrConfigInvalid) {
		t.Fatalf("Add(present, 0) = %v", err)
	}
}

func TestNoFreePoint(t *testing.T) {
	r := New(tinyHash(8))
	mustAdd(t, r, "a", 5)
	err := r.Add("b", 4) // only 3 points left
	if !errors.Is(err, ErrNoFreePoint) || errcode.Of(err) != "HASHRING.NO_FREE_POINT" {
		t.Fatalf("Add = %v, want ErrNoFreePoint", err)
	}
	if r.Has("b") || r.Points() != 5 || r.Len() != 1 {
		t.Fatalf("failed Add changed the ring: has b %v, points %d", r.Has("b"), r.Points())
	}
	mustAdd(t, r, "b", 3) // exactly fills the range
	if r.Points() != 8 {
		t.Fatalf("points = %d, want 8", r.Points())
	}
}

func TestEmptyAndZeroValue(t *testing.T) {
	for name, r := range map[string]*Ring{"New(nil)": New(nil), "zero": new(Ring)} {
		if id, ok := r.Get("k"); ok || id != "" {
			t.Errorf("%s: Get on empty = %q, %v", name, id, ok)
		}
		if got := r.GetN("k", 3); got == nil || len(got) != 0 {
			t.Errorf("%s: GetN on empty = %#v, want empty non-nil", name, got)
		}
		if got := r.IDs(); got == nil || len(got) != 0 {
			t.Errorf("%s: IDs on empty = %#v", name, got)
		}
		if r.Len() != 0 || r.Has("k") {
			t.Errorf("%s: Len/Has on empty", name)
		}
		r.Remove("absent")
		if _, ok := r.GetWhere("k", func(string) bool { return true }); ok {
			t.Errorf("%s: GetWhere on empty found a node", name)
		}
		mustAdd(t, r, "10.0.0.1:6379", 10)
		// The zero value hashes with SHA1, like New(nil).
		want := New(SHA1)
		mustAdd(t, want, "10.0.0.1:6379", 10)
		mustAdd(t, r, "10.0.0.2:6379", 10)
		mustAdd(t, want, "10.0.0.2:6379", 10)
		for i := range 100 {
			k := "key:" + strconv.Itoa(i)
			a, _ := r.Get(k)
			b, _ := want.Get(k)
			if a != b {
				t.Fatalf("%s: Get(%s) = %s, SHA1 ring says %s", name, k, a, b)
			}
		}
	}
}

func TestIDsInsertionOrderAndRemove(t *testing.T) {
	r := New(nil)
	for _, id := range []string{"c", "a", "b", "d"} {
		mustAdd(t, r, id, 5)
	}
	r.Remove("a")
	mustAdd(t, r, "a", 7)
	r.Remove("nope")
	if got, want := r.IDs(), []string{"c", "b", "d", "a"}; !slices.Equal(got, want) {
		t.Fatalf("IDs = %v, want %v", got, want)
	}
	ids := r.IDs()
	ids[0] = "mutated"
	if r.IDs()[0] != "c" {
		t.Fatal("IDs returned the ring's own slice")
	}
	if r.Len() != 4 || r.Points() != 5+5+5+7 {
		t.Fatalf("Len %d Points %d", r.Len(), r.Points())
	}
	if v, ok := r.VNodes("a"); !ok || v != 7 {
		t.Fatalf("VNodes(a) = %d, %v", v, ok)
	}
	if _, ok := r.VNodes("nope"); ok {
		t.Fatal("VNodes of an absent node")
	}
	for _, id := range []string{"c", "b", "d", "a"} {
		r.Remove(id)
	}
	if r.Len() != 0 || r.Points() != 0 {
		t.Fatal("ring not empty after removing everything")
	}
	if _, ok := r.Get("k"); ok {
		t.Fatal("Get on emptied ring")
	}
}

func TestGetNBounds(t *testing.T) {
	r := New(nil)
	for i := range 20 {
		mustAdd(t, r, fmt.Sprintf("10.0.0.%d:6379", i), 1+i%4)
	}
	for _, n := range []int{-1, 0, 1, 2, 3, 8, 9, 19, 20, 21, 1000} {
		for k := range 50 {
			key := "user:" + strconv.Itoa(k)
			got := r.GetN(key, n)
			want := min(max(n, 0), 20)
			if len(got) != want {
				t.Fatalf("GetN(%s, %d) has %d nodes, want %d", key, n, len(got), want)
			}
			if n > 0 {
				leader, _ := r.Get(key)
				if got[0] != leader {
					t.Fatalf("GetN(%s, %d)[0] = %s, leader %s", key, n, got[0], leader)
				}
			}
			seen := map[string]bool{}
			for _, id := range got {
				if seen[id] || !r.Has(id) {
					t.Fatalf("GetN(%s, %d) = %v: duplicate or unknown node", key, n, got)
				}
				seen[id] = true
			}
		}
	}
}

func TestAppendNReusesBuffer(t *testing.T) {
	r := New(nil)
	for i := range 4 {
		mustAdd(t, r, "n"+strconv.Itoa(i), 10)
	}
	buf := []string{"keep"}
	buf = r.AppendN(buf, "k", 2)
	if len(buf) != 3 || buf[0] != "keep" || !slices.Equal(buf[1:], r.GetN("k", 2)) {
		t.Fatalf("AppendN = %v", buf)
	}
}

func TestGetWhere(t *testing.T) {
	r := New(nil)
	for i := range 6 {
		mustAdd(t, r, "n"+strconv.Itoa(i), 20)
	}
	for k := range 200 {
		key := "k" + strconv.Itoa(k)
		order := r.GetN(key, 6)
		for skip := range 6 {
			banned := map[string]bool{}
			for _, id := range order[:skip] {
				banned[id] = true
			}
			var visited []string
			got, ok := r.GetWhere(key, func(id string) bool {
				visited = append(visited, id)
				return !banned[id]
			})
			if !ok || got != order[skip] {
				t.Fatalf("GetWhere(%s) skipping %d = %q, want %q", key, skip, got, order[skip])
			}
			if !slices.Equal(visited, order[:skip+1]) {
				t.Fatalf("GetWhere visited %v, want %v", visited, order[:skip+1])
			}
		}
		if _, ok := r.GetWhere(key, func(string) bool { return false }); ok {
			t.Fatal("GetWhere accepted nothing but returned ok")
		}
	}
}

// Vnode counts are weights: a node with three times the vnodes gets about
// three times the keys.
func TestWeightsShareKeys(t *testing.T) {
	r := New(nil)
	mustAdd(t, r, "small", 100)
	mustAdd(t, r, "big", 300)
	counts := map[string]int{}
	for i := range 40000 {
		id, _ := r.Get("key:" + strconv.Itoa(i))
		counts[id]++
	}
	share := float64(counts["big"]) / 40000
	if share < 0.70 || share > 0.80 {
		t.Fatalf("big node share %.3f, want about 0.75 (counts %v)", share, counts)
	}
}

// Adding a node moves only keys onto the new node; removing it moves them
// back and nothing else.
func TestMinimalMovement(t *testing.T) {
	for _, hash := range []HashFunc{SHA1, XXHash} {
		r := New(hash)
		for i := range 10 {
			mustAdd(t, r, "n"+strconv.Itoa(i), 100)
		}
		before := map[string]string{}
		for i := range 5000 {
			k := "key:" + strconv.Itoa(i)
			before[k], _ = r.Get(k)
		}
		mustAdd(t, r, "new", 100)
		moved := 0
		for k, was := range before {
			now, _ := r.Get(k)
			if now != was {
				if now != "new" {
					t.Fatalf("key %s moved %s → %s, not to the new node", k, was, now)
				}
				moved++
			}
		}
		if moved == 0 || moved > 5000/11*2 {
			t.Fatalf("%d of 5000 keys moved on adding an 11th node", moved)
		}
		r.Remove("new")
		for k, was := range before {
			if now, _ := r.Get(k); now != was {
				t.Fatalf("key %s on %s after removing the new node, was %s", k, now, was)
			}
		}
	}
}

// The ring against the naive model over many random operation sequences,
// with hashes of full range and ranges small enough to collide often.
func TestAgainstNaiveModel(t *testing.T) {
	cases := []struct {
		name string
		hash HashFunc
		size uint32 // range of the hash, 0 for the full 2³²
	}{
		{"sha1", SHA1, 0}, {"xxhash", XXHash, 0}, {"range4096", tinyHash(4096), 4096}, {"range64", tinyHash(64), 64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// For small ranges, keys that hash exactly onto each value, to
			// check the strictly-greater rule on every point.
			onto := map[uint32]string{}
			for i := 0; c.size > 0 && uint32(len(onto)) < c.size && i < 100000; i++ {
				k := "probe" + strconv.Itoa(i)
				if _, ok := onto[c.hash(k)]; !ok {
					onto[c.hash(k)] = k
				}
			}
			for seed := range uint64(40) {
				rng := rand.New(rand.NewPCG(seed, 0xa11ce))
				r, m := New(c.hash), &naiveRing{hash: c.hash}
				for range 40 {
					id := "10.0.0." + strconv.Itoa(rng.IntN(12)) + ":6379"
					switch op := rng.IntN(10); {
					case op < 5:
						v := rng.IntN(12) // 0 is refused
						errR, errM := r.Add(id, v), m.add(id, v)
						if (errR == nil) != (errM == nil) {
							t.Fatalf("seed %d: Add(%s, %d) = %v, model %v", seed, id, v, errR, errM)
						}
					case op < 8:
						r.Remove(id)
						m.remove(id)
					}
					checkAgainstModel(t, r, m, rng, onto, fmt.Sprintf("seed %d", seed))
				}
			}
		})
	}
}

func checkAgainstModel(t *testing.T, r *Ring, m *naiveRing, rng *rand.Rand, onto map[uint32]string, where string) {
	t.Helper()
	if got, want := r.IDs(), m.ids(); !slices.Equal(got, want) {
		t.Fatalf("%s: IDs = %v, model %v", where, got, want)
	}
	total := 0
	for _, n := range m.nodes {
		total += len(n.points)
		if !r.Has(n.id) {
			t.Fatalf("%s: ring lacks %s", where, n.id)
		}
	}
	if r.Points() != total || r.Len() != len(m.nodes) {
		t.Fatalf("%s: points %d nodes %d, model %d %d", where, r.Points(), r.Len(), total, len(m.nodes))
	}
	keys := []string{}
	for range 25 {
		keys = append(keys, "k"+strconv.FormatUint(rng.Uint64()%100000, 10))
	}
	for _, n := range m.nodes {
		for _, p := range n.points {
			if k, ok := onto[p]; ok {
				keys = append(keys, k)
			}
		}
	}
	sorted := m.sorted()
	for _, key := range keys {
		gid, gok := r.Get(key)
		mid, mok := m.get(key)
		if gid != mid || gok != mok {
			t.Fatalf("%s: Get(%s) = %q %v, model %q %v", where, key, gid, gok, mid, mok)
		}
		n := rng.IntN(15)
		if got, want := r.GetN(key, n), m.getN(sorted, key, n); !slices.Equal(got, want) {
			t.Fatalf("%s: GetN(%s, %d) = %v, model %v", where, key, n, got, want)
		}
	}
}

// Readers run while writers churn the ring: every lookup sees a consistent
// snapshot (a live anchor node keeps the ring non-empty, results are
// distinct known nodes).
func TestConcurrentReadersAndWriters(t *testing.T) {
	r := New(XXHash)
	mustAdd(t, r, "anchor", 50)
	universe := map[string]bool{"anchor": true}
	for i := range 8 {
		universe["churn"+strconv.Itoa(i)] = true
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 300 {
				id := "churn" + strconv.Itoa(rng.IntN(8))
				if rng.IntN(2) == 0 {
					if err := r.Add(id, 1+rng.IntN(30)); err != nil {
						errs <- err
						return
					}
				} else {
					r.Remove(id)
				}
			}
		})
	}
	for g := range 4 {
		wg.Go(func() {
			buf := make([]string, 0, 9)
			for i := range 3000 {
				key := fmt.Sprintf("g%d-%d", g, i)
				id, ok := r.Get(key)
				if !ok || !universe[id] {
					errs <- fmt.Errorf("Get(%s) = %q, %v", key, id, ok)
					return
				}
				buf = r.AppendN(buf[:0], key, 9)
				seen := map[string]bool{}
				for _, id := range buf {
					if seen[id] || !universe[id] {
						errs <- fmt.Errorf("GetN(%s) = %v", key, buf)
						return
					}
					seen[id] = true
				}
				if len(buf) == 0 {
					errs <- fmt.Errorf("GetN(%s) empty", key)
					return
				}
				_ = r.IDs()
				_ = r.Has("churn1")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestGetDoesNotAllocate(t *testing.T) {
	for _, hash := range []HashFunc{SHA1, XXHash} {
		r := New(hash)
		for i := range 100 {
			mustAdd(t, r, "10.0.0."+strconv.Itoa(i)+":6379", 100)
		}
		if a := testing.AllocsPerRun(200, func() { _, _ = r.Get("user:12345") }); a != 0 {
			t.Errorf("Get: %v allocs", a)
		}
		buf := make([]string, 0, 3)
		if a := testing.AllocsPerRun(200, func() { buf = r.AppendN(buf[:0], "user:12345", 3) }); a != 0 {
			t.Errorf("AppendN(3): %v allocs", a)
		}
	}
}

func mustAdd(t testing.TB, r *Ring, id string, vnodes int) {
	t.Helper()
	if err := r.Add(id, vnodes); err != nil {
		t.Fatalf("Add(%s, %d): %v", id, vnodes, err)
	}
}

// The bucketed snapshot must hold its invariants after every change, and
// its search must agree with a linear scan over all points, for rings from
// a single bucket to thousands, and for small-range hashes that salt often.
// Seeded: the seed is printed, and -ringseed replays a failure.
func TestSnapshotInvariants(t *testing.T) {
	seed := testseed.Seed(t)
	for _, hash := range []HashFunc{SHA1, XXHash, tinyHash(1 << 12), tinyHash(300)} {
		rng := rand.New(rand.NewPCG(seed, 9))
		r := New(hash)
		var live []string
		for step := range 120 {
			if len(live) > 0 && rng.IntN(3) == 0 {
				k := rng.IntN(len(live))
				if rng.IntN(2) == 0 {
					r.Remove(live[k])
				} else {
					r = r.Without(live[k])
				}
				live = slices.Delete(live, k, k+1)
			} else {
				id := "n" + strconv.Itoa(step)
				if err := r.Add(id, 1+rng.IntN(150)); err != nil {
					continue // a small-range hash ran out of points
				}
				live = append(live, id)
			}
			checkSnapshot(t, r.snap.Load(), rng)
		}
	}
}

func checkSnapshot(t *testing.T, s *snapshot, rng *rand.Rand) {
	t.Helper()
	if s == nil || s.points == 0 {
		return
	}
	var all []point
	if len(s.buckets) != 1<<(32-s.shift) {
		t.Fatalf("%d buckets with shift %d", len(s.buckets), s.shift)
	}
	if avg := float64(s.points) / float64(len(s.buckets)); len(s.buckets) > 1 && (avg < bucketShrink || avg > bucketGrow) {
		t.Fatalf("%d points in %d buckets: %.1f a bucket is outside [%d, %d]", s.points, len(s.buckets), avg, bucketShrink, bucketGrow)
	}
	for b, pts := range s.buckets {
		for _, p := range pts {
			if int(p.hash>>s.shift) != b {
				t.Fatalf("point %d is in bucket %d, its top bits say %d", p.hash, b, p.hash>>s.shift)
			}
		}
		all = append(all, pts...)
	}
	if len(s.buckets[s.first]) == 0 || slices.ContainsFunc(s.buckets[:s.first], func(p []point) bool { return len(p) > 0 }) {
		t.Fatalf("first = %d is not the first non-empty bucket", s.first)
	}
	if len(all) != s.points {
		t.Fatalf("points = %d, chunks hold %d", s.points, len(all))
	}
	per := map[int32]int{}
	for i, p := range all {
		if i > 0 && all[i-1].hash >= p.hash {
			t.Fatalf("points out of order at %d: %d then %d", i, all[i-1].hash, p.hash)
		}
		n := s.nodes[p.owner]
		if n == nil || s.ids[p.owner] != n.id {
			t.Fatalf("point %d owned by free or mislabelled slot %d", p.hash, p.owner)
		}
		if _, ok := slices.BinarySearch(n.points, p.hash); !ok {
			t.Fatalf("point %d not in its node's list", p.hash)
		}
		per[p.owner]++
	}
	for _, slot := range s.order {
		if n := s.nodes[slot]; per[slot] != n.vnodes || len(n.points) != n.vnodes {
			t.Fatalf("node %s: %d points on the ring, %d listed, vnodes %d", n.id, per[slot], len(n.points), n.vnodes)
		}
	}
	check := func(h uint32) {
		want := 0
		for want < len(all) && all[want].hash <= h {
			want++
		}
		want %= len(all)
		b, i := s.successor(h)
		if got := s.buckets[b][i]; got != all[want] {
			t.Fatalf("successor(%d) = %v, scan says %v", h, got, all[want])
		}
		if got := s.leader(h); got != all[want].owner {
			t.Fatalf("leader(%d) = slot %d, scan says %d", h, got, all[want].owner)
		}
		if got, want := s.contains(h), slices.ContainsFunc(all, func(p point) bool { return p.hash == h }); got != want {
			t.Fatalf("contains(%d) = %v, want %v", h, got, want)
		}
	}
	for range 200 {
		check(rng.Uint32())
	}
	for k := 0; k < len(all); k += 1 + len(all)/50 {
		p := all[k].hash
		check(p - 1)
		check(p)
		check(p + 1)
	}
	check(0)
	check(^uint32(0))
	if len(s.pages) != 1<<(32-s.pshift) {
		t.Fatalf("%d pages with pshift %d", len(s.pages), s.pshift)
	}
	for j := 0; j < len(s.pages); j += 1 + rng.IntN(64) {
		check(uint32(uint64(j) << s.pshift))
		check(uint32(uint64(j)<<s.pshift - 1))
	}
}
