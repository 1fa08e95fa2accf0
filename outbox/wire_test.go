package outbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/interest"
)

func sampleBatch() []byte {
	var b []byte
	b = AppendVanishFrame(b, 1<<63|5, interest.Death)
	b = AppendAppearFrame(b, 42, 2)
	b = AppendComponentFrame(b, 42, 1, []byte{1, 2, 3})
	b = AppendComponentFrame(b, 42, 300, nil)
	b = AppendComponentFrame(b, 7, 0xFFFF, bytes.Repeat([]byte{9}, 200))
	return b
}

func TestBatchRoundTrip(t *testing.T) {
	in := sampleBatch()
	var msgs []Message
	if err := DecodeBatch(in, func(m Message) error { msgs = append(msgs, m); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []Message{
		{Kind: KindVanish, Entity: 1<<63 | 5, Reason: interest.Death},
		{Kind: KindAppear, Entity: 42, BurstLen: 2},
		{Kind: KindComponent, Entity: 42, Component: 1, Payload: []byte{1, 2, 3}},
		{Kind: KindComponent, Entity: 42, Component: 300, Payload: []byte{}},
		{Kind: KindComponent, Entity: 7, Component: 0xFFFF, Payload: bytes.Repeat([]byte{9}, 200)},
	}
	if len(msgs) != len(want) {
		t.Fatalf("decoded %d messages, want %d", len(msgs), len(want))
	}
	var out []byte
	for i, m := range msgs {
		w := want[i]
		if m.Kind != w.Kind || m.Entity != w.Entity || m.Component != w.Component ||
			m.BurstLen != w.BurstLen || m.Reason != w.Reason || !bytes.Equal(m.Payload, w.Payload) {
			t.Fatalf("message %d = %+v, want %+v", i, m, w)
		}
		out = AppendMessage(out, m)
	}
	if !bytes.Equal(out, in) {
		t.Fatal("re-encoding changed the bytes")
	}
}

func TestDecodeRefusesMalformedBatches(t *testing.T) {
	good := AppendComponentFrame(nil, 1, 2, []byte{3})
	cases := map[string][]byte{
		"truncated length":       {0x80},
		"non-canonical length":   append([]byte{0x80 | good[0], 0x00}, good[1:]...),
		"body past the end":      good[:len(good)-1],
		"huge length":            {0xff, 0xff, 0xff, 0xff, 0x0f},
		"body too short":         {2, byte(KindVanish), 0},
		"unknown kind":           AppendVanishFrame(nil, 1, 0)[:0:0],
		"bad vanish reason":      {10, byte(KindVanish), 1, 0, 0, 0, 0, 0, 0, 0, 9},
		"vanish with extra byte": {11, byte(KindVanish), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"type over 16 bits":      {12, byte(KindComponent), 1, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x80, 0x04},
		"appear trailing bytes":  {11, byte(KindAppear), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"burst cut short":        append(AppendAppearFrame(nil, 1, 2), AppendComponentFrame(nil, 1, 1, nil)...),
		"burst of another":       append(AppendAppearFrame(nil, 1, 1), AppendComponentFrame(nil, 2, 1, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})...),
		"burst interrupted":      append(AppendAppearFrame(nil, 1, 1), AppendVanishFrame(nil, 1, 0)...),
	}
	unknown := AppendVanishFrame(nil, 1, 0)
	unknown[1] = 9
	cases["unknown kind"] = unknown
	for name, b := range cases {
		err := DecodeBatch(b, func(Message) error { return nil })
		if !errors.Is(err, ErrMalformed) || errcode.Of(err) != "OUTBOX.MALFORMED" {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestDecodeStopsAtTheCallbacksError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := DecodeBatch(sampleBatch(), func(Message) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("err = %v after %d messages", err, n)
	}
}

// FuzzDecodeBatch: the decoder never panics, and whatever it accepts
// re-encodes to exactly the bytes it read (the encoding is canonical).
func FuzzDecodeBatch(f *testing.F) {
	f.Add(sampleBatch())
	f.Add([]byte{})
	f.Add(AppendAppearFrame(nil, 3, 0))
	f.Add([]byte{0x80, 0x00})
	f.Fuzz(func(t *testing.T, in []byte) {
		var out []byte
		err := DecodeBatch(in, func(m Message) error {
			out = AppendMessage(out, m)
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error outside the malformed family: %v", err)
			}
			return
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("accepted %x but re-encodes as %x", in, out)
		}
		// Single frames decode the same way through ReadFrame.
		for rest := in; len(rest) > 0; {
			_, r, err := ReadFrame(rest)
			if err != nil {
				t.Fatalf("ReadFrame refused a frame DecodeBatch accepted: %v", err)
			}
			rest = r
		}
	})
}

// ReadFrame judges one frame alone, so a reader fed one frame at a time
// (a replica applying entries as they arrive) can take an appear head
// before its burst, and decodes what DecodeBatch decodes.
func TestReadFrameReadsABurstFrameByFrame(t *testing.T) {
	head := AppendAppearFrame(nil, 42, 2)
	m, rest, err := ReadFrame(head)
	if err != nil || m.Kind != KindAppear || m.Entity != 42 || m.BurstLen != 2 || len(rest) != 0 {
		t.Fatalf("head alone: %+v, %d bytes left, %v", m, len(rest), err)
	}

	var whole []Message
	if err := DecodeBatch(sampleBatch(), func(m Message) error { whole = append(whole, m); return nil }); err != nil {
		t.Fatal(err)
	}
	// Feed each frame in its own buffer, with nothing after it, as a
	// frame-at-a-time reader would see it.
	var one []Message
	for b := sampleBatch(); len(b) > 0; {
		_, r, err := ReadFrame(b)
		if err != nil {
			t.Fatal(err)
		}
		alone := bytes.Clone(b[:len(b)-len(r)])
		m, left, err := ReadFrame(alone)
		if err != nil || len(left) != 0 {
			t.Fatalf("frame %d alone: %v, %d bytes left", len(one), err, len(left))
		}
		one = append(one, m)
		b = r
	}
	if len(one) != len(whole) {
		t.Fatalf("frame by frame: %d messages, batch: %d", len(one), len(whole))
	}
	for i := range one {
		if !sameMessage(one[i], whole[i]) {
			t.Fatalf("message %d: frame by frame %+v, batch %+v", i, one[i], whole[i])
		}
	}
}

func TestReadFrameRefusesAHostileBurstCount(t *testing.T) {
	for _, n := range []uint64{MaxBurstLen + 1, 1 << 40, 1<<63 + 1, ^uint64(0)} {
		b := binary.AppendUvarint(nil, uint64(1+entityBytes+uvarintLen(n)))
		b = append(b, byte(KindAppear))
		b = binary.LittleEndian.AppendUint64(b, 1)
		b = binary.AppendUvarint(b, n)
		if _, _, err := ReadFrame(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("count %d: err = %v", n, err)
		}
	}
	if _, _, err := ReadFrame(AppendAppearFrame(nil, 1, MaxBurstLen)); err != nil {
		t.Errorf("count MaxBurstLen: %v", err)
	}
}

// The batch reader still refuses a burst that cannot fit, at its head:
// fn never sees a head whose burst is missing.
func TestDecodeBatchRefusesAnOverlongBurstAtItsHead(t *testing.T) {
	b := AppendAppearFrame(nil, 1, 3)
	b = AppendComponentFrame(b, 1, 1, nil)
	calls := 0
	err := DecodeBatch(b, func(Message) error { calls++; return nil })
	if !errors.Is(err, ErrMalformed) || calls != 0 {
		t.Fatalf("err = %v after %d calls", err, calls)
	}
}

func sameMessage(a, b Message) bool {
	return a.Kind == b.Kind && a.Entity == b.Entity && a.Component == b.Component &&
		a.BurstLen == b.BurstLen && a.Reason == b.Reason && bytes.Equal(a.Payload, b.Payload)
}

// FuzzReadFrame: one frame is judged in isolation. Whatever ReadFrame
// accepts re-encodes to exactly the bytes it consumed, and the same bytes
// alone, or followed by anything else, decode to the same message.
func FuzzReadFrame(f *testing.F) {
	f.Add(sampleBatch())
	f.Add(AppendAppearFrame(nil, 3, 5))
	f.Add(AppendVanishFrame(nil, 9, interest.Gone))
	f.Add([]byte{0x80, 0x00})
	f.Fuzz(func(t *testing.T, in []byte) {
		m, rest, err := ReadFrame(in)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error outside the malformed family: %v", err)
			}
			return
		}
		frame := in[:len(in)-len(rest)]
		if out := AppendMessage(nil, m); !bytes.Equal(out, frame) {
			t.Fatalf("accepted %x but re-encodes as %x", frame, out)
		}
		if m.Kind == KindAppear && (m.BurstLen < 0 || m.BurstLen > MaxBurstLen) {
			t.Fatalf("burst length %d out of range", m.BurstLen)
		}
		for _, tail := range [][]byte{nil, {0xff}, AppendComponentFrame(nil, 1, 1, nil)} {
			alone := append(bytes.Clone(frame), tail...)
			m2, r2, err := ReadFrame(alone)
			if err != nil || !sameMessage(m, m2) || !bytes.Equal(r2, tail) {
				t.Fatalf("followed by %x: %+v, %v; alone with the original rest: %+v", tail, m2, err, m)
			}
		}
	})
}
