package outbox

import (
	"testing"

	"github.com/shardwise/shardwise/interest"
)

// A repeated tick allocates exactly once: the flush's frame arena, which
// is fresh on purpose (frames handed to sinks are immutable).
func TestSteadyStateFlushAllocatesOnlyTheArena(t *testing.T) {
	g, o, _ := setup(t)
	sink := &discard{}
	for a := acct(1); a <= 3; a++ {
		o.Attach(a, sink) // the recorders copy what they get
	}
	for a := acct(10); a < 40; a++ {
		o.Attach(a, sink)
		g.hold(a, here)
	}
	o.AddDeliveries(g.vis.Drain())
	o.Flush(1)
	var tick uint64 = 1
	run := func() {
		tick++
		o.MarkDirty(100, tPosition)
		o.MarkDirty(100, tInventory)
		o.MarkDirty(200, tHealth)
		o.Appear(12, 200)
		o.Vanish(13, 100, interest.Death)
		if st := o.Flush(tick); st.Batches == 0 {
			t.Fatal("nothing delivered")
		}
	}
	run()
	if n := testing.AllocsPerRun(20, run); n != 1 {
		t.Fatalf("steady-state flush allocates %.1f times, want 1", n)
	}
}
