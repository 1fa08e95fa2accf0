package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RequireIntegration reports whether SHARDWISE_REQUIRE_INTEGRATION=1, in
// which case a missing server fails the test instead of skipping it.
func RequireIntegration() bool {
	return os.Getenv("SHARDWISE_REQUIRE_INTEGRATION") == "1"
}

// Unavailable skips tb (or fails it under RequireIntegration) because what
// is missing; how tells the reader how to get it.
func Unavailable(tb testing.TB, what, how string) {
	tb.Helper()
	msg := fmt.Sprintf("INTEGRATION SUITE NOT RUN: %s (%s)", what, how)
	if RequireIntegration() {
		tb.Fatal(msg + "; SHARDWISE_REQUIRE_INTEGRATION=1 makes this a failure")
	}
	tb.Skip(msg)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testenv: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// lookBinary finds name in PATH or in the extra directories (globs allowed).
func lookBinary(name string, extra ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, pattern := range extra {
		matches, _ := filepath.Glob(filepath.Join(pattern, name))
		for i := len(matches) - 1; i >= 0; i-- { // newest version sorts last
			if st, err := os.Stat(matches[i]); err == nil && !st.IsDir() {
				return matches[i], nil
			}
		}
	}
	return "", fmt.Errorf("%s not found in PATH or %s", name, strings.Join(extra, ", "))
}

// waitDial polls addr until it accepts a TCP connection or the deadline passes.
func waitDial(addr string, deadline time.Duration, exited <-chan struct{}) error {
	end := time.Now().Add(deadline)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s did not accept connections within %v: %w", addr, deadline, err)
		}
		select {
		case <-exited:
			return errors.New("server exited before accepting connections")
		case <-time.After(20 * time.Millisecond): // polling interval, not synchronisation
		}
	}
}

// tail returns the last n bytes of a log file, for failure messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := st.Size() - n
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(buf, off)
	return string(buf)
}

// PollUntil calls cond until it holds, failing tb with what once limit has
// passed. It is for conditions only another process can make true (a server
// view, a port opening); within one process, wait on a channel instead.
func PollUntil(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		<-time.After(time.Millisecond) // polling interval: do not spin on a shared CPU
	}
}
