//go:build !race

// The race detector's instrumentation may allocate, so the zero-allocation
// promises are checked only in normal builds.

package cells_test

import (
	"testing"

	"github.com/shardwise/shardwise/torus"
)

func TestZeroAllocs(t *testing.T) {
	tab := quadrants(t)
	p := torus.Pos{X: 5, Y: 5} // a corner of four owners, across the seam
	dst := make([]string, 0, 4)
	checks := map[string]func(){
		"OwnerOf":             func() { sinkS = tab.OwnerOf(p) },
		"RegionOf":            func() { sinkR = tab.Grid().RegionOf(p) },
		"InForeignBand":       func() { sinkB = tab.InForeignBand(p, 224) },
		"AppendForeignOwners": func() { dst = tab.AppendForeignOwners(dst[:0], p, 224) },
		"HandoffTarget":       func() { sinkS, sinkB = tab.HandoffTarget("a", torus.Pos{X: -40, Y: 5}, 32) },
		"Neighbours":          func() { sinkS = tab.Neighbours(0)[3].Node },
		"OtherOwnerWithin":    func() { sinkB = tab.OtherOwnerWithin(p, 224, "b") },
		"AppendOwnersWithin":  func() { dst = tab.AppendOwnersWithin(dst[:0], p, 224, "a") },
	}
	for name, f := range checks {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s allocates %v times per call", name, n)
		}
	}
	if len(dst) != 3 {
		t.Fatalf("AppendForeignOwners found %v", dst)
	}
}
