package terrain

import (
	"testing"

	"github.com/shardwise/shardwise/internal/binread/codectest"
)

// FuzzDecodeChunk checks what DecodeChunk promises of any input: it never
// panics and never modifies its input; it refuses with ErrMalformed; what
// it accepts is in canonical decoded form, passes Check, and re-encodes to
// exactly the input. It is seeded with the committed corpus in
// testdata/fuzz/FuzzDecodeChunk, the samples and random valid chunks.
//
//	go test -run='^$' -fuzz=FuzzDecodeChunk -fuzztime=30s -fuzzminimizetime=1s ./terrain/
func FuzzDecodeChunk(f *testing.F) {
	codectest.Fuzz(f, chunkCodec(f), Version, checkMalformed)
}
