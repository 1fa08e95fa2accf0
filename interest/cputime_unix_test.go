//go:build unix

package interest

import "syscall"

// processCPU returns the user+system CPU time of the process so far. The
// machine these benchmarks run on is shared, so wall time per op swings
// with other people's load; CPU time spent by this process does much less.
func processCPU() (nanos int64, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), true
}
