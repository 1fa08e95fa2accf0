package ecs_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/errcode"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestSystemsRunInOrder(t *testing.T) {
	w := must(ecs.New(ecs.Config{}))
	var ran []string
	add := func(name string, order int) {
		if err := w.AddSystem(ecs.System{Name: name, Order: order, Run: func(*ecs.World, ecs.Tick) { ran = append(ran, name) }}); err != nil {
			t.Fatal(err)
		}
	}
	add("c", 10)
	add("a", -5)
	add("b", 10) // same order as c: after it, by registration
	add("d", 0)
	w.Step()
	if !slices.Equal(ran, []string{"a", "d", "c", "b"}) {
		t.Fatalf("order = %v", ran)
	}
	if err := w.AddSystem(ecs.System{Name: "a", Run: func(*ecs.World, ecs.Tick) {}}); !errors.Is(err, ecs.ErrDuplicateSystem) {
		t.Fatalf("duplicate name: %v", err)
	}
}

func TestAddSystemValidates(t *testing.T) {
	w := must(ecs.New(ecs.Config{}))
	noop := func(*ecs.World, ecs.Tick) {}
	cases := []struct {
		name string
		s    ecs.System
	}{
		{"no name", ecs.System{Run: noop}},
		{"no run", ecs.System{Name: "x"}},
		{"zero n", ecs.System{Name: "x", Run: noop, Schedule: ecs.EveryNTicks(0)}},
		{"negative n", ecs.System{Name: "x", Run: noop, Schedule: ecs.EveryNTicks(-3)}},
		{"zero d", ecs.System{Name: "x", Run: noop, Schedule: ecs.Every(0)}},
	}
	for _, c := range cases {
		if err := w.AddSystem(c.s); !errors.Is(err, errcode.ErrConfigInvalid) {
			t.Errorf("%s: err = %v", c.name, err)
		}
	}
}

