package zone

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/gateway/clientinput"
	"github.com/shardwise/shardwise/torus"
)

// FuzzDecodeInput: the input inside a reserved intent comes from a peer's
// bytes. No bytes make decodeInput panic; what it accepts is a finite
// input that encodes back to the same bytes.
func FuzzDecodeInput(f *testing.F) {
	for _, in := range []clientinput.Input{
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

// TestDecodeInputErrors: each way an input's bytes can be wrong is refused
// with ZONE.MALFORMED_INPUT, naming the field and where it starts.
func TestDecodeInputErrors(t *testing.T) {
	good := appendInput(nil, clientinput.Input{Seq: 1, Kind: 2, HasPoint: true, Point: torus.Pos{X: 1, Y: 2}, Target: 9})
	set := func(i int, v ...byte) []byte { b := bytes.Clone(good); copy(b[i:], v); return b }
	nan := binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.NaN()))
	for _, c := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "Input.Seq at byte 0: truncated: 4 bytes needed, 0 left"},
		{"truncated kind", good[:6], "Input.Kind at byte 4: truncated: 4 bytes needed, 2 left"},
		{"has point not a bool", set(8, 2), "Input.HasPoint at byte 8: 2, want 0 or 1"},
		{"truncated point", good[:20], "Input.Point.Y at byte 17: truncated: 8 bytes needed, 3 left"},
		{"point not finite", set(17, nan...), "Input.Point at byte 9: not finite"},
		{"truncated target", good[:40], "Input.Target at byte 33: truncated: 8 bytes needed, 7 left"},
		{"trailing byte", append(bytes.Clone(good), 0), "Input at byte 41: 1 trailing bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeInput(c.in)
			if !errors.Is(err, ErrMalformedInput) || errcode.Of(err) != CodeMalformedInput || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("decodeInput: %v (code %q), want %s naming %q", err, errcode.Of(err), CodeMalformedInput, c.want)
			}
		})
	}
	if in, err := decodeInput(good); err != nil || in.Target != 9 || !in.HasPoint || in.Point.Y != 2 {
		t.Fatalf("decodeInput(good) = %+v, %v", in, err)
	}
}
