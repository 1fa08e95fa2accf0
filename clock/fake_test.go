package clock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func received(ch <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimerFiresAtDeadline(t *testing.T) {
	f := clock.NewFake(epoch)
	tm := f.NewTimer(10 * time.Second)
	f.Advance(9 * time.Second)
	if _, ok := received(tm.C()); ok {
		t.Fatal("timer fired early")
	}
	f.Advance(time.Second)
	v, ok := received(tm.C())
	if !ok || !v.Equal(epoch.Add(10*time.Second)) {
		t.Fatalf("timer: got %v %v", v, ok)
	}
	if tm.Stop() {
		t.Fatal("Stop of a fired timer reported active")
	}
	if f.Waiters() != 0 {
		t.Fatalf("waiters = %d", f.Waiters())
	}
}

func TestFakeTimerStopAndReset(t *testing.T) {
	f := clock.NewFake(epoch)
	tm := f.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer reported inactive")
	}
	f.Advance(time.Hour)
	if _, ok := received(tm.C()); ok {
		t.Fatal("stopped timer fired")
	}
	if tm.Reset(time.Minute) {
		t.Fatal("Reset of a stopped timer reported active")
	}
	f.Advance(time.Minute)
	if _, ok := received(tm.C()); !ok {
		t.Fatal("reset timer did not fire")
	}
}

func TestFakeZeroTimerFiresAtOnce(t *testing.T) {
	f := clock.NewFake(epoch)
	tm := f.NewTimer(0)
	if _, ok := received(tm.C()); !ok {
		t.Fatal("zero timer did not fire")
	}
}

func TestFakeTickerDropsWhenFull(t *testing.T) {
	f := clock.NewFake(epoch)
	tk := f.NewTicker(time.Second)
	f.Advance(5 * time.Second)
	v, ok := received(tk.C())
	if !ok || !v.Equal(epoch.Add(time.Second)) {
		t.Fatalf("first tick: %v %v", v, ok)
	}
	if _, ok := received(tk.C()); ok {
		t.Fatal("ticker buffered more than one tick")
	}
	f.Advance(time.Second)
	if v, ok := received(tk.C()); !ok || !v.Equal(epoch.Add(6*time.Second)) {
		t.Fatalf("next tick: %v %v", v, ok)
	}
	tk.Reset(10 * time.Second)
	f.Advance(9 * time.Second)
	if _, ok := received(tk.C()); ok {
		t.Fatal("reset ticker fired early")
	}
	tk.Stop()
	f.Advance(time.Hour)
	if _, ok := received(tk.C()); ok {
		t.Fatal("stopped ticker fired")
	}
}

func TestFakeOrder(t *testing.T) {
	f := clock.NewFake(epoch)
	a := f.NewTimer(3 * time.Second)
	b := f.NewTimer(1 * time.Second)
	c := f.NewTimer(2 * time.Second)
	if d, ok := f.NextDeadline(); !ok || !d.Equal(epoch.Add(time.Second)) {
		t.Fatalf("NextDeadline = %v %v", d, ok)
	}
	f.Advance(10 * time.Second)
	for i, tm := range []clock.Timer{b, c, a} {
		v, ok := received(tm.C())
		if !ok || !v.Equal(epoch.Add(time.Duration(i+1)*time.Second)) {
			t.Fatalf("timer %d: %v %v", i, v, ok)
		}
	}
	if !f.Now().Equal(epoch.Add(10 * time.Second)) {
		t.Fatalf("Now = %v", f.Now())
	}
}

func TestBlockUntilAndSleep(t *testing.T) {
	f := clock.NewFake(epoch)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs <- clock.Sleep(ctx, f, time.Minute)
	}()
	if err := f.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Minute)
	wg.Wait()
	if err := <-errs; err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	short, cancelShort := context.WithCancel(ctx)
	cancelShort()
	if err := f.BlockUntil(short, 5); err == nil {
		t.Fatal("BlockUntil on a cancelled context returned nil")
	}
	if err := clock.Sleep(short, f, time.Minute); err == nil {
		t.Fatal("Sleep on a cancelled context returned nil")
	}
}

func TestSetBackwardsFiresNothing(t *testing.T) {
	f := clock.NewFake(epoch)
	tm := f.NewTimer(time.Second)
	f.Set(epoch.Add(-time.Hour))
	if _, ok := received(tm.C()); ok {
		t.Fatal("fired on a backwards Set")
	}
	f.Set(epoch)
	if _, ok := received(tm.C()); ok {
		t.Fatal("fired before its deadline")
	}
	f.Set(epoch.Add(time.Second))
	if _, ok := received(tm.C()); !ok {
		t.Fatal("timer did not fire")
	}
}

func TestRealClock(t *testing.T) {
	c := clock.OrReal(nil)
	before := time.Now()
	if c.Now().Before(before) {
		t.Fatal("real clock behind time.Now")
	}
	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	tk := c.NewTicker(time.Millisecond)
	<-tk.C()
	tk.Stop()
}

func ExampleFake() {
	f := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t := f.NewTimer(5 * time.Second)
	f.Advance(5 * time.Second)
	fmt.Println((<-t.C()).Format(time.TimeOnly))
	// Output: 00:00:05
}
