// Package benchout reads the output of `go test -bench -benchmem`: every
// metric of every benchmark line, by benchmark name (without the -GOMAXPROCS
// suffix) and unit, over all the runs of a -count.
package benchout

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Result is the runs of one benchmark: every metric on its lines, by unit
// ("ns/op", "B/op", "allocs/op", custom units).
type Result struct {
	Metrics map[string][]float64
}

// Median returns the median of a metric over the runs, and whether the
// benchmark reported it.
func (r *Result) Median(unit string) (float64, bool) {
	if r == nil {
		return 0, false
	}
	s := slices.Clone(r.Metrics[unit])
	if len(s) == 0 {
		return 0, false
	}
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

// Set is every benchmark of one output, by name.
type Set struct {
	Results map[string]*Result
	CPU     string // the "cpu:" line
	Runs    int    // the most runs any benchmark had
}

// Median is Results[name].Median(unit).
func (s *Set) Median(name, unit string) (float64, bool) {
	return s.Results[name].Median(unit)
}

var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// Parse reads benchmark output. Lines that are not benchmark results are
// skipped, except "cpu: …".
func Parse(r io.Reader) (*Set, error) {
	set := &Set{Results: map[string]*Result{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if c, ok := strings.CutPrefix(line, "cpu: "); ok {
			set.CPU = c
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		res := set.Results[m[1]]
		if res == nil {
			res = &Result{Metrics: map[string][]float64{}}
			set.Results[m[1]] = res
		}
		// The rest of the line is "value unit" pairs.
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				res.Metrics[f[i+1]] = append(res.Metrics[f[i+1]], v)
			}
		}
		set.Runs = max(set.Runs, len(res.Metrics["ns/op"]))
	}
	return set, sc.Err()
}
