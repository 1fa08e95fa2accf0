package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told to. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	waiters []*fakeWaiter
	changed chan struct{} // closed and replaced whenever waiters change
}

type fakeWaiter struct {
	clock    *Fake
	ch       chan time.Time
	deadline time.Time
	period   time.Duration // > 0 for tickers
	seq      uint64
	active   bool
}

// NewFake returns a fake clock that reads start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns Now().Sub(t).
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// NewTimer returns a timer that fires once when the fake time reaches now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	w := &fakeWaiter{clock: f, ch: make(chan time.Time, 1)}
	f.mu.Lock()
	f.arm(w, d)
	f.moveTo(f.now) // a timer for d <= 0 fires at once
	f.mu.Unlock()
	return (*fakeTimer)(w)
}

// NewTicker returns a ticker with period d; d must be positive.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	w := &fakeWaiter{clock: f, ch: make(chan time.Time, 1), period: d}
	f.mu.Lock()
	f.arm(w, d)
	f.mu.Unlock()
	return (*fakeTicker)(w)
}

// Advance moves the time forward by d, firing every timer and ticker that
// comes due on the way, in deadline order.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.moveTo(f.now.Add(d))
	f.mu.Unlock()
}

// Set moves the time to t. Moving backwards fires nothing; moving forwards
// behaves like Advance.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	if t.Before(f.now) {
		f.now = t
	} else {
		f.moveTo(t)
	}
	f.mu.Unlock()
}

// Waiters returns how many timers and tickers are armed.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// BlockUntil waits until at least n timers and tickers are armed, or ctx is
// done. Tests call it to know that the code under test is waiting on the
// clock before they move it.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.waiters) >= n {
			f.mu.Unlock()
			return nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// NextDeadline returns the earliest armed deadline, if any.
func (f *Fake) NextDeadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.waiters) == 0 {
		return time.Time{}, false
	}
	return f.waiters[0].deadline, true
}

// moveTo fires waiters up to t in order. f.mu is held.
func (f *Fake) moveTo(t time.Time) {
	for len(f.waiters) > 0 && !f.waiters[0].deadline.After(t) {
		w := f.waiters[0]
		f.now = w.deadline
		select {
		case w.ch <- w.deadline:
		default: // a full channel drops the tick, as time.Ticker does
		}
		if w.period > 0 {
			f.remove(w)
			f.arm(w, w.period)
		} else {
			f.remove(w)
		}
	}
	if t.After(f.now) {
		f.now = t
	}
}

// arm (re)inserts w with deadline now+d. f.mu is held.
func (f *Fake) arm(w *fakeWaiter, d time.Duration) {
	if w.active {
		f.remove(w)
	}
	f.seq++
	w.seq = f.seq
	w.deadline = f.now.Add(d)
	w.active = true
	i := sort.Search(len(f.waiters), func(i int) bool {
		o := f.waiters[i]
		return o.deadline.After(w.deadline) || (o.deadline.Equal(w.deadline) && o.seq > w.seq)
	})
	f.waiters = append(f.waiters, nil)
	copy(f.waiters[i+1:], f.waiters[i:])
	f.waiters[i] = w
	f.notify()
}

// remove unlinks w; it reports whether w was armed. f.mu is held.
func (f *Fake) remove(w *fakeWaiter) bool {
	if !w.active {
		return false
	}
	for i, o := range f.waiters {
		if o == w {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			break
		}
	}
	w.active = false
	f.notify()
	return true
}

func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer fakeWaiter

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.remove((*fakeWaiter)(t))
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	was := t.active
	// As with time.Timer since Go 1.23, a reset discards a stale value.
	select {
	case <-t.ch:
	default:
	}
	f.arm((*fakeWaiter)(t), d)
	f.moveTo(f.now)
	return was
}

type fakeTicker fakeWaiter

func (t *fakeTicker) C() <-chan time.Time { return t.ch }

func (t *fakeTicker) Stop() {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	f.remove((*fakeWaiter)(t))
}

func (t *fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	t.period = d
	f.arm((*fakeWaiter)(t), d)
}
