package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/demo"
)

// TestDemoServeContext: with --serve, Ctrl-C cancels the run while it
// starts, and not once it has started (it ends the play, then the report
// and the shutdown must run to the end).
func TestDemoServeContext(t *testing.T) {
	parent, cancel := context.WithCancel(t.Context())
	ctx, _, stop := serveContext(parent)
	defer stop()
	cancel()
	<-ctx.Done() // the startup is cancelled

	parent, cancel = context.WithCancel(t.Context())
	defer cancel()
	ctx, started, stop := serveContext(parent)
	defer stop()
	started()
	cancel()
	if ctx.Err() != nil {
		t.Fatal("Ctrl-C after the start cancelled the run: the report would be cut short")
	}
	stop()
	if ctx.Err() == nil {
		t.Fatal("stop did not release the context")
	}
}

// TestDemoServeInterruptedWhileStarting: "demo --serve" interrupted before
// the cluster is up returns the interruption at once, with no report.
func TestDemoServeInterruptedWhileStarting(t *testing.T) {
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"demo", "--serve", "--dashboard", ""})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := cmd.ExecuteContext(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "world demo report") || strings.Contains(out.String(), "world demo:") {
		t.Fatalf("a run interrupted while starting started anyway:\n%s", out.String())
	}
}

// TestDemoZoneKillFlags: the zone node kill is on by default (at 60% of
// --duration, the zone nodes' lease 5s), --zone-kill-at moves it and a
// negative one turns it off, --zone-ttl sets the lease; each valid. The
// refusals are TestFlagErrorsNameTheFlag's.
func TestDemoZoneKillFlags(t *testing.T) {
	for _, c := range []struct {
		args     []string
		killAt   time.Duration // after WithDefaults
		ttl      time.Duration
		killedAt string // what the run would do
	}{
		{nil, 18 * time.Second, 5 * time.Second, "at 60% of --duration"},
		{[]string{"--zone-kill-at=-1s"}, -time.Second, 5 * time.Second, "never"},
		{[]string{"--duration=20s", "--zone-kill-at=5s", "--zone-ttl=1s"}, 5 * time.Second, time.Second, "at 5s"},
		{[]string{"--duration=20s"}, 12 * time.Second, 5 * time.Second, "at 60% of --duration"},
	} {
		var cfg demo.WorldConfig
		cmd := newDemoCmdFor(&cfg)
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if err := worldFlags(cmd, &cfg); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		got := cfg.WithDefaults()
		if got.ZoneKillAt != c.killAt || got.ZoneTTL != c.ttl {
			t.Errorf("%v: zone kill at %v, lease %v; want %v (%s), %v", c.args, got.ZoneKillAt, got.ZoneTTL, c.killAt, c.killedAt, c.ttl)
		}
	}
}
