package zonesim

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// traceHashNaive is traceHash.Write as first written: whole words, then
// the tail byte by byte. The trace's values are pinned to it.
func traceHashNaive(h uint64, b []byte) uint64 {
	for ; len(b) >= 8; b = b[8:] {
		h = bits.RotateLeft64((h^binary.LittleEndian.Uint64(b))*traceMul, 31)
	}
	var w uint64
	for i, c := range b {
		w |= uint64(c) << (8 * i)
	}
	return bits.RotateLeft64((h^w^uint64(len(b))<<59)*traceMul, 31)
}

// TestTraceHashMatchesNaive: the word-load tail gives the naive byte
// loop's value for every length and offset, so traces keep their values.
func TestTraceHashMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 64)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := 0; n <= 40; n++ {
		for off := 0; off+n <= len(buf); off++ {
			b := buf[off : off+n]
			h := newTraceHash()
			h.Write(b)
			if want := traceHashNaive(0xcbf29ce484222325, b); h.h != want {
				t.Fatalf("length %d at %d: %016x, naive %016x", n, off, h.h, want)
			}
		}
	}
}

// TestTraceHashWordAndString: word and str give the values of Write over
// the 8 little-endian bytes and the string's bytes, so writeMsg and
// writeRecord keep the traces' values.
func TestTraceHashWordAndString(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		v := rng.Uint64()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		a, w := newTraceHash(), newTraceHash()
		a.h, w.h = v^0x55, v^0x55
		a.Write(b[:])
		w.word(v)
		if a.h != w.h {
			t.Fatalf("word %#x: %016x, Write %016x", v, w.h, a.h)
		}
	}
	long := make([]byte, 100)
	for i := range long {
		long[i] = byte('a' + i%26)
	}
	for n := range len(long) + 1 {
		s := string(long[:n])
		a, w := newTraceHash(), newTraceHash()
		a.Write([]byte(s))
		w.str(s)
		if a.h != w.h {
			t.Fatalf("string of %d bytes: %016x, Write %016x", n, w.h, a.h)
		}
	}
}
