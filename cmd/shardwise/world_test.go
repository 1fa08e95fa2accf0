package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// An interrupted world run prints the statistics of the ticks it ran
// (here none: the interrupt came first), not only the context's error,
// and exits cleanly, as zone does.
func TestWorldPrintsPartialStatisticsOnInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"world", "--ticks", "1000000", "--players", "2"})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("world after an interrupt: %v\n%s", err, out.String())
	}
	for _, want := range []string{"world: interrupted after 0 of 1000000 ticks\n", "ticks 0  players 2", "tick time  p50"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
