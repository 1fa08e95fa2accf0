package demo

import (
	"testing"

	"github.com/shardwise/shardwise/ecs"
)

// TestCensusDropsClosedSegments: the census keeps a segment only while a
// node simulates its entity (so it stays bounded under --serve), and the
// single-writer check still sees a second node at the same epoch, still
// accepts a handoff and a re-creation.
func TestCensusDropsClosedSegments(t *testing.T) {
	c := newCensus()
	const a, b = "zone-a", "zone-b"
	e, f := ecs.ID(1), ecs.ID(2)
	c.record(a, []observed{{e, 1}, {f, 1}})
	c.record(b, []observed{{e, 2}}) // a handoff: b before a lets go
	c.record(a, []observed{{f, 1}})
	c.record(b, []observed{{e, 2}})
	if n, ex := c.doubles(); n != 0 {
		t.Fatalf("a handoff counted as double simulation: %v", ex)
	}
	if len(c.segs) != 2 {
		t.Fatalf("%d segments, want 2 (one per simulated entity)", len(c.segs))
	}
	for range 100 { // entities simulated once and gone: nothing left of them
		c.record(a, []observed{{f, 1}})
		c.record(a, nil)
	}
	if _, ok := c.segs[f]; ok || len(c.segs) != 1 {
		t.Fatalf("segments %v after f left: want e's only", c.segs)
	}
	c.record(a, []observed{{f, 7}}) // set up again, any epoch: a new segment
	c.record(b, []observed{{e, 2}, {f, 7}})
	if n, _ := c.doubles(); n != 1 {
		t.Fatalf("%d violations, want 1: f simulated by both at epoch 7", n)
	}
	c.forget(b)
	if _, ok := c.segs[e]; ok {
		t.Fatal("a forgotten node's segment kept")
	}
}
