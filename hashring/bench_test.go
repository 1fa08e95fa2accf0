package hashring

import (
	"fmt"
	"strconv"
	"testing"
)

// Benchmarks beside the code; the side-by-side comparison with other
// libraries is in the bench module (scripts/bench-placement).

func benchRing(b testing.TB, hash HashFunc, nodes int) *Ring {
	b.Helper()
	r := New(hash)
	for i := range nodes {
		mustAdd(b, r, fmt.Sprintf("10.0.%d.%d:6379", i/256, i%256), 100)
	}
	return r
}

func benchKeys() []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i*7919)
	}
	return keys
}

var sinkID string

func BenchmarkGet(b *testing.B) {
	keys := benchKeys()
	for _, h := range []struct {
		name string
		fn   HashFunc
	}{{"sha1", SHA1}, {"xxhash", XXHash}} {
		for _, nodes := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("%s/nodes=%d", h.name, nodes), func(b *testing.B) {
				r := benchRing(b, h.fn, nodes)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					sinkID, _ = r.Get(keys[i&1023])
					i++
				}
			})
		}
	}
}

func BenchmarkGetN3(b *testing.B) {
	keys := benchKeys()
	r := benchRing(b, XXHash, 100)
	buf := make([]string, 0, 3)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		buf = r.AppendN(buf[:0], keys[i&1023], 3)
		i++
	}
}

var sinkHash uint32

func BenchmarkHash(b *testing.B) {
	keys := benchKeys()
	for _, h := range []struct {
		name string
		fn   HashFunc
	}{{"sha1", SHA1}, {"xxhash", XXHash}} {
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				sinkHash = h.fn(keys[i&1023])
				i++
			}
		})
	}
}

func BenchmarkAdd(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		benchRing(b, XXHash, 100)
	}
}

// BenchmarkAddNth is the floor under a router's join: Add of the Nth node
// onto a copy (Clone) of a ring of N−1 nodes of 100 vnodes, with no router
// around it.
func BenchmarkAddNth(b *testing.B) {
	for _, n := range []int{10, 100, 400, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			r := benchRing(b, nil, n-1)
			id := fmt.Sprintf("10.0.%d.%d:6379", (n-1)/256, (n-1)%256)
			b.ReportAllocs()
			for b.Loop() {
				mustAdd(b, r.Clone(), id, 100)
			}
		})
	}
}
