package router

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestBackoffNominalDoublesToMax(t *testing.T) {
	b := Backoff{Base: 200 * time.Millisecond, Max: 10 * time.Second}
	want := []time.Duration{200, 400, 800, 1600, 3200, 6400, 10000, 10000}
	for n, w := range want {
		if got := b.Nominal(n); got != w*time.Millisecond {
			t.Errorf("Nominal(%d) = %s, want %s", n, got, w*time.Millisecond)
		}
	}
	if got := b.Nominal(math.MaxInt); got != b.Max {
		t.Errorf("Nominal(MaxInt) = %s: overflow", got)
	}
	huge := Backoff{Base: time.Duration(math.MaxInt64 / 3), Max: time.Duration(math.MaxInt64)}
	for n := range 70 {
		if d := huge.Nominal(n); d < huge.Base || d > huge.Max {
			t.Fatalf("Nominal(%d) = %d out of range", n, d)
		}
	}
}

// Equal jitter: every delay lies in [ceil(nominal/2), nominal], both ends
// are reachable, and draws differ (no lockstep).
func TestBackoffDelayIsEqualJitter(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second}
	rng := rand.New(rand.NewPCG(7, 7))
	for n := range 10 {
		d := b.Nominal(n)
		lo := d - d/2
		if got := b.Delay(n, 0); got != lo {
			t.Errorf("Delay(%d, 0) = %s, want %s", n, got, lo)
		}
		if got := b.Delay(n, uint64(d/2)); got != d {
			t.Errorf("Delay(%d, max) = %s, want %s", n, got, d)
		}
		seen := map[time.Duration]bool{}
		for range 200 {
			got := b.Delay(n, rng.Uint64())
			if got < lo || got > d {
				t.Fatalf("Delay(%d) = %s outside [%s, %s]", n, got, lo, d)
			}
			seen[got] = true
		}
		if len(seen) < 100 {
			t.Errorf("attempt %d: only %d distinct delays in 200 draws", n, len(seen))
		}
	}
	if got := (Backoff{}).Delay(3, 12345); got != 0 {
		t.Errorf("zero backoff = %s", got)
	}
}
