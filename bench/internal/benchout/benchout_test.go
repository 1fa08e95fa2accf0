package benchout

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	out := `goos: linux
cpu: AMD EPYC
BenchmarkMembership/ring/join/nodes=10-2         	      50	     94442 ns/op	   14615 B/op	     183 allocs/op
BenchmarkMembership/ring/join/nodes=10-2         	      50	     90000 ns/op	   14000 B/op	     180 allocs/op
BenchmarkMembership/ring/join/nodes=10-2         	      50	     99000 ns/op	   15000 B/op	     190 allocs/op
BenchmarkFailoverLatency/nodes=3-2         	     100	      8624 ns/op	      7162 ns-to-replica/op	    1426 B/op	      19 allocs/op
BenchmarkOdd 	 1	 5 ns/op
PASS
`
	set, err := Parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if set.CPU != "AMD EPYC" || set.Runs != 3 {
		t.Fatalf("cpu %q, runs %d", set.CPU, set.Runs)
	}
	if v, ok := set.Median("Membership/ring/join/nodes=10", "ns/op"); !ok || v != 94442 {
		t.Fatalf("median ns/op = %v %v", v, ok)
	}
	if v, ok := set.Median("FailoverLatency/nodes=3", "ns-to-replica/op"); !ok || v != 7162 {
		t.Fatalf("custom unit = %v %v", v, ok)
	}
	if v, ok := set.Median("Odd", "ns/op"); !ok || v != 5 {
		t.Fatalf("name without GOMAXPROCS suffix: %v %v", v, ok)
	}
	if _, ok := set.Median("Missing", "ns/op"); ok {
		t.Fatal("a missing benchmark has a median")
	}
}

func TestMedianEven(t *testing.T) {
	r := &Result{Metrics: map[string][]float64{"ns/op": {4, 1, 3, 2}}}
	if v, _ := r.Median("ns/op"); v != 2.5 {
		t.Fatalf("median = %v, want 2.5", v)
	}
}
