//go:build !unix

package interest

func processCPU() (int64, bool) { return 0, false }
