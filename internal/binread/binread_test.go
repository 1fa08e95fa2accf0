package binread_test

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/binread"
)

var errBad = errcode.New("TEST.MALFORMED", "test: malformed payload")

// read runs step over a Reader of b (version byte 1) and returns Finish.
func read(b []byte, step func(r *binread.Reader)) error {
	r := binread.New(b, "Msg", errBad)
	r.Version(1)
	step(&r)
	return r.Finish()
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		step func(r *binread.Reader)
		want string // "" for success
	}{
		{"empty", nil, func(*binread.Reader) {}, "Msg at byte 0: empty payload, no version byte"},
		{"unknown version", []byte{2}, func(*binread.Reader) {}, "Msg at byte 0: unknown version 2"},
		{"version only", []byte{1}, func(*binread.Reader) {}, ""},
		{"trailing bytes", []byte{1, 5, 0, 0}, func(r *binread.Reader) { r.Uvarint("A") }, "Msg at byte 2: 2 trailing bytes"},
		{"minimal varint", []byte{1, 0x80, 0x01}, func(r *binread.Reader) { r.Uvarint("A") }, ""},
		{"non-minimal varint", []byte{1, 0, 0x81, 0x00}, func(r *binread.Reader) { r.Uvarint("A"); r.Uvarint("B") }, "Msg.B at byte 2: non-minimal varint"},
		{"non-minimal zero", []byte{1, 0x80, 0x00}, func(r *binread.Reader) { r.Uvarint("A") }, "Msg.A at byte 1: non-minimal varint"},
		{"truncated varint", []byte{1, 0x80}, func(r *binread.Reader) { r.Uvarint("A") }, "Msg.A at byte 1: truncated varint"},
		{"varint overflow", append(append([]byte{1}, bytes.Repeat([]byte{0xff}, 9)...), 0x02), func(r *binread.Reader) { r.Uvarint("A") }, "Msg.A at byte 1: varint overflows 64 bits"},
		{"u64", []byte{1, 1, 2, 3, 4, 5, 6, 7, 8}, func(r *binread.Reader) { r.U64("W") }, ""},
		{"u64 truncated", []byte{1, 1, 2, 3}, func(r *binread.Reader) { r.U64("W") }, "Msg.W at byte 1: truncated: 8 bytes needed, 3 left"},
		{"u32", []byte{1, 1, 2, 3, 4}, func(r *binread.Reader) { r.U32("W") }, ""},
		{"u32 truncated", []byte{1, 1, 2, 3}, func(r *binread.Reader) { r.U32("W") }, "Msg.W at byte 1: truncated: 4 bytes needed, 3 left"},
		{"byte truncated", []byte{1}, func(r *binread.Reader) { r.Byte("F") }, "Msg.F at byte 1: truncated"},
		{"count below least", []byte{1, 0}, func(r *binread.Reader) { r.Count("L", 1, 10, 1) }, "Msg.L at byte 1: count 0, at least 1 needed"},
		{"count over limit", []byte{1, 11}, func(r *binread.Reader) { r.Count("L", 0, 10, 1) }, "Msg.L at byte 1: count 11 exceeds 10"},
		{"count beyond the bytes left", []byte{1, 3, 0, 0, 0, 0, 0}, func(r *binread.Reader) { r.Count("L", 0, 10, 2) }, "Msg.L at byte 1: count 3 needs at least 6 more bytes, 5 left"},
		{"count that fits exactly", []byte{1, 3, 0, 0, 0, 0, 0, 0}, func(r *binread.Reader) { r.Count("L", 0, 10, 2) }, "Msg at byte 2: 6 trailing bytes"},
		{"count overflowing", []byte{1, 3, 0}, func(r *binread.Reader) { r.Count("L", 0, math.MaxInt, math.MaxInt) }, "Msg.L at byte 1: count 3 of 9223372036854775807-byte elements overflows, 1 left"},
		{"span", []byte{1, 2, 'h', 'i'}, func(r *binread.Reader) { r.Span("S", 2) }, ""},
		{"span over limit", []byte{1, 3, 'a', 'b', 'c'}, func(r *binread.Reader) { r.Span("S", 2) }, "Msg.S at byte 1: 3 bytes exceed 2"},
		{"span beyond the bytes left", []byte{1, 0, 4, 'a'}, func(r *binread.Reader) { r.Byte("F"); r.Span("S", 10) }, "Msg.S at byte 2: 4 bytes, 1 left"},
		{"indices and suffix", []byte{1, 0x80}, func(r *binread.Reader) { r.I, r.J, r.Suffix = 3, 7, "X"; r.Uvarint("A[].B[].C") }, "Msg.A[3].B[7].C.X at byte 1: truncated varint"},
		{"FailAt names its offset", []byte{1, 9, 9}, func(r *binread.Reader) { r.Byte("F"); r.Byte("G"); r.FailAt(1, "F", "too %s", "big") }, "Msg.F at byte 1: too big"},
		{"first failure sticks", []byte{1}, func(r *binread.Reader) { r.Fail("A", "first"); r.Fail("B", "second"); r.U64("C") }, "Msg.A at byte 1: first"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := read(c.in, c.step)
			if c.want == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if !errors.Is(err, errBad) || errcode.Of(err) != "TEST.MALFORMED" {
				t.Fatalf("error %v does not wrap the sentinel", err)
			}
			if want := "test: malformed payload: " + c.want; err.Error() != want {
				t.Fatalf("error %q, want %q", err, want)
			}
		})
	}
}

