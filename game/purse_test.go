package game

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/torus"
)

// gatedReader is the test's economy with its reads held at a gate: the
// real cluster behind it, each Holdings call waiting while the gate is
// shut (and saying it arrived), so that a test can hand a player over
// while its purse's read is in flight.
type gatedReader struct {
	*NodeRouter
	mu      sync.Mutex
	gate    chan struct{} // nil: open
	arrived chan struct{}
}

func (*gatedReader) holdsCalls() {}

func (g *gatedReader) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate, g.arrived = make(chan struct{}), make(chan struct{}, 1)
}

func (g *gatedReader) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gate)
	g.gate = nil
}

func (g *gatedReader) Holdings(ctx context.Context, accounts []string) ([]int64, error) {
	g.mu.Lock()
	gate, arrived := g.gate, g.arrived
	g.mu.Unlock()
	if gate != nil {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.NodeRouter.Holdings(ctx, accounts)
}

// A purse read whose answer reaches the node after its player was handed
// on is read again where the player is now: the new node shows the
// holdings, rather than the purse the player carried over staying as it
// was until its next movement.
func TestAPurseReadAnsweredAfterAHandoffIsReadAgainThere(t *testing.T) {
	w := startEconWorld(t, 2)
	gated := &gatedReader{NodeRouter: w.router}
	eco := w.economy()
	// Long deadlines: the held read must still be answered (not time out
	// and be given up) when the gate opens.
	eco.Ledger, eco.AttemptTimeout, eco.CallDeadline, eco.ResubmitAfter = gated, time.Minute, 2*time.Minute, 3*time.Minute
	c, g0, g1 := econNodes(t, w, Config{Seed: 24, Economy: eco})
	w.fund(521, noGood, 50)
	m := g0.client(t, 521, torus.Pos{X: 1000, Y: border - 10})
	stepUntil(t, c, 10*time.Second, "the first purse", func() bool {
		p, _ := g0.PurseOf(m)
		return p.Known && p.Coins == 50
	})

	// The player's coins change outside the game; the game is told its
	// purse is stale, and the read it sends is held.
	gated.shut()
	w.fund(521, noGood, 7)
	g0.purseChanged(m)
	stepUntil(t, c, 10*time.Second, "the purse's read at the economy", func() bool {
		select {
		case <-gated.arrived:
			return true
		default:
			return false
		}
	})
	// The player walks over the border to zone-1 meanwhile.
	g0.input(t, m, gateway.Input{Kind: InputMove, HasPoint: true, Point: torus.Pos{X: 1000, Y: border + 40}})
	stepUntil(t, c, 60*time.Second, "the handoff to zone-1", func() bool { return g1.r.Simulated(m) })
	if p, _ := g1.PurseOf(m); p.Coins != 50 {
		t.Fatalf("zone-1 got a purse of %d coins with the player: want the 50 it had", p.Coins)
	}
	gated.open()
	stepUntil(t, c, 10*time.Second, "zone-1's purse showing the 57 coins", func() bool {
		p, _ := g1.PurseOf(m)
		return p.Coins == 57
	})
}
