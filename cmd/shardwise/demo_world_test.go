package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
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
