package zone

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/internal/testseed"
)

type (
	codecFlat struct {
		A    uint64
		B    float64
		C    [3]int32
		D, E bool
		F    uint16
		G    complex64
	}
	codecPadded struct {
		A uint8
		B uint64
	}
	codecBlank struct {
		A uint32
		_ uint32
	}
	codecNested struct {
		In  [2]codecFlat
		Pos Position
		Own Owner
	}
)

// checkFixedCodec encodes random T values with FixedCodec and with
// encoding/binary, and requires the same bytes; raw is whether FixedCodec
// may copy T's memory.
func checkFixedCodec[T any](t *testing.T, rng *rand.Rand, raw bool) {
	t.Helper()
	if got := memoryIsEncoding[T](); got != raw {
		t.Fatalf("memoryIsEncoding[%T] = %v, want %v", *new(T), got, raw)
	}
	c := FixedCodec[T]()
	for range 200 {
		var v T
		b := make([]byte, binary.Size(v))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if _, err := binary.Decode(b, binary.LittleEndian, &v); err != nil {
			t.Fatal(err)
		}
		want, err := binary.Append([]byte{7}, binary.LittleEndian, &v)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Append([]byte{7}, &v); !bytes.Equal(got, want) {
			t.Fatalf("FixedCodec[%T] encodes %+v as %x, encoding/binary as %x", v, v, got, want)
		}
		if back, err := c.Decode(want[1:]); err != nil || !bytes.Equal(c.Append(nil, &back), want[1:]) {
			t.Fatalf("FixedCodec[%T] decodes %x as %+v, %v", v, want[1:], back, err)
		}
	}
}

// FixedCodec copies a value's memory when that is its encoding, and
// walks it with encoding/binary otherwise: the bytes are the same.
func TestFixedCodecIsEncodingBinary(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0xC0DEC))
	checkFixedCodec[uint32](t, rng, true)
	checkFixedCodec[bool](t, rng, true)
	checkFixedCodec[[5]int16](t, rng, true)
	checkFixedCodec[codecFlat](t, rng, true)
	checkFixedCodec[codecNested](t, rng, true)
	checkFixedCodec[Position](t, rng, true)
	checkFixedCodec[codecPadded](t, rng, false)
	checkFixedCodec[codecBlank](t, rng, false)
	checkFixedCodec[[2]codecBlank](t, rng, false)
}
