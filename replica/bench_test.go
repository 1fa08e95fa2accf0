package replica

import (
	"testing"

	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
)

// BenchmarkApply: one delta (a 16-byte position) to one of 1,000 ghosts,
// the steady state of a render-ghost stream. The baseline is the least any
// reader of these bytes pays: ReadFrame of the same frame and a map lookup
// of the entity.
func BenchmarkApply(b *testing.B) {
	const ghosts = 1000
	payload := make([]byte, 16)
	frames := make([][]byte, ghosts)
	for i := range frames {
		frames[i] = outbox.AppendComponentFrame(nil, uint64(i+1), 1, payload)
	}
	b.Run("store", func(b *testing.B) {
		s := newStore(b)
		for i := range ghosts {
			e := uint64(i + 1)
			mustApply(b, s, Update{e, st(1, 1), torus.ChunkPos{X: int32(i % 10)}, burst(e, 1, string(payload), 2, "hp")})
		}
		s.Drain(nil)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			k := i % ghosts
			u := Update{Entity: uint64(k + 1), Stamp: st(1, uint64(2+i/ghosts)), Chunk: torus.ChunkPos{X: int32(k % 10)}, Frames: frames[k]}
			if ok, err := s.Apply(u); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("baseline-read-and-lookup", func(b *testing.B) {
		m := make(map[uint64]Stamp, ghosts)
		for i := range ghosts {
			m[uint64(i+1)] = st(1, 1)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			k := i % ghosts
			msg, _, err := outbox.ReadFrame(frames[k])
			if err != nil {
				b.Fatal(err)
			}
			m[msg.Entity] = st(1, uint64(2+i/ghosts))
		}
	})
}
