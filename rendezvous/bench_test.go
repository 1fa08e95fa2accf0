package rendezvous

import (
	"fmt"
	"strconv"
	"testing"
)

// Benchmarks beside the code; the comparison with dgryski/go-rendezvous is
// in the bench module (scripts/bench-placement).

var sinkNode string

func BenchmarkOwner(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "wrld_" + strconv.Itoa(i*7919)
	}
	for _, n := range []int{10, 100, 1000} {
		nodes := make([]string, n)
		ws := make([]Weighted, n)
		for i := range nodes {
			nodes[i] = fmt.Sprintf("econ-%d", i)
			ws[i] = Weighted{nodes[i], float64(1 + i%4)}
		}
		plain, _ := New(nodes)
		weighted, _ := NewWeighted(ws)
		for name, tbl := range map[string]*Table{"compatible": plain, "weighted": weighted} {
			b.Run(fmt.Sprintf("%s/nodes=%d", name, n), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					sinkNode = tbl.Owner(keys[i&1023])
					i++
				}
			})
		}
	}
}
