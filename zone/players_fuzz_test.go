package zone

import (
	"bytes"
	"testing"

	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/torus"
)

// FuzzDecodeInput: the input inside a reserved intent comes from a peer's
// bytes. No bytes make decodeInput panic; what it accepts is a finite
// input that encodes back to the same bytes.
func FuzzDecodeInput(f *testing.F) {
	for _, in := range []gateway.Input{
		{},
		{Seq: 7, Kind: 1, Point: torus.Pos{X: -3, Y: 1e9}, HasPoint: true, Target: 1 << 63},
		{Seq: 1 << 31, Kind: 4, Target: 255},
	} {
		f.Add(appendInput(nil, in))
	}
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := decodeInput(b)
		if err != nil {
			return
		}
		if !in.Point.Finite() {
			t.Fatalf("point %v accepted", in.Point)
		}
		if got := appendInput(nil, in); !bytes.Equal(got, b) {
			t.Fatalf("decoded %x into %+v, which encodes to %x", b, in, got)
		}
	})
}
