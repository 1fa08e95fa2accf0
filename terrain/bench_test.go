package terrain

import (
	"testing"

	"github.com/shardwise/shardwise/torus"
)

// BenchmarkBase is one chunk's base heightmap on the default world; a
// gateway generates about a hundred on a login.
func BenchmarkBase(b *testing.B) {
	g := mustGenerator(b, 42, torus.Default())
	b.ReportAllocs()
	var h Heights
	for i := 0; b.Loop(); i++ {
		h = g.Base(torus.ChunkPos{X: int32(i % 4000), Y: int32(i / 4000 % 4000)})
	}
	_ = h
}
