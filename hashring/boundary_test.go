package hashring

import (
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
)

// boundaryHash maps every string onto a small set of "interesting" values:
// 0, 2³²−1, and the neighbours of page and bucket boundaries at every page
// count, so points and keys sit on the edges of pages, slots and buckets.
func boundaryHash() (HashFunc, []uint32) {
	set := map[uint32]bool{0: true, 1: true, 2: true, ^uint32(0): true, ^uint32(0) - 1: true, ^uint32(0) - 2: true}
	for bits := 1; bits <= 20; bits++ {
		step := uint64(1) << (32 - bits)
		for _, j := range []uint64{1, 2, 3, (1 << bits) / 2, (1 << bits) - 1} {
			if j >= 1<<bits {
				continue
			}
			v := j * step
			set[uint32(v)] = true
			set[uint32(v-1)] = true
			set[uint32(v+1)] = true
		}
	}
	var vals []uint32
	for v := range set {
		vals = append(vals, v)
	}
	slices.Sort(vals)
	return func(s string) uint32 { return vals[SHA1(s)%uint32(len(vals))] }, vals
}

// digest hashes every byte reachable from a snapshot, to detect a
// published snapshot being mutated later.
func digest(s *snapshot) uint64 {
	if s == nil {
		return 0
	}
	h := fnv.New64a()
	w := func(v uint64) {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	w(uint64(len(s.buckets)))
	w(uint64(s.shift))
	w(uint64(s.points))
	w(uint64(s.first))
	for _, b := range s.buckets {
		w(uint64(len(b)))
		for _, p := range b {
			w(uint64(p.hash)<<32 | uint64(uint32(p.owner)))
		}
	}
	w(uint64(s.pshift))
	for _, pg := range s.pages {
		w(uint64(len(pg)))
		for _, sl := range pg {
			w(uint64(sl.limit)<<32 | uint64(uint32(sl.o1)))
			w(uint64(uint32(sl.o2)))
		}
	}
	for i, n := range s.nodes {
		if n == nil {
			w(1 << 60)
		} else {
			h.Write([]byte(n.id))
			w(uint64(n.vnodes))
			for _, p := range n.points {
				w(uint64(p))
			}
		}
		h.Write([]byte(s.ids[i]))
	}
	for _, o := range s.order {
		w(uint64(o))
	}
	for _, x := range s.salted {
		w(uint64(x.slot))
		for _, p := range x.tried {
			w(uint64(p))
		}
	}
	if s.diverged {
		w(7)
	}
	return h.Sum64()
}

// checkPagesFresh compares every page of s with the pages a from-scratch
// build at the same pshift gives.
func checkPagesFresh(t *testing.T, s *snapshot, where string) {
	t.Helper()
	if s == nil || s.points == 0 {
		if s != nil && s.pages != nil {
			t.Fatalf("%s: empty ring has pages", where)
		}
		return
	}
	if len(s.ids) != len(s.nodes) {
		t.Fatalf("%s: %d ids, %d nodes", where, len(s.ids), len(s.nodes))
	}
	if len(s.nodes) > 0 && s.nodes[len(s.nodes)-1] == nil {
		t.Fatalf("%s: trailing free slot not trimmed", where)
	}
	for slot, n := range s.nodes {
		if n == nil {
			if s.ids[slot] != "" {
				t.Fatalf("%s: free slot %d has id %q", where, slot, s.ids[slot])
			}
			continue
		}
		if s.pos[n.id] != int32(slot) || s.ids[slot] != n.id {
			t.Fatalf("%s: slot %d: pos %d ids %q", where, slot, s.pos[n.id], s.ids[slot])
		}
	}
	if len(s.pos) != len(s.order) {
		t.Fatalf("%s: pos %d order %d", where, len(s.pos), len(s.order))
	}
	fresh := *s
	fresh.buildAllPages()
	for j := range s.pages {
		if !slices.Equal(s.pages[j], fresh.pages[j]) {
			t.Fatalf("%s: page %d of %d (pshift %d) is stale:\n got %v\nwant %v", where, j, len(s.pages), s.pshift, s.pages[j], fresh.pages[j])
		}
	}
}

// checkMatchesModel compares the ring's exact point set per node with the
// model.
func checkPointsMatchModel(t *testing.T, r *Ring, m *naiveRing, where string) {
	t.Helper()
	s := r.snap.Load()
	for _, n := range m.nodes {
		got := s.nodes[s.pos[n.id]].points
		want := slices.Sorted(slices.Values(n.points))
		if !slices.Equal(got, want) {
			t.Fatalf("%s: node %s points %v, model %v", where, n.id, got, want)
		}
	}
}

func TestRingBoundaries(t *testing.T) {
	bh, vals := boundaryHash()
	high := func(s string) uint32 { return ^uint32(0) - SHA1(s)%64 }
	mid := func(s string) uint32 { return 1<<31 - 32 + SHA1(s)%64 }
	cases := []struct {
		name  string
		hash  HashFunc
		probe []uint32
		maxN  int
		maxV  int
	}{
		{"boundary", bh, vals, 10, 40},
		{"high64", high, nil, 10, 12},
		{"mid64", mid, nil, 10, 12},
		{"sha1-small", SHA1, nil, 12, 30},
		{"sha1-big", SHA1, nil, 40, 300},
		{"tiny300", tinyHash(300), nil, 14, 40},
	}
	// A short run in the suite (2 seeds, without the big SHA-1 ring);
	// SHARDWISE_LONG=1 runs every case over 300 seeds (about seven minutes
	// without -race).
	long := os.Getenv("SHARDWISE_LONG") != ""
	seeds := 2
	if long {
		seeds = 300
	}
	for _, c := range cases {
		if c.name == "sha1-big" && !long {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(seeds) {
				rng := rand.New(rand.NewPCG(seed, 77))
				r, m := New(c.hash), &naiveRing{hash: c.hash}
				type pub struct {
					s *snapshot
					d uint64
				}
				var pubs []pub
				steps := 60
				if c.maxV > 100 {
					steps = 150
				}
				for step := range steps {
					id := "n" + strconv.Itoa(rng.IntN(c.maxN))
					where := c.name + " seed " + strconv.Itoa(int(seed)) + " step " + strconv.Itoa(step)
					switch op := rng.IntN(10); {
					case op < 5:
						v := 1 + rng.IntN(c.maxV)
						errR, errM := r.Add(id, v), m.add(id, v)
						if (errR == nil) != (errM == nil) {
							t.Fatalf("%s: Add(%s,%d) = %v, model %v", where, id, v, errR, errM)
						}
					case op < 7:
						r.Remove(id)
						m.remove(id)
					case op < 9:
						// Without on a clone; the original must not change.
						before := digest(r.snap.Load())
						r2 := r.Clone().Without(id)
						if digest(r.snap.Load()) != before {
							t.Fatalf("%s: Without changed the receiver", where)
						}
						r = r2
						m.without(id)
					default:
						r = r.Clone()
					}
					s := r.snap.Load()
					pubs = append(pubs, pub{s, digest(s)})
					checkPagesFresh(t, s, where)
					checkSnapshot(t, s, rng)
					checkPointsMatchModel(t, r, m, where)
					checkAgainstModel(t, r, m, rng, nil, where)
					if s != nil && s.points > 0 {
						all := m.sorted()
						probe := c.probe
						for _, p := range all {
							probe = append(probe, p.p-1, p.p, p.p+1)
						}
						for _, h := range probe {
							want, _ := slices.BinarySearchFunc(all, h+1, func(a ownedPoint, t uint32) int {
								switch {
								case a.p < t:
									return -1
								case a.p > t:
									return 1
								}
								return 0
							})
							if h == ^uint32(0) {
								want = 0
							}
							want %= len(all)
							if got := s.ids[s.leader(h)]; got != all[want].id {
								t.Fatalf("%s: leader(%d) = %s, want %s", where, h, got, all[want].id)
							}
						}
					}
				}
				for i, p := range pubs {
					if digest(p.s) != p.d {
						t.Fatalf("seed %d: snapshot %d was mutated after publication", seed, i)
					}
				}
			}
		})
	}
}

