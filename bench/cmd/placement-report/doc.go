// Command placement-report turns one run of the placement benchmarks into
// the markdown page docs/bench/placement.md: lookup cost side by side with
// the peer libraries (from `go test -bench` output), and the measurements
// that need no timer (keys moved on a membership change, load spread),
// computed here over the same implementations.
//
// Usage:
//
//	placement-report -bench raw.txt -cmd "scripts/bench-placement" [-keys 1000000] [-movekeys 200000]
package main
