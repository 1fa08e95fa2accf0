package ecs

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/shardwise/shardwise/errcode"
)

// Tick describes one simulation step. Time inside the simulation is counted
// in ticks, never read from a clock, so a run is reproducible: Elapsed is
// N × Interval even when Run dropped a backlog.
type Tick struct {
	// N is 1 for the first tick of the World.
	N uint64
	// Interval is the fixed step.
	Interval time.Duration
	// Elapsed is the simulated time at the end of this tick: N × Interval.
	Elapsed time.Duration
}

// Seconds returns Interval in seconds, for speeds in units per second.
func (t Tick) Seconds() float64 { return t.Interval.Seconds() }

// Schedule says on which ticks a system runs. The zero Schedule is every
// tick.
type Schedule struct {
	kind scheduleKind
	n    int64
	d    time.Duration
}

type scheduleKind uint8

const (
	scheduleEveryTick scheduleKind = iota
	scheduleEveryNTicks
	scheduleEvery
)

// EveryTick runs a system on every tick.
func EveryTick() Schedule { return Schedule{} }

// EveryNTicks runs a system on ticks n, 2n, 3n, … (n ≥ 1).
func EveryNTicks(n int) Schedule { return Schedule{kind: scheduleEveryNTicks, n: int64(n)} }

// Every runs a system on the first tick whose simulated time reaches each
// multiple of d (d, 2d, …; d > 0); a d shorter than the tick runs it every
// tick.
func Every(d time.Duration) Schedule { return Schedule{kind: scheduleEvery, d: d} }

func (s Schedule) validate(system string) error {
	switch {
	case s.kind == scheduleEveryNTicks && s.n < 1:
		return errcode.Config("System("+system+").Schedule", s.n, "EveryNTicks needs n >= 1")
	case s.kind == scheduleEvery && s.d <= 0:
		return errcode.Config("System("+system+").Schedule", s.d, "Every needs a positive interval")
	}
	return nil
}

// System is one piece of game logic run by the tick.
type System struct {
	// Name is unique within the World; it names the system in logs and stats.
	Name string
	// Order sorts systems within a tick, lowest first; ties run in the
	// order they were added.
	Order int
	// Schedule says on which ticks it runs; the zero value is every tick.
	Schedule Schedule
	// Run is the system. Structural changes it makes are applied after the
	// last system of the tick.
	Run func(w *World, t Tick)
}

type systemEntry struct {
	System
	seq     int
	nextDue time.Duration // for Every(d)
}

func (e *systemEntry) due(t Tick) bool {
	switch e.Schedule.kind {
	case scheduleEveryNTicks:
		return t.N%uint64(e.Schedule.n) == 0
	case scheduleEvery:
		if t.Elapsed < e.nextDue {
			return false
		}
		for e.nextDue <= t.Elapsed {
			e.nextDue += e.Schedule.d
		}
		return true
	default:
		return true
	}
}

// AddSystem adds a system. Added during a tick, it runs from the next one.
func (w *World) AddSystem(s System) error {
	if s.Name == "" {
		return errcode.Config("System.Name", s.Name, "must not be empty")
	}
	if s.Run == nil {
		return errcode.Config("System("+s.Name+").Run", nil, "must not be nil")
	}
	if err := s.Schedule.validate(s.Name); err != nil {
		return err
	}
	for _, e := range w.systems {
		if e.Name == s.Name {
			return ErrDuplicateSystem.Wrap("%q", s.Name)
		}
	}
	w.systemSeq++
	e := &systemEntry{System: s, seq: w.systemSeq, nextDue: s.Schedule.d}
	// Replace rather than mutate: a tick in progress keeps walking the
	// slice it started with.
	next := append(slices.Clip(w.systems), e)
	slices.SortStableFunc(next, func(a, b *systemEntry) int {
		if a.Order != b.Order {
			return a.Order - b.Order
		}
		return a.seq - b.seq
	})
	w.systems = next
	return nil
}

// OnTickEnd registers a hook run at the end of every tick, after the
// deferred structural changes of the systems are applied: the place to
// reindex moved entities and flush an outbox. Changes made by a hook are
// immediate.
func (w *World) OnTickEnd(fn func(w *World, t Tick)) { w.tickEnd = append(w.tickEnd, fn) }

// CurrentTick returns the tick in progress, or the last one run.
func (w *World) CurrentTick() Tick { return w.curTick }

// Step runs one tick now, on the calling goroutine: it drains the command
// queue, runs the due systems in order with structural changes deferred,
// applies those changes, then runs the tick-end hooks. Tests and
// simulations call it directly; Run calls it from the clock. It must not be
// called from inside a tick, nor while Run is active on another goroutine.
func (w *World) Step() Tick {
	if w.inSystems {
		panic("ecs: Step called from inside a tick")
	}
	w.tick++
	t := Tick{N: w.tick, Interval: w.cfg.TickInterval, Elapsed: time.Duration(w.tick) * w.cfg.TickInterval}
	w.curTick = t
	w.drainCommands()

	systems := w.systems
	w.inSystems = true
	w.deferDepth++
	func() {
		// Restore the World's state even if a system panics, so a caller
		// that recovers does not find it stuck in deferral.
		defer func() {
			w.inSystems = false
			w.deferDepth--
		}()
		for _, s := range systems {
			if s.due(t) {
				s.Run(w, t)
			}
		}
	}()
	if w.deferDepth == 0 && len(w.ops) > 0 {
		w.flush()
	}
	for _, fn := range w.tickEnd {
		fn(w, t)
	}
	w.ticksRun.Add(1)
	return t
}

