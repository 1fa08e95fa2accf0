package main

import (
	"regexp"
	"testing"

	"github.com/shardwise/shardwise/internal/top/toptest"
)

// TestTopOnceShowsEveryNode: "shardwise top --once" against a running
// zone node and economy node finds both through etcd and prints a row of
// numbers for each, then exits.
func TestTopOnceShowsEveryNode(t *testing.T) {
	c := toptest.StartCluster(t)
	out, err := runCmd(t, newRootCmd(), "", "top", "--once", "--endpoints", c.Endpoints)
	if err != nil {
		t.Fatalf("top --once: %v\n%s", err, out)
	}
	t.Logf("top --once:\n%s", out)
	for _, re := range []string{
		`2 node\(s\) scraped`,
		`(?m)^\s*ZONE\s+TICK\s+SIMULATED`,
		`(?m)^\s*zone-a\s+\d+\s+16\s+0\s+16\s`,
		`(?m)^\s*ECON\s+READY\s+VIEW\s+MOVEMENTS`,
		`(?m)^\s*econ-a\s+yes\s+1\s+5\s+0\s+1\s+1\s+5\.0\s+0\s*$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("top --once output does not match %s", re)
		}
	}
}
