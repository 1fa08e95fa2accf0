package gateway_test

import (
	"testing"
	"time"

	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/gateway"
)

// docs/protocol.md, "Limits and timeouts" (a client that stops reading):
// a client that logs in and then neither sends nor reads is closed at the
// idle timeout (30 s after its last message, seen by a housekeeping pass
// up to 1.25 s later); the server writes the Error and the close frame and
// then waits for the client's close frame, up to the WebSocket library's
// 5 s on the wall clock, before it drops the socket and ends the session
// in the world: 35–36.25 s after the last message, as a client measured
// (35–36 s). The idle part runs on the injected clock; the 5 s is measured
// here.
func TestANonReaderLeavesFiveSecondsAfterItsIdleClose(t *testing.T) {
	f := newFixtureWith(t, directory.MemoryConfig{LeaseTTL: time.Hour})
	n := f.node("gw-a", 1, func(c *gateway.Config) {
		c.Limits.IdleTimeout = 30 * time.Second
		c.RenewEvery = 20 * time.Minute // the lease plays no part here
	})
	f.loggedIn(n, 3) // reads Welcome and You, then never reads nor sends again
	f.clk.Advance(29 * time.Second)
	start := time.Now()
	f.clk.Advance(2 * time.Second) // past the idle timeout
	poll(t, "the non-reader's session to end", func() bool {
		_, leaves, _ := n.world.snapshot()
		return len(leaves) == 1
	})
	took := time.Since(start)
	if took < 4500*time.Millisecond {
		t.Fatalf("the session ended %v after the idle close, want the library's 5 s close handshake wait", took)
	}
	t.Logf("the session ended %v after the idle close", took.Round(time.Millisecond))
}
