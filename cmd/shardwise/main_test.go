package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/internal/testenv"
)

// asShardwise, set to 1 in a process's environment, makes this test
// binary run as the shardwise command itself: the tests that need real
// processes re-execute it (built once, with the test's flags, -race
// included) instead of building the command a second time.
const asShardwise = "SHARDWISE_TEST_AS_COMMAND"

// Which tests run in parallel. The package's tests are the suite's longest
// (issue 28): most of their wall clock is spent waiting for processes,
// leases and bots walking, so the tests that start a cluster of their own
// and measure no timing call t.Parallel (TestZoneGatewaysServeBots,
// TestZoneTwoNodes, TestRegionsApplyMovesARegionBetweenZoneProcesses,
// TestZoneEconomyPaysLoot, TestDevServesEtcdForTheOtherCommands,
// TestEconIssue27Sequences, TestVerboseShowsItsEvents). Go runs them
// together after every sequential test has finished, so the tests whose
// property is a timing or a lease under a short TTL stay sequential and
// run with nothing of this package beside them: the failover SIGKILL
// tests (zone and economy, TTL 1–2 s), the network-namespace tests
// (partition, link latency), and the tests that set the environment.
func TestMain(m *testing.M) {
	if os.Getenv(asShardwise) == "1" {
		main() // exits 1 itself on an error
		os.Exit(0)
	}
	code := m.Run()
	removeE2EBinary()
	os.Exit(code)
}

// pollEvery is testenv.PollUntil calling cond every interval rather than
// every millisecond, for a condition that costs a query: the economy
// SIGKILL tests wait seconds for a store's unsettled list to change, and
// listing it a thousand times a second was a twentieth of this package's
// in-process CPU under -race.
func pollEvery(t *testing.T, limit, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		<-time.After(interval) // polling interval, not a synchronisation
	}
}

// shardwiseCommand is the command line "shardwise args..." as a process.
func shardwiseCommand(t *testing.T, ctx context.Context, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), asShardwise+"=1", "GORACE="+noExitSleep(os.Getenv("GORACE")))
	return cmd
}

// noExitSleep returns the race detector's options gorace (GORACE) with
// atexit_sleep_ms=0 added. The race runtime sleeps a second before every
// exit by default (atexit_sleep_ms=1000), so that other goroutines can
// finish a report; the command's process here is this test binary, race
// built, so every "shardwise" run waited that second for nothing (1.3 s
// of wall for a command of 0.05 s of CPU), and the tests that run several
// in a row waited seconds. A race is still reported where it is found,
// and the process still exits 66 on one. An atexit_sleep_ms in GORACE
// wins.
func noExitSleep(gorace string) string {
	if strings.Contains(gorace, "atexit_sleep_ms=") {
		return gorace
	}
	return strings.TrimSpace(gorace + " atexit_sleep_ms=0")
}

// runShardwise runs "shardwise args..." as a process to its end and
// returns its standard output; it fails the test, with the process's
// standard error, unless the process exits 0 within 30 seconds.
func runShardwise(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := shardwiseCommand(t, ctx, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("shardwise %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// shardwiseProcess is a long-running "shardwise" process, its standard
// output and error gathered in one buffer.
type shardwiseProcess struct {
	cmd  *exec.Cmd
	out  testenv.Buffer
	done chan struct{} // closed once the process has exited and its output is read
	err  error         // Wait's result, set before done closes
}

// startShardwise starts "shardwise args..." as a process. The test's
// cleanup interrupts it if it still runs (SIGINT, as an operator's ^C),
// kills it if it has not exited 10 seconds later, and logs its output.
func startShardwise(t *testing.T, args ...string) *shardwiseProcess {
	t.Helper()
	p := &shardwiseProcess{done: make(chan struct{})}
	p.cmd = shardwiseCommand(t, context.Background(), args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			if err := p.stop(10 * time.Second); errors.Is(err, errStillRunning) {
				t.Errorf("shardwise %s: %v", strings.Join(args, " "), err)
			}
		}
		t.Logf("shardwise %s:\n%s", strings.Join(args, " "), p.out.String())
	})
	return p
}

func (p *shardwiseProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// errStillRunning is stop's error for a process that ignored the
// interrupt and was killed.
var errStillRunning = errors.New("still running after the interrupt: killed")

// stop interrupts the process and waits up to grace for it to exit,
// returning how it exited; past grace it kills it. Stopping a process that
// has exited returns how it exited.
func (p *shardwiseProcess) stop(grace time.Duration) error {
	if !p.exited() {
		_ = p.cmd.Process.Signal(os.Interrupt)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return p.err
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return errStillRunning
	}
}