func TestSchedules(t *testing.T) {
	w := must(ecs.New(ecs.Config{TickInterval: 50 * time.Millisecond}))
	runs := map[string][]uint64{}
	for _, s := range []struct {
		name string
		sch  ecs.Schedule
	}{
		{"every", ecs.EveryTick()},
		{"zero", ecs.Schedule{}},
		{"n4", ecs.EveryNTicks(4)},
		{"n1", ecs.EveryNTicks(1)},
		{"120ms", ecs.Every(120 * time.Millisecond)},
		{"1s", ecs.Every(time.Second)},
		{"10ms", ecs.Every(10 * time.Millisecond)},
	} {
		name := s.name
		if err := w.AddSystem(ecs.System{Name: name, Schedule: s.sch, Run: func(_ *ecs.World, tk ecs.Tick) {
			runs[name] = append(runs[name], tk.N)
		}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 40 {
		w.Step()
	}
	seq := func(from, to, by uint64) []uint64 {
		var out []uint64
		for n := from; n <= to; n += by {
			out = append(out, n)
		}
		return out
	}
	want := map[string][]uint64{
		"every": seq(1, 40, 1),
		"zero":  seq(1, 40, 1),
		"n4":    seq(4, 40, 4),
		"n1":    seq(1, 40, 1),
		// 120 ms multiples reached at ticks 3 (150ms ≥ 120), 5 (250 ≥ 240),
		// 8 (400 ≥ 360), 10 (500 ≥ 480), 12 (600 ≥ 600), …
		"120ms": {3, 5, 8, 10, 12, 15, 17, 20, 22, 24, 27, 29, 32, 34, 36, 39},
		"1s":    {20, 40},
		"10ms":  seq(1, 40, 1),
	}
	for name, w := range want {
		if !slices.Equal(runs[name], w) {
			t.Errorf("%s ran on %v, want %v", name, runs[name], w)
		}
	}
}

func TestTickDefersStructuralChangesToTheEnd(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	f.spawn(t, 1, &Pos{}, nil, &Health{0})
	f.spawn(t, 2, &Pos{}, nil, nil)
	var log []string
	f.w.OnDestroy(func(_ *ecs.World, id ecs.ID) { log = append(log, "destroy") })
	must(0, f.w.AddSystem(ecs.System{Name: "death", Order: 1, Run: func(w *ecs.World, _ ecs.Tick) {
		ecs.NewQuery1(f.health).Each(func(id ecs.ID, h *Health) {
			if h.HP <= 0 {
				_ = w.Destroy(id)
			}
		})
		_ = f.vel.Add(2, Vel{1, 1})
		if err := w.CreateEntity(3); err != nil { // never deferred
			t.Error(err)
		}
		_ = f.pos.Add(3, Pos{3, 3})
		log = append(log, "death")
	}}))
	must(0, f.w.AddSystem(ecs.System{Name: "later", Order: 2, Run: func(w *ecs.World, _ ecs.Tick) {
		if !w.Alive(1) || f.vel.Has(2) || f.pos.Has(3) || !w.Alive(3) {
			t.Error("a later system of the same tick saw a structural change early")
		}
		log = append(log, "later")
	}}))
	f.w.OnTickEnd(func(w *ecs.World, _ ecs.Tick) {
		if w.Alive(1) || !f.vel.Has(2) || !f.pos.Has(3) {
			t.Error("tick-end hook did not see the applied changes")
		}
		if w.Deferring() {
			t.Error("tick-end hook runs deferred")
		}
		log = append(log, "end")
	})
	f.w.Step()
	if !slices.Equal(log, []string{"death", "later", "destroy", "end"}) {
		t.Fatalf("log = %v", log)
	}
}

func TestStepRecoversFromPanickingSystem(t *testing.T) {
	f := newFixture(t, ecs.Config{})
	must(0, f.w.AddSystem(ecs.System{Name: "boom", Run: func(*ecs.World, ecs.Tick) { panic("boom") }}))
	func() {
		defer func() { _ = recover() }()
		f.w.Step()
	}()
	if f.w.Deferring() {
		t.Fatal("a panic left the World deferring")
	}
}

// TestRunCatchUpUnderFakeClock: after a stall of ten ticks, Run runs three
// back to back and drops and counts seven; the tick grid does not drift.
func TestRunCatchUpUnderFakeClock(t *testing.T) {
	fc := clock.NewFake(t0)
	w := must(ecs.New(ecs.Config{Clock: fc}))
	var ticks []uint64
	var mu sync.Mutex
	must(0, w.AddSystem(ecs.System{Name: "count", Run: func(_ *ecs.World, tk ecs.Tick) {
		mu.Lock()
		ticks = append(ticks, tk.N)
		mu.Unlock()
	}}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	}()
	wait := func() {
		t.Helper()
		bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer bcancel()
		if err := fc.BlockUntil(bctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	wait()
	// On time: one tick per interval.
	for range 2 {
		fc.Advance(50 * time.Millisecond)
		wait()
	}
	if s := w.Stats(); s.Ticks != 2 || s.Dropped != 0 || s.CatchUp != 0 {
		t.Fatalf("on time: %+v", s)
	}
	// Less than a tick: nothing runs.
	fc.Advance(20 * time.Millisecond)
	wait()
	if s := w.Stats(); s.Ticks != 2 {
		t.Fatalf("early: %+v", s)
	}
	// A stall: 10 ticks are due (the one 30ms away plus nine more).
	fc.Advance(30*time.Millisecond + 9*50*time.Millisecond + 10*time.Millisecond)
	wait()
	if s := w.Stats(); s.Ticks != 5 || s.CatchUp != 2 || s.Dropped != 7 {
		t.Fatalf("after stall: %+v", s)
	}
	// Back on the grid: the next tick is 40 ms away, not 50.
	fc.Advance(39 * time.Millisecond)
	wait()
	if s := w.Stats(); s.Ticks != 5 {
		t.Fatalf("grid drifted: %+v", s)
	}
	fc.Advance(time.Millisecond)
	wait()
	if s := w.Stats(); s.Ticks != 6 {
		t.Fatalf("grid: %+v", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(ticks, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("tick numbers %v", ticks)
	}
}

func TestRunTwiceIsRefused(t *testing.T) {
	fc := clock.NewFake(t0)
	w := must(ecs.New(ecs.Config{Clock: fc}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); !errors.Is(err, ecs.ErrRunning) {
		t.Fatalf("second Run: %v", err)
	}
	cancel()
	<-done
}

// TestCommandQueueFromOtherGoroutines: many goroutines create entities
// through Do and Post while Run owns the World; every command runs on the
// owner, at the start of a tick, exactly once.
func TestCommandQueueFromOtherGoroutines(t *testing.T) {
	fc := clock.NewFake(t0)
	f := newFixture(t, ecs.Config{Clock: fc})
	var tickStarts []int // entities alive when the first system of each tick ran
	must(0, f.w.AddSystem(ecs.System{Name: "observe", Run: func(w *ecs.World, _ ecs.Tick) {
		tickStarts = append(tickStarts, w.Len())
	}}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := make(chan error, 1)
	go func() { runDone <- f.w.Run(ctx) }()

	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := ecs.ID(1 + g*each + i)
				fn := func(w *ecs.World) {
					if !w.Deferring() && w.CreateEntity(id) == nil {
						_ = f.pos.Add(id, Pos{X: float64(id)})
						return
					}
					errs <- errors.New("command ran deferred or twice")
				}
				if i%2 == 0 {
					if err := f.w.Do(ctx, fn); err != nil {
						errs <- err
					}
				} else if err := f.w.Post(fn); err != nil {
					errs <- err
				}
			}
		}()
	}
	// Drive the clock until every worker is done and one more tick ran to
	// drain the last Posts.
	workersDone := make(chan struct{})
	go func() { wg.Wait(); close(workersDone) }()
	deadline := time.Now().Add(20 * time.Second)
	for finished := false; ; {
		if time.Now().After(deadline) {
			t.Fatal("commands did not finish")
		}
		select {
		case <-workersDone:
			finished = true
		default:
		}
		bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
		if err := fc.BlockUntil(bctx, 1); err != nil {
			bcancel()
			t.Fatal(err)
		}
		bcancel()
		fc.Advance(50 * time.Millisecond)
		if finished {
			break
		}
	}
	// Read the result on the owner through Do, advancing the clock for it.
	// Do's command queued after every Post, so it sees them all.
	got := make(chan int, 1)
	go func() {
		_ = f.w.Do(ctx, func(w *ecs.World) { got <- w.Len() })
	}()
	var n int
	for waiting := true; waiting; {
		select {
		case n = <-got:
			waiting = false
		default:
			bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
			err := fc.BlockUntil(bctx, 1)
			bcancel()
			if err != nil {
				t.Fatal(err)
			}
			fc.Advance(50 * time.Millisecond)
			if time.Now().After(deadline) {
				t.Fatal("final Do did not run")
			}
		}
	}
	cancel()
	if err := <-runDone; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n != workers*each || f.pos.Len() != workers*each {
		t.Fatalf("alive %d, pos %d, want %d", n, f.pos.Len(), workers*each)
	}
	if !slices.IsSorted(tickStarts) {
		t.Fatalf("entity count went down between ticks: %v", tickStarts)
	}
}

func waitQueued(t *testing.T, w *ecs.World, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for w.QueuedCommands() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d commands never queued", n)
		}
		<-time.After(time.Millisecond) // polling interval: do not spin on a shared CPU
	}
}

func TestDoCancelledBeforeTickNeverRuns(t *testing.T) {
	w := must(ecs.New(ecs.Config{}))
	ran := false
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Do(ctx, func(*ecs.World) { ran = true }) }()
	waitQueued(t, w, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	w.Step()
	if ran {
		t.Fatal("a cancelled command ran")
	}
}

func TestDoAfterStepRuns(t *testing.T) {
	w := must(ecs.New(ecs.Config{}))
	done := make(chan error, 1)
	ran := make(chan uint64, 1)
	go func() {
		done <- w.Do(context.Background(), func(w *ecs.World) { ran <- w.CurrentTick().N })
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.Step()
		select {
		case n := <-ran:
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Fatal("command did not run inside a tick")
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("command never ran")
		}
		<-time.After(time.Millisecond) // polling interval: do not spin on a shared CPU
	}
}

func TestCloseRefusesCommands(t *testing.T) {
	w := must(ecs.New(ecs.Config{}))
	ran := false
	errCh := make(chan error, 1)
	go func() { errCh <- w.Do(context.Background(), func(*ecs.World) { ran = true }) }()
	waitQueued(t, w, 1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal("Close is not idempotent")
	}
	if err := <-errCh; !errors.Is(err, ecs.ErrClosed) {
		t.Fatalf("queued Do after Close: %v", err)
	}
	w.Step()
	if ran {
		t.Fatal("a refused command ran")
	}
	if err := w.Post(func(*ecs.World) {}); !errors.Is(err, ecs.ErrClosed) {
		t.Fatalf("Post after Close: %v", err)
	}
	if err := w.Run(context.Background()); !errors.Is(err, ecs.ErrClosed) {
		t.Fatalf("Run after Close: %v", err)
	}
}
