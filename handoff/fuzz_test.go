package handoff

import (
	"testing"

	"github.com/shardwise/shardwise/internal/binread/codectest"
)

// fuzzDecoder checks what every decoder promises of any input: it never
// panics and never modifies its input; it refuses with ErrMalformed; what
// it accepts is in canonical decoded form (invariant 2), passes Check, and
// re-encodes to exactly the input (invariant 1). It is seeded with the
// codec's samples and with random valid values from a fixed seed.
//
// Run each with a cap on minimisation, or the fuzzer can spend most of its
// time minimising new-coverage inputs (golang/go#48820):
//
//	go test -run='^$' -fuzz=FuzzDecodeTransfer -fuzztime=20s -fuzzminimizetime=1s ./handoff/
func fuzzDecoder(f *testing.F, name string) {
	codectest.Fuzz(f, codecNamed(f, name), Version, checkMalformed)
}

func FuzzDecodeTransfer(f *testing.F) { fuzzDecoder(f, "Transfer") }
func FuzzDecodeAck(f *testing.F)      { fuzzDecoder(f, "Ack") }
func FuzzDecodeRefuse(f *testing.F)   { fuzzDecoder(f, "Refuse") }
