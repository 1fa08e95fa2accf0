package wire

import (
	"testing"

	"github.com/shardwise/shardwise/internal/binread/codectest"
)

// fuzzDecoder checks what every decoder promises of any input: it never
// panics; it refuses with ErrMalformed; what it accepts is in canonical
// decoded form (invariant 2) and re-encodes to exactly the input
// (invariant 1, canonical encoding, so no decode(encode(decode(x)))
// detour is needed). It is seeded with the codec's samples and with
// random valid values from a fixed seed.
//
// Run each with a cap on minimisation, or the fuzzer can spend most of its
// time minimising new-coverage inputs at 0 execs/sec (golang/go#48820,
// golang/go#51484):
//
//	go test -run='^$' -fuzz=FuzzDecodeForward -fuzztime=20s -fuzzminimizetime=1s ./zone/internal/wire/
func fuzzDecoder(f *testing.F, name string) {
	codectest.Fuzz(f, codecNamed(f, name), Version, checkMalformed)
}

func FuzzDecodeFence(f *testing.F)      { fuzzDecoder(f, "Fence") }
func FuzzDecodeSubscribe(f *testing.F)  { fuzzDecoder(f, "Subscribe") }
func FuzzDecodeIntents(f *testing.F)    { fuzzDecoder(f, "Intents") }
func FuzzDecodeForward(f *testing.F)    { fuzzDecoder(f, "Forward") }
func FuzzDecodeRoutes(f *testing.F)     { fuzzDecoder(f, "Routes") }
func FuzzDecodeUpdate(f *testing.F)     { fuzzDecoder(f, "Update") }
func FuzzDecodeSnapshot(f *testing.F)   { fuzzDecoder(f, "Snapshot") }
func FuzzDecodePlayer(f *testing.F)     { fuzzDecoder(f, "Player") }
func FuzzDecodeTerrain(f *testing.F)    { fuzzDecoder(f, "Terrain") }
func FuzzDecodeIntentsAck(f *testing.F) { fuzzDecoder(f, "IntentsAck") }
