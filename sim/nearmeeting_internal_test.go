package sim

import (
	"testing"

	"github.com/shardwise/shardwise/torus"
)

// TestNearMeeting: a pair's first meeting (BotStep.Near) is on a line
// through Centre that runs between the two bots, each on the side it
// stands on, so that neither crosses it; both bots, each with its own
// step, compute the same spots; a pair on one side of both lines keeps
// its planned meeting.
func TestNearMeeting(t *testing.T) {
	const minAlong = 48
	// Planned: on y = 0 at x = 60, the even bot at y = -2.
	planY := BotStep{Kind: StepTrade, To: torus.Pos{X: 60, Y: -2}, Partner: 1, PartnerAt: torus.Pos{X: 60, Y: 2}, Near: true}
	for _, c := range []struct {
		name              string
		even, odd         torus.Pos
		evenSpot, oddSpot torus.Pos
		ok                bool
	}{
		{"the planned line between them", torus.Pos{X: 10, Y: -20}, torus.Pos{X: 30, Y: 25}, torus.Pos{X: 48, Y: -2}, torus.Pos{X: 48, Y: 2}, true},
		{"sides swapped: each stays on its own", torus.Pos{X: 10, Y: 20}, torus.Pos{X: 30, Y: -25}, torus.Pos{X: 48, Y: 2}, torus.Pos{X: 48, Y: -2}, true},
		{"far along the line", torus.Pos{X: -70, Y: -5}, torus.Pos{X: -90, Y: 5}, torus.Pos{X: -80, Y: -2}, torus.Pos{X: -80, Y: 2}, true},
		{"the other line between them", torus.Pos{X: -10, Y: 20}, torus.Pos{X: 30, Y: 25}, torus.Pos{X: -2, Y: 48}, torus.Pos{X: 2, Y: 48}, true},
		{"one quadrant: the planned meeting", torus.Pos{X: 10, Y: 20}, torus.Pos{X: 30, Y: 25}, torus.Pos{}, torus.Pos{}, false},
		{"on a line: the planned meeting", torus.Pos{X: 10, Y: 0}, torus.Pos{X: 30, Y: 0}, torus.Pos{}, torus.Pos{}, false},
	} {
		evenSpot, oddSpot, ok := nearMeeting(planY, false, c.even, c.odd, minAlong)
		if ok != c.ok || (ok && (evenSpot != c.evenSpot || oddSpot != c.oddSpot)) {
			t.Errorf("%s: spots %v %v (%v), want %v %v (%v)", c.name, evenSpot, oddSpot, ok, c.evenSpot, c.oddSpot, c.ok)
		}
		// The odd bot's step has the spots the other way round.
		oddStep := planY
		oddStep.To, oddStep.PartnerAt, oddStep.Partner = planY.PartnerAt, planY.To, 0
		e2, o2, ok2 := nearMeeting(oddStep, true, c.even, c.odd, minAlong)
		if ok2 != ok || e2 != evenSpot || o2 != oddSpot {
			t.Errorf("%s: the odd bot computes %v %v (%v), the even one %v %v (%v)", c.name, e2, o2, ok2, evenSpot, oddSpot, ok)
		}
	}
}
