package zonesim_test

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain runs the package's tests with the collector at a quarter of
// its default pace (GOGC=400): the simulations allocate briskly from a
// small live heap, so the default collected every few megabytes, and
// under -race each collection (and each freed span the detector
// forgets) is dear: 7–9 % of TestSimulation's CPU (seeds 1–40 under
// -race), for a peak RSS of 110 MB instead of 64. GOGC in the
// environment wins.
func TestMain(m *testing.M) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(m.Run())
}
