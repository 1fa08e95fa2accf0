// Package clock is the time source every shardwise package with timers takes
// instead of calling the time package directly.
//
// Real returns the wall clock. NewFake returns a clock that moves only when a
// test calls Advance or Set, so timers, tickers, backoff schedules and tick
// loops become deterministic: a test waits for the code under test to arm its
// timers with BlockUntil, then moves time, and never sleeps.
//
// Invariants of Fake: timers fire in deadline order (ties in creation
// order); Advance fires every timer whose deadline is reached, tickers as
// many times as their period fits (a tick whose channel is still full is
// dropped, as with time.Ticker); Now never goes backwards unless Set says so.
package clock
