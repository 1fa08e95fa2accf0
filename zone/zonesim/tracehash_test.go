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