// Stats counts what Run did. Safe from any goroutine.
type Stats struct {
	// Ticks is how many ticks ran (by Run or Step).
	Ticks uint64
	// CatchUp is how many extra ticks Run ran back to back, after the
	// first, to catch up after a stall.
	CatchUp uint64
	// Dropped is how many due ticks were skipped because the backlog was
	// longer than MaxCatchUpSteps.
	Dropped uint64
}

// Stats returns the counters.
func (w *World) Stats() Stats {
	return Stats{Ticks: w.ticksRun.Load(), CatchUp: w.catchUpRun.Load(), Dropped: w.ticksLost.Load()}
}

// Run owns the World: it runs a tick every TickInterval of the injected
// clock until ctx is done, then returns nil. After a stall it runs at most
// MaxCatchUpSteps ticks back to back and drops (and counts) the rest of the
// backlog, so the simulation slows down instead of spiralling. The
// goroutine calling Run is the World's owner for as long as it runs.
func (w *World) Run(ctx context.Context) error {
	if !w.runActive.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer w.runActive.Store(false)
	if w.isClosed() {
		return ErrClosed
	}
	c := w.cfg.Clock
	step := w.cfg.TickInterval
	next := c.Now().Add(step)
	timer := c.NewTimer(step)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
		}
		now := c.Now()
		if now.Before(next) { // woke early (clock set back): wait again
			timer.Reset(next.Sub(now))
			continue
		}
		due := 1 + int64(now.Sub(next)/step)
		run := min(due, int64(w.cfg.MaxCatchUpSteps))
		for i := int64(0); i < run; i++ {
			if ctx.Err() != nil {
				return nil
			}
			w.Step()
			if i > 0 {
				w.catchUpRun.Add(1)
			}
		}
		if lost := due - run; lost > 0 {
			w.ticksLost.Add(uint64(lost))
			w.cfg.Logger.Warn("ecs: tick backlog dropped", "dropped", lost, "tick", w.tick)
		}
		next = next.Add(time.Duration(due) * step)
		timer.Reset(next.Sub(c.Now()))
	}
}

// command is one function queued for the owner goroutine.
type command struct {
	fn    func(*World)
	done  chan struct{} // nil for Post
	state atomic.Int32  // cmdPending → cmdStarted | cmdCancelled | cmdRefused
}

const (
	cmdPending int32 = iota
	cmdStarted
	cmdCancelled
	cmdRefused
)

// Do queues fn to run on the owner goroutine at the start of the next tick
// and waits for it. It returns nil once fn has run, ErrClosed if the World
// is closed before fn started, or ctx's error if ctx ended first, in which
// case fn will not run. It must not be called from the owner goroutine
// (inside a system or a hook), which would wait for itself.
func (w *World) Do(ctx context.Context, fn func(*World)) error {
	cmd := &command{fn: fn, done: make(chan struct{})}
	if err := w.enqueue(cmd); err != nil {
		return err
	}
	select {
	case <-cmd.done:
	case <-ctx.Done():
		if cmd.state.CompareAndSwap(cmdPending, cmdCancelled) {
			return ctx.Err()
		}
		<-cmd.done // already started (or refused): its outcome stands
	}
	if cmd.state.Load() == cmdRefused {
		return ErrClosed
	}
	return nil
}

// Post queues fn to run on the owner goroutine at the start of the next
// tick without waiting. It returns ErrClosed if the World is closed.
func (w *World) Post(fn func(*World)) error {
	return w.enqueue(&command{fn: fn})
}

func (w *World) enqueue(cmd *command) error {
	w.cmdMu.Lock()
	defer w.cmdMu.Unlock()
	if w.closed {
		return ErrClosed
	}
	w.cmds = append(w.cmds, cmd)
	return nil
}

// QueuedCommands returns how many commands wait for the next tick. Safe
// from any goroutine.
func (w *World) QueuedCommands() int {
	w.cmdMu.Lock()
	defer w.cmdMu.Unlock()
	return len(w.cmds)
}

func (w *World) isClosed() bool {
	w.cmdMu.Lock()
	defer w.cmdMu.Unlock()
	return w.closed
}

// drainCommands runs every queued command, in arrival order. Commands
// queued by a command run in the next tick.
func (w *World) drainCommands() {
	w.cmdMu.Lock()
	batch := w.cmds
	w.cmds = w.spare[:0]
	w.cmdMu.Unlock()
	for i, cmd := range batch {
		batch[i] = nil
		if !cmd.state.CompareAndSwap(cmdPending, cmdStarted) {
			continue // its Do gave up
		}
		func() {
			if cmd.done != nil {
				defer close(cmd.done)
			}
			cmd.fn(w)
		}()
	}
	w.spare = batch[:0]
}

// Close refuses every queued and future command with ErrClosed, and makes a
// later Run return ErrClosed. It does not stop an active Run (cancel its
// context). Close is idempotent and safe from any goroutine.
func (w *World) Close() error {
	w.cmdMu.Lock()
	if w.closed {
		w.cmdMu.Unlock()
		return nil
	}
	w.closed = true
	batch := w.cmds
	w.cmds = nil
	w.cmdMu.Unlock()
	for _, cmd := range batch {
		if cmd.state.CompareAndSwap(cmdPending, cmdRefused) && cmd.done != nil {
			close(cmd.done)
		}
	}
	return nil
}
