package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/zone/zonecli"
)

// runMainEnv makes the test binary run main instead of the tests, so that
// a test can run the program itself, exit status included.
const runMainEnv = "WANDER_ZONE_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runMain runs the program with args and returns its output and exit
// status.
func runMain(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestHelpListsTheZoneFlags: the program is the zone command, every node
// flag of "shardwise zone" and the module's own, and none of the
// reference game's.
func TestHelpListsTheZoneFlags(t *testing.T) {
	out, errOut, code := runMain(t, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d\n%s", code, errOut)
	}
	for _, f := range []string{"--endpoints", "--name", "--certs", "--listen", "--metrics", "--dashboard", "--gateway", "--login-pub",
		"--world-store", "--directory", "--ttl", "--ticks", "--tick", "--seed", "--no-handoff",
		"--entities", "--accounts", "--area", "--roam"} {
		if !strings.Contains(out, "      "+f+" ") {
			t.Errorf("--help does not list %s:\n%s", f, out)
		}
	}
	for _, f := range []string{"--module", "--players", "--economy", "--no-bots"} {
		if strings.Contains(out, f+" ") {
			t.Errorf("--help lists %s, which is not this program's", f)
		}
	}
}

// TestRefusedFlagIsNamed: a refused flag, the module's or the node's,
// ends the program with status 1 and the flag named with its code,
// before any I/O (the endpoint does not exist).
func TestRefusedFlagIsNamed(t *testing.T) {
	base := []string{"--endpoints", "http://127.0.0.1:1", "--name", "zone-a", "--certs", t.TempDir()}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--entities", "-1"}, "--entities = -1: must be positive"},
		{[]string{"--entities", "0"}, "--entities = 0: must be positive"},
		{[]string{"--accounts", "0"}, "--accounts = 0: must be positive"},
		{[]string{"--accounts", "9", "--entities", "8"}, "--accounts = 9: must be positive and at most Entities"},
		{[]string{"--roam", "-5"}, "--roam = -5: must be finite and not negative"},
		{[]string{"--tick", "0"}, "--tick = 0s: must be positive"},
		{[]string{"--players", "5"}, "unknown flag: --players"},
	} {
		_, errOut, code := runMain(t, append(append([]string{}, base...), c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", c.args, code, errOut, c.want)
		}
		if strings.Contains(c.want, "=") && !strings.Contains(errOut, ": CONFIG.INVALID: invalid configuration: "+c.want) {
			t.Errorf("%v: %q lacks the code", c.args, errOut)
		}
	}
}

var summaryRE = regexp.MustCompile(`zone-a: ran 40 ticks in \S+: entities (\d+) \(simulated (\d+), frozen 0\), owned regions 256 of 256`)

// TestHostsWander runs the command in-process as an operator would run
// the program, against an embedded etcd holding a table that gives the
// whole world to zone-a: the node joins, ticks, and simulates exactly
// the wanderers asked for.
func TestHostsWander(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	e, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{
		DataDir: t.TempDir(), Heartbeat: 50 * time.Millisecond, Election: 500 * time.Millisecond, UnsafeNoFsync: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	cl, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: e.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close() }()
	// The grid the program runs on: zone's default, which is the one
	// "shardwise regions new" writes tables over.
	g, err := cells.NewGrid(cells.DefaultGridConfig())
	if err != nil {
		t.Fatal(err)
	}
	table, err := cells.Uniform(g, 1, []string{"zone-a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ApplyRegions(ctx, table, coord.ApplyOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(t.TempDir(), "certs")
	if err := link.WriteClusterCerts(certs, "local", []string{"zone-a"}, time.Now().Add(-time.Hour), 24*time.Hour); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	cmd := zonecli.NewCommand(zonecli.Config{Use: "wander-zone", Modules: []zonecli.Module{module()}})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--endpoints", strings.Join(e.Endpoints(), ","), "--name", "zone-a", "--certs", certs,
		"--ticks", "40", "--tick", "10ms", "--ttl", "2s", "--entities", "12", "--accounts", "3"})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("wander-zone:\n%s", out.String())
	if !strings.Contains(out.String(), "zone-a: node ") {
		t.Error("no ready line")
	}
	m := summaryRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatal("no summary of 40 ticks owning the whole world")
	}
	if m[1] != "12" || m[2] != "12" {
		t.Errorf("entities %s, simulated %s: want the 12 wanderers asked for", m[1], m[2])
	}
}