// After a failure every read returns zero and consumes nothing, and a
// count is 0 so nothing is allocated for it.
func TestReadsAfterFailureAreZero(t *testing.T) {
	r := binread.New([]byte{1, 5, 1, 2, 3, 4, 5, 6, 7, 8, 2, 'a', 'b'}, "Msg", errBad)
	r.Fail("", "stop")
	off := r.Offset()
	if v := r.Uvarint("A"); v != 0 {
		t.Errorf("Uvarint = %d", v)
	}
	if v := r.U64("B"); v != 0 {
		t.Errorf("U64 = %d", v)
	}
	if v := r.Byte("C"); v != 0 {
		t.Errorf("Byte = %d", v)
	}
	if n := r.Count("D", 0, 10, 1); n != 0 {
		t.Errorf("Count = %d", n)
	}
	if b := r.Span("E", 10); b != nil {
		t.Errorf("Span = %q", b)
	}
	if r.Offset() != off {
		t.Errorf("offset moved from %d to %d", off, r.Offset())
	}
	if err := r.Finish(); err == nil || !strings.HasSuffix(err.Error(), "Msg at byte 0: stop") {
		t.Errorf("Finish = %v", err)
	}
}

// A span aliases the input with its capacity clipped, so appending to it
// leaves the rest of the payload alone; an empty span is nil.
func TestSpanAliasesClipped(t *testing.T) {
	in := []byte{1, 2, 'h', 'i', 0, 'z'}
	r := binread.New(in, "Msg", errBad)
	r.Version(1)
	s := r.Span("S", 10)
	if string(s) != "hi" || cap(s) != 2 {
		t.Fatalf("span %q with cap %d, want \"hi\" with cap 2", s, cap(s))
	}
	if &s[0] != &in[2] {
		t.Fatal("span does not alias the input")
	}
	_ = append(s, 'X')
	if in[4] != 0 {
		t.Fatal("appending to a span wrote over the input")
	}
	if e := r.Span("E", 10); e != nil {
		t.Fatalf("empty span %#v, want nil", e)
	}
	if b := r.Byte("Z"); b != 'z' || r.Left() != 0 {
		t.Fatalf("Byte = %q with %d left", b, r.Left())
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestValues(t *testing.T) {
	in := []byte{1, 0xac, 0x02, 8, 7, 6, 5, 4, 3, 2, 1, 2, 0, 0}
	r := binread.New(in, "Msg", errBad)
	r.Version(1)
	if v := r.Uvarint("A"); v != 300 {
		t.Errorf("Uvarint = %d, want 300", v)
	}
	if v := r.U64("B"); v != 0x0102030405060708 {
		t.Errorf("U64 = %#x", v)
	}
	if n := r.Count("C", 1, 2, 1); n != 2 {
		t.Errorf("Count = %d, want 2", n)
	}
	if r.Left() != 2 || r.Offset() != 12 {
		t.Errorf("Left %d, Offset %d; want 2, 12", r.Left(), r.Offset())
	}
	r.Byte("D")
	r.Byte("E")
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
}
