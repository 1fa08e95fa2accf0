package game

import (
	"bytes"
	"testing"

	"github.com/shardwise/shardwise/zone"
)

// FuzzWireDecoders: the decoders of the public components (what a peer
// sends for a simulation ghost) and the den's handoff codec never panic,
// and whatever decodes encodes back to the same bytes.
func FuzzWireDecoders(f *testing.F) {
	for _, seed := range [][]byte{{0}, {1}, {4}, {0x64, 0x64}, {1, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0, 0}, {0, 0, 0xa0, 0x40}, {2, 4, 1, 3, 5}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, "visual", b, decodeVisual, encodeVisual)
		roundTrip(t, "path", b, decodePath, encodePath)
		roundTrip(t, "speed", b, decodeSpeed, encodeSpeed)
		roundTrip(t, "health", b, decodeHealth, encodeHealth)
		roundTrip(t, "den", b, denCodec.Decode, denCodec.Append)
		if p, err := zone.DecodePos(b); err == nil && !bytes.Equal(zone.AppendPos(nil, p), b) {
			t.Fatalf("position %x decodes to %v, which encodes to %x", b, p, zone.AppendPos(nil, p))
		}
	})
}

func roundTrip[T any](t *testing.T, name string, b []byte, dec func([]byte) (T, error), enc func([]byte, *T) []byte) {
	v, err := dec(b)
	if err != nil {
		return
	}
	if got := enc(nil, &v); !bytes.Equal(got, b) {
		t.Fatalf("%s %x decodes to %+v, which encodes to %x", name, b, v, got)
	}
}
