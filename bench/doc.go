// Package bench compares shardwise's placement packages (hashring,
// rendezvous) with other Go libraries, side by side in one run. It is a
// separate module so that the main module never depends on those libraries.
//
// scripts/bench-placement runs the benchmarks and cmd/placement-report, and
// writes docs/bench/placement.md.
package bench
