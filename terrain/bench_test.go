package terrain

import (
	"testing"

	"github.com/shardwise/shardwise/account"
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

// benchChunk is a generated chunk of the default world with 20 markers
// and 4 game edits of 16 bytes: 497 bytes encoded.
func benchChunk(b *testing.B) *Chunk {
	g := mustGenerator(b, 42, torus.Default())
	c := &Chunk{X: 1234, Y: 3210, Revision: 24, Heights: g.Base(torus.ChunkPos{X: 1234, Y: 3210})}
	for i := range 20 {
		c.Edits = append(c.Edits, mustMarker(b, uint8(i%Cells), uint8(i/2), uint8(i+1), 1000+account.ID(i)))
	}
	for i := range 4 {
		c.Edits = append(c.Edits, Edit{Kind: FirstGameKind, Data: make([]byte, 16), Account: account.ID(i)})
	}
	return c
}

func BenchmarkAppendChunk(b *testing.B) {
	c := benchChunk(b)
	buf := AppendChunk(nil, c)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendChunk(buf[:0], c)
	}
}

func BenchmarkDecodeChunk(b *testing.B) {
	buf := AppendChunk(nil, benchChunk(b))
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeChunk(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkApply(b *testing.B) {
	c := benchChunk(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Apply(c.Heights, c.Edits); err != nil {
			b.Fatal(err)
		}
	}
}
