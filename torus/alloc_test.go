//go:build !race

// The race detector's instrumentation may allocate, so the zero-allocation
// promises are checked only in normal builds.

package torus_test

import (
	"testing"

	"github.com/shardwise/shardwise/torus"
)

func TestZeroAllocs(t *testing.T) {
	w := torus.Default()
	a, b := torus.Pos{X: -5, Y: 127_990}, torus.Pos{X: 128_010, Y: 3}
	ca, cb := w.ChunkOf(a), w.ChunkOf(b)
	checks := map[string]func(){
		"Distance":      func() { sinkF = w.Distance(a, b) },
		"Normalise":     func() { sinkP = w.Normalise(a) },
		"ChunkOf":       func() { sinkC = w.ChunkOf(a) },
		"ChunkDistance": func() { sinkI = w.ChunkDistance(ca, cb) },
		"ChunksWithin": func() {
			for c := range w.ChunksWithin(ca, 5, 1) {
				sinkC = c
			}
		},
	}
	for name, f := range checks {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s allocates %v times per call", name, n)
		}
	}
}
