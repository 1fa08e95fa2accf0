package sim

import (
	"testing"

	"github.com/shardwise/shardwise/torus"
)

// TestNearMeeting: a pair's first meeting (BotStep.Near) is on a line
// through Centre that runs between the two bots, each on the side it
// stands on, so that neither crosses it; both bots, each with its own
// step, compute the same spots; a pair on one side of both lines keeps
// meets side by side where it stands.
func TestNearMeeting(t *testing.T) {
	const minAlong = 48
	// Planned: on y = 0 at x = 60, the even bot at y = -2.
	planY := BotStep{Kind: StepTrade, To: torus.Pos{X: 60, Y: -2}, Partner: 1, PartnerAt: torus.Pos{X: 60, Y: 2}, Near: true}
	for _, c := range []struct {
		name              string
		even, odd         torus.Pos
		evenSpot, oddSpot torus.Pos
	}{
		{"the planned line between them", torus.Pos{X: 10, Y: -20}, torus.Pos{X: 30, Y: 25}, torus.Pos{X: 48, Y: -2}, torus.Pos{X: 48, Y: 2}},
		{"sides swapped: each stays on its own", torus.Pos{X: 10, Y: 20}, torus.Pos{X: 30, Y: -25}, torus.Pos{X: 48, Y: 2}, torus.Pos{X: 48, Y: -2}},
		{"far along the line", torus.Pos{X: -70, Y: -5}, torus.Pos{X: -90, Y: 5}, torus.Pos{X: -80, Y: -2}, torus.Pos{X: -80, Y: 2}},
		{"the other line between them", torus.Pos{X: -10, Y: 20}, torus.Pos{X: 30, Y: 25}, torus.Pos{X: -2, Y: 48}, torus.Pos{X: 2, Y: 48}},
		{"one quadrant: side by side", torus.Pos{X: 10, Y: 20}, torus.Pos{X: 30, Y: 25}, torus.Pos{X: 20, Y: 20.5}, torus.Pos{X: 20, Y: 24.5}},
		{"on a line: side by side", torus.Pos{X: 10, Y: 0}, torus.Pos{X: 30, Y: 0}, torus.Pos{X: 20, Y: -2}, torus.Pos{X: 20, Y: 2}},
	} {
		evenSpot, oddSpot := nearMeeting(planY, false, c.even, c.odd, minAlong)
		if evenSpot != c.evenSpot || oddSpot != c.oddSpot {
			t.Errorf("%s: spots %v %v, want %v %v", c.name, evenSpot, oddSpot, c.evenSpot, c.oddSpot)
		}
		// The odd bot's step has the spots the other way round.
		oddStep := planY
		oddStep.To, oddStep.PartnerAt, oddStep.Partner = planY.PartnerAt, planY.To, 0
		e2, o2 := nearMeeting(oddStep, true, c.even, c.odd, minAlong)
		if e2 != evenSpot || o2 != oddSpot {
			t.Errorf("%s: the odd bot computes %v %v, the even one %v %v", c.name, e2, o2, evenSpot, oddSpot)
		}
	}
}
