package bench

import (
	"slices"
	"testing"
	"time"
)

// The machine these numbers come from is shared: other processes take the
// CPU away for milliseconds at a time, and the ns/op that the testing
// package reports (wall time over all iterations) swallows those pauses.
// loop therefore also timestamps every batch of about 20µs of lookups and
// reports the median batch as "med-ns/op": a batch that was preempted is an
// outlier, and the median ignores it. The report uses med-ns/op.

const (
	batchTarget = 20 * time.Microsecond
	maxSamples  = 1 << 14
)

// loop runs fn(i) once per benchmark iteration, i counting up.
func loop(b *testing.B, fn func(i int)) {
	b.ReportAllocs()
	// Calibrate the batch size; this runs before b.Loop resets the timer.
	start := time.Now()
	for i := range 64 {
		fn(i)
	}
	per := max(time.Since(start)/64, 1)
	batch := int(min(max(batchTarget/per, 1), 4096))

	samples := make([]time.Duration, 0, maxSamples)
	n, i := 0, 0
	last := time.Now()
	for b.Loop() {
		fn(i)
		i++
		if n++; n == batch {
			now := time.Now()
			if len(samples) < maxSamples {
				samples = append(samples, now.Sub(last))
			}
			last, n = now, 0
		}
	}
	if len(samples) > 0 {
		slices.Sort(samples)
		b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds())/float64(batch), "med-ns/op")
	}
}
