package replica

import (
	"bytes"
	"errors"
	"testing"

	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
)

// FuzzApply: Update.Frames come from another node. Apply never panics,
// refuses only with ErrMalformed and then changes nothing, and whatever it
// keeps is served back as a burst DecodeBatch accepts.
func FuzzApply(f *testing.F) {
	f.Add(burst(1, 1, "pos", 2, "hp"))
	f.Add(delta(1, 3, "x"))
	f.Add(vanish(1, interest.Death))
	f.Add(outbox.AppendAppearFrame(nil, 1, 3))
	f.Add([]byte{0x80, 0x00})
	f.Fuzz(func(t *testing.T, frames []byte) {
		s := newStore(t)
		mustApply(t, s, Update{1, st(1, 1), c0, burst(1, 1, "old", 9, "keep")})
		before, _ := s.AppendBurst(nil, 1)
		applied, err := s.Apply(Update{Entity: 1, Stamp: st(1, 2), Chunk: c1, Frames: frames})
		if err != nil {
			if !errors.Is(err, ErrMalformed) || applied {
				t.Fatalf("applied %v, err %v", applied, err)
			}
			if after, _ := s.AppendBurst(nil, 1); !bytes.Equal(after, before) {
				t.Fatal("a refused update changed the ghost")
			}
			return
		}
		checkIndex(t, s)
		if b, ok := s.AppendBurst(nil, 1); ok {
			if err := outbox.DecodeBatch(b, func(outbox.Message) error { return nil }); err != nil {
				t.Fatalf("served burst %x does not decode: %v", b, err)
			}
		}
	})
}
