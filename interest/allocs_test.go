package interest

import "testing"

// Reindex across chunks, chunk sends and Drain reuse their buffers: once
// warmed up, a repeated tick allocates nothing.
func TestSteadyStateTickAllocatesNothing(t *testing.T) {
	f := newVis(t)
	a, b, c := ChunkPos{X: 1}, ChunkPos{X: 2}, ChunkPos{X: 3}
	for sub := uint64(1); sub <= 20; sub++ {
		f.hold(sub, a, b)
		f.subs.Announce(sub, c)
	}
	for e := range eid(100) {
		f.vis.Reindex(e, a)
	}
	f.vis.Drain()
	tick := func() {
		f.subs.MarkSent(5, c)
		for e := range eid(100) {
			f.vis.Reindex(e, b)
			f.vis.Reindex(e, c) // out of sight for all but subscriber 5
		}
		if len(f.vis.Drain()) != 19 {
			t.Fatal("walking away vanished nothing")
		}
		for e := range eid(100) {
			f.vis.Reindex(e, a)
		}
		f.subs.Unsend(5, c)
		if len(f.vis.Drain()) != 19 {
			t.Fatal("walking back appeared nothing")
		}
	}
	tick()
	if n := testing.AllocsPerRun(20, tick); n != 0 {
		t.Fatalf("steady-state tick allocates %.1f times, want 0", n)
	}
}
