package zonesim_test

import (
	"testing"

	"github.com/shardwise/shardwise/zone/zonesim"
)

// TestRecordHashesTheTick: a client batch's tick is part of the trace
// (it once hashed the length of the batch's last frame in its place).
func TestRecordHashesTheTick(t *testing.T) {
	trace := func(tick uint64) uint64 {
		n := zonesim.NewNetwork(1, zonesim.Faults{})
		n.Record("1@sim-0", tick, [][]byte{[]byte("frame")})
		return n.Trace()
	}
	if a, b := trace(7), trace(8); a == b {
		t.Fatalf("batches delivered at ticks 7 and 8 give one trace %016x", a)
	}
}
