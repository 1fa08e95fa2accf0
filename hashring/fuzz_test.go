package hashring

import (
	"slices"
	"strconv"
	"testing"
)

// FuzzRingAgainstModel reads a byte string as a sequence of Add, Remove,
// Without, Get and GetN operations and checks each result against the naive
// model.
// The first byte picks the hash; the small-range ones make salting and
// ErrNoFreePoint common.
func FuzzRingAgainstModel(f *testing.F) {
	f.Add([]byte{0, 0, 1, 3, 0, 2, 4, 2, 9, 3, 7, 4, 1, 1, 2, 9})
	f.Add([]byte{2, 0, 0, 9, 0, 1, 9, 0, 2, 9, 2, 5, 3, 1, 5, 1, 0, 2, 6})
	f.Add([]byte{3, 0, 0, 255, 0, 1, 40, 2, 17, 3, 4, 255})
	f.Add([]byte{1, 0, 5, 0, 2, 0, 3, 1})
	f.Add([]byte{3, 0, 0, 200, 0, 1, 200, 1, 0, 4, 1, 2, 7, 0, 2, 100, 4, 1, 2, 9, 3, 4, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) == 0 {
			return
		}
		hashes := []HashFunc{SHA1, XXHash, tinyHash(32), tinyHash(4)}
		hash := hashes[int(ops[0])%len(hashes)]
		r, m := New(hash), &naiveRing{hash: hash}
		next := func(i *int) int {
			if *i >= len(ops) {
				return 0
			}
			v := int(ops[*i])
			*i++
			return v
		}
		for i := 1; i < len(ops); {
			op := next(&i) % 5
			arg := next(&i)
			switch op {
			case 0:
				id := "n" + strconv.Itoa(arg%6)
				v := next(&i) % 12
				errR, errM := r.Add(id, v), m.add(id, v)
				if (errR == nil) != (errM == nil) {
					t.Fatalf("Add(%s, %d) = %v, model %v", id, v, errR, errM)
				}
			case 1:
				id := "n" + strconv.Itoa(arg%6)
				r.Remove(id)
				m.remove(id)
			case 2:
				key := "k" + strconv.Itoa(arg)
				gid, gok := r.Get(key)
				mid, mok := m.get(key)
				if gid != mid || gok != mok {
					t.Fatalf("Get(%s) = %q %v, model %q %v", key, gid, gok, mid, mok)
				}
			case 3:
				key := "k" + strconv.Itoa(arg)
				n := next(&i)%8 - 1
				if got, want := r.GetN(key, n), m.getN(m.sorted(), key, n); !slices.Equal(got, want) {
					t.Fatalf("GetN(%s, %d) = %v, model %v", key, n, got, want)
				}
			case 4:
				id := "n" + strconv.Itoa(arg%6)
				r = r.Without(id)
				m.without(id)
			}
			if got, want := r.IDs(), m.ids(); !slices.Equal(got, want) {
				t.Fatalf("IDs = %v, model %v", got, want)
			}
		}
	})
}
