// Package testseed gives randomized tests a seed they print and can replay.
//
// A test calls Seed once and derives all its randomness from the result. The
// seed is logged with the command that replays it; SHARDWISE_SEED=N makes
// every Seed call in the run return N. It imports only the standard library,
// so tests of layer-0 packages can use it.
package testseed

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// Env is the environment variable that fixes the seed.
const Env = "SHARDWISE_SEED"

// Seed returns the seed for tb: SHARDWISE_SEED when it is set (an
// unparsable value fails the test), a fresh random one otherwise. It logs
// the seed either way, so a failure's output says how to replay it.
func Seed(tb testing.TB) uint64 {
	tb.Helper()
	seed := rand.Uint64()
	if v := os.Getenv(Env); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			tb.Fatalf("%s=%q: not an unsigned integer: %v", Env, v, err)
		}
		seed = n
	}
	tb.Logf("seed %d (replay: %s=%d go test -run '^%s$')", seed, Env, seed, tb.Name())
	return seed
}
