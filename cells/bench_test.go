package cells_test

import (
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/torus"
)

// benchTable is the default grid shared by 8 nodes in row bands, and a set
// of positions: half anywhere in the world, half within 300 m of a border
// (where the band and handoff checks do real work).
func benchTable(b *testing.B) (*cells.Table, []torus.Pos) {
	tab, err := cells.Uniform(cells.DefaultGrid(), 1, []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 5))
	ps := make([]torus.Pos, 1024)
	for i := range ps {
		if i%2 == 0 {
			ps[i] = torus.Pos{X: r.Float64() * W, Y: r.Float64() * W}
		} else {
			ps[i] = torus.Pos{X: r.Float64() * W, Y: float64(r.IntN(16))*16_000 + r.Float64()*600 - 300}
		}
	}
	return tab, ps
}

var (
	sinkS  string
	sinkB  bool
	sinkR  cells.RegionID
	sinkSs []string
)

func BenchmarkRegionOf(b *testing.B) {
	tab, ps := benchTable(b)
	g := tab.Grid()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sinkR = g.RegionOf(ps[i&1023])
		i++
	}
}

func BenchmarkOwnerOf(b *testing.B) {
	tab, ps := benchTable(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sinkS = tab.OwnerOf(ps[i&1023])
		i++
	}
}

func BenchmarkInForeignBand(b *testing.B) {
	tab, ps := benchTable(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sinkB = tab.InForeignBand(ps[i&1023], 224)
		i++
	}
}

func BenchmarkAppendForeignOwners(b *testing.B) {
	tab, ps := benchTable(b)
	dst := make([]string, 0, 8)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		dst = tab.AppendForeignOwners(dst[:0], ps[i&1023], 224)
		i++
	}
	sinkSs = dst
}

func BenchmarkHandoffTarget(b *testing.B) {
	tab, ps := benchTable(b)
	owners := make([]string, len(ps))
	for i, p := range ps {
		// The owner one region south: most checks are for a foreign owner.
		owners[i] = tab.OwnerOf(torus.Pos{X: p.X, Y: p.Y - 8000})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sinkS, sinkB = tab.HandoffTarget(owners[i&1023], ps[i&1023], 32)
		i++
	}
}

// BenchmarkForeignOwnersBruteForce is the baseline for the band checks: the
// naive scan of every region that the tests use as the reference.
func BenchmarkForeignOwnersBruteForce(b *testing.B) {
	tab, ps := benchTable(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sinkSs = naiveForeignOwners(tab, ps[i&1023], 224)
		i++
	}
}
