package link

import "testing"

// The stream of an incarnation that just ended can open after its
// successor's. It must not evict the successor's state: that state is what
// keeps the successor's resends from being handled twice.
func TestLateStreamOfOldIncarnationKeepsTheNewState(t *testing.T) {
	n := &Node{inbound: map[string]*peerInbound{}}
	const old, cur = 11, 23
	n.inboundFor("a", old)
	st := n.inboundFor("a", cur)
	st.ctrlLast.Store(7)
	n.inboundFor("a", old) // the old incarnation's late stream
	if got := n.inboundFor("a", cur); got != st || got.ctrlLast.Load() != 7 {
		t.Fatalf("state of the current incarnation was replaced (last seq %d)", got.ctrlLast.Load())
	}
	if n.inboundFor("a", old).ctrlMu != st.ctrlMu {
		t.Fatal("incarnations of one peer do not share the handler lock")
	}
	if n.inboundFor("b", old).ctrlMu == st.ctrlMu {
		t.Fatal("two peers share a handler lock")
	}
	// Memory stays bounded per peer: the oldest incarnations go first.
	for inc := uint64(100); inc < 100+2*keptIncarnations; inc++ {
		n.inboundFor("a", inc)
	}
	if k := len(n.inbound["a"].states); k != keptIncarnations {
		t.Fatalf("%d incarnations remembered, want %d", k, keptIncarnations)
	}
	if n.inboundFor("a", cur) == st {
		t.Fatal("an incarnation older than keptIncarnations newer ones is still remembered")
	}
}