// A diverged ring whose fresh build runs out of points: Without of an
// absent id falls back to s.without(id), which looks the absent id up in
// pos (slot 0) and removes whichever node holds slot 0.
func TestWithoutAbsentOnDivergedRingWhoseRebuildFails(t *testing.T) {
	hash := func(s string) uint32 {
		switch {
		case s == "b-0":
			return 100
		case len(s) > 4 && s[:4] == "b-0#":
			return 200
		}
		return 100 // a-0, x-0 and all of x-0's salts
	}
	r := New(hash)
	mustAdd(t, r, "a", 1) // a@100
	mustAdd(t, r, "b", 1) // b-0 hits 100, salted to 200
	r.Remove("a")         // b was salted against a: diverged
	mustAdd(t, r, "x", 1) // x-0 = 100 is free again: x@100 (slot 0, a's)
	// A fresh build of [b, x] puts b at 100 and x nowhere.
	w := r.Without("nope")
	if got, want := w.IDs(), r.IDs(); !slices.Equal(got, want) {
		t.Errorf("Without(absent) IDs = %v, want %v", got, want)
	}
	if w.Has("x") {
		if _, ok := w.VNodes("x"); !ok {
			t.Errorf("x is in pos but VNodes says no")
		}
	}
	if id, _ := w.Get("k"); id == "" {
		t.Errorf("Get = empty id")
	}
}
