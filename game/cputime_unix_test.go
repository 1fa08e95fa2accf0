//go:build unix

package game_test

import "syscall"

// processCPU returns the user+system CPU time of the process so far. The
// benchmark machine is shared, so wall time per tick swings with other
// people's load; the CPU time this process spends swings much less.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
