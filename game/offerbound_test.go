package game

import (
	"testing"

	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/torus"
)

// docs/protocol.md, Inputs (trade offer): the coins (point.x) and the
// goods number good + 256 × count (point.y) of an offer are each a whole
// number in [0, 2⁴⁰], so a count is at most 2³² − 1; the gateway node
// refuses one past it with GATEWAY.BAD_INPUT. A client measured 2³¹
// accepted and 2⁵³ refused; the bound is 2⁴⁰ exactly.
func TestOfferAmountsAreBoundedAt2To40(t *testing.T) {
	const bound = 1 << 40 // the documented number, not maxAmount: the test pins the doc
	offer := func(x, y float64) gateway.Input {
		return gateway.Input{Kind: InputTradeOffer, Target: 5, HasPoint: true, Point: torus.Pos{X: x, Y: y}}
	}
	for _, tc := range []struct {
		name string
		x, y float64
		ok   bool
	}{
		{"2³¹ coins", 1 << 31, 0, true},
		{"coins at the bound", bound, 0, true},
		{"coins one past the bound", bound + 1, 0, false},
		{"2⁵³ coins", 1 << 53, 0, false},
		{"the most goods: 2³² − 1 swords", 0, bound - 256 + 3, true},
		{"goods one past the bound: 2³² apples", 0, bound + 1, false},
		{"both at their largest", bound, bound - 256 + 3, true},
	} {
		err := checkInput(offer(tc.x, tc.y))
		if (err == nil) != tc.ok {
			t.Errorf("%s: point (%v, %v): %v, want ok %v", tc.name, tc.x, tc.y, err, tc.ok)
		}
	}
}
