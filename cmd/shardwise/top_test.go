package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/internal/testenv"
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

// TestTopRefreshesUntilInterrupted: without --once, top prints a table
// every --every until its context ends (the process's interrupt), then
// returns cleanly.
func TestTopRefreshesUntilInterrupted(t *testing.T) {
	c := toptest.StartCluster(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := newRootCmd()
	var out testenv.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"top", "--every", "50ms", "--endpoints", c.Endpoints})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	testenv.PollUntil(t, 30*time.Second, "three tables", func() bool {
		return strings.Count(out.String(), "shardwise top  ") >= 3
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("top after the interrupt: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("top did not return after its context ended")
	}
	if n := len(regexp.MustCompile(`econ-a\s+yes\s`).FindAllString(out.String(), -1)); n < 3 {
		t.Errorf("%d econ-a rows in three tables:\n%s", n, out.String())
	}
}
