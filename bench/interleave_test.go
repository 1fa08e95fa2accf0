package bench

import (
	"crypto/sha1"
	"encoding/binary"
	"slices"
	"strconv"
	"testing"
	"time"
)

// The goals compare two costs. On a shared machine the load changes from
// one second to the next, so timing the two in separate benchmarks compares
// different machines. These benchmarks time the candidates in turn, in
// batches of a few hundred lookups, inside one benchmark: every candidate
// sees the same load. They report each candidate's median batch time per
// lookup and the ratio of the medians as custom metrics (the ns/op of the
// benchmark itself is per round of all candidates).

type candidate struct {
	name string
	fn   func(key string)
}

const interleaveBatch = 256

func interleave(b *testing.B, ratioName string, cands ...candidate) {
	b.ReportAllocs()
	samples := make([][]time.Duration, len(cands))
	for i := range samples {
		samples[i] = make([]time.Duration, 0, maxSamples)
	}
	ops := 0
	for b.Loop() {
		for i, c := range cands {
			start := time.Now()
			for j := range interleaveBatch {
				c.fn(keys[(ops+j)&1023])
			}
			if len(samples[i]) < maxSamples {
				samples[i] = append(samples[i], time.Since(start))
			}
		}
		ops += interleaveBatch
	}
	med := make([]float64, len(cands))
	for i, c := range cands {
		slices.Sort(samples[i])
		med[i] = float64(samples[i][len(samples[i])/2].Nanoseconds()) / interleaveBatch
		b.ReportMetric(med[i], c.name+"-ns/lookup")
	}
	b.ReportMetric(med[0]/med[1], ratioName)
}

func sha1Alone(key string) {
	sum := sha1.Sum([]byte(key))
	sinkU32 = binary.BigEndian.Uint32(sum[:4])
}

// BenchmarkGoalCompatible: the compatible ring lookup against SHA-1 of the
// key alone (goal: ratio ≤ 1.3).
func BenchmarkGoalCompatible(b *testing.B) {
	for _, n := range NodeCounts {
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) {
			f := getFixture(n)
			interleave(b, "ring/sha1",
				candidate{"ring", func(k string) { sinkS, _ = f.sha1Ring.Get(k) }},
				candidate{"sha1", sha1Alone})
		})
	}
}

// BenchmarkGoalFast: the fast-hash ring lookup against each peer ring at 100
// nodes (goal: the fastest peer takes ≥ 2× as long).
func BenchmarkGoalFast(b *testing.B) {
	f := getFixture(100)
	ours := candidate{"ours", func(k string) { sinkS, _ = f.fastRing.Get(k) }}
	b.Run("peer=stathat", func(b *testing.B) {
		interleave(b, "peer/ours", candidate{"peer", func(k string) { sinkS, _ = f.stathat(k) }}, ours)
	})
	b.Run("peer=serialx", func(b *testing.B) {
		interleave(b, "peer/ours", candidate{"peer", func(k string) { sinkS, _ = f.serialx(k) }}, ours)
	})
	b.Run("peer=groupcache", func(b *testing.B) {
		interleave(b, "peer/ours", candidate{"peer", func(k string) { sinkS = f.groupcach(k) }}, ours)
	})
}
