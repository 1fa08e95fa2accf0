//go:build !unix

package outbox

func processCPU() (int64, bool) { return 0, false }
