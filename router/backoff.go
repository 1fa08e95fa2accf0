package router

import "time"

// Backoff is the reconnect schedule, kept free of clocks and goroutines so
// it can be tested exhaustively: attempt n (counting from 0) has the nominal
// delay min(Base·2ⁿ, Max), and the delay actually waited is drawn with
// equal jitter from [nominal/2, nominal].
//
// Why equal jitter: nodes that fail together (a rack, a network blip) would
// otherwise retry in lockstep and hit the recovering servers at the same
// instants. Full jitter ([0, nominal]) spreads them more but can retry
// almost at once, hammering a node that has just died; equal jitter keeps at
// least half the nominal spacing and never exceeds the documented maximum.
type Backoff struct {
	Base, Max time.Duration
}

// Nominal returns min(Base·2ⁿ, Max) for attempt n ≥ 0, without overflow.
func (b Backoff) Nominal(attempt int) time.Duration {
	d := b.Base
	for i := 0; i < attempt && d < b.Max; i++ {
		if d > b.Max/2 {
			return b.Max
		}
		d *= 2
	}
	return min(d, b.Max)
}

// Delay returns the jittered delay of attempt n, drawn with the random word
// u: nominal/2 + (u mod (nominal/2 + 1)). The modulo bias is below 2⁻³⁰ for
// any delay under a day, far beneath what jitter needs.
func (b Backoff) Delay(attempt int, u uint64) time.Duration {
	d := b.Nominal(attempt)
	if d <= 0 {
		return 0
	}
	half := d / 2
	return d - half + time.Duration(u%uint64(half+1))
}
