package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/torus"
)

// etcdForCmdTest starts an embedded etcd for one test and returns its
// endpoints joined for --endpoints, and a client on it.
func etcdForCmdTest(t *testing.T) (string, *coord.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	e, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{
		DataDir:       t.TempDir(),
		Heartbeat:     50 * time.Millisecond,
		Election:      500 * time.Millisecond,
		UnsafeNoFsync: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	c, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: e.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return strings.Join(e.Endpoints(), ","), c
}

func registerForCmdTest(t *testing.T, c *coord.Client, name string) *coord.Registration {
	t.Helper()
	r, err := c.Register(t.Context(), coord.RegisterConfig{Name: name, Role: "zone", Addrs: map[string]string{"link": name + ":7100"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// lockedBuffer is a bytes.Buffer that several goroutines may write: a
// command's stdout and stderr are separate files in a real run, but
// runCmd gives both the one buffer, and a command such as zone writes its
// status line and its log records from different goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runCmd executes cmd with args in-process and returns stdout and the error.
func runCmd(t *testing.T, cmd *cobra.Command, stdin string, args ...string) (string, error) {
	t.Helper()
	var out lockedBuffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func wantCmdCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := errcode.Of(err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
	if !strings.HasPrefix(err.Error(), code+": ") {
		t.Fatalf("error message %q does not start with its code %s", err.Error(), code)
	}
}

func smallTableFile(t *testing.T, version uint64, asYAML bool, owners ...string) string {
	t.Helper()
	grid, err := cells.NewGrid(cells.GridConfig{World: torus.Config{Width: 16_000, Height: 16_000}})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := cells.NewTable(grid, version, owners)
	if err != nil {
		t.Fatal(err)
	}
	b, err := coord.FormatRegions(tb, asYAML)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "regions.json")
	if asYAML {
		name = filepath.Join(t.TempDir(), "regions.yaml")
	}
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestRegionsCmdNeedsEndpoints(t *testing.T) {
	for _, args := range [][]string{{"show"}, {"apply", "x.json"}} {
		file := ""
		if args[0] == "apply" {
			file = smallTableFile(t, 1, false, "a", "b", "c", "d")
			args = []string{"apply", file}
		}
		_, err := runCmd(t, newRegionsCmd(), "", args...)
		wantCmdCode(t, err, errcode.ConfigInvalid)
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != "--endpoints" {
			t.Fatalf("regions %v: %v does not name --endpoints", args, err)
		}
	}
	_, err := runCmd(t, newMembersCmd(), "")
	wantCmdCode(t, err, errcode.ConfigInvalid)
}

func TestRegionsApplyThenShow(t *testing.T) {
	eps, c := etcdForCmdTest(t)
	registerForCmdTest(t, c, "zone-a")
	registerForCmdTest(t, c, "zone-b")

	_, err := runCmd(t, newRegionsCmd(), "", "show", "--endpoints", eps)
	wantCmdCode(t, err, coord.CodeRegionsNotFound)

	yamlFile := smallTableFile(t, 1, true, "zone-a", "zone-b", "zone-b", "zone-a")
	out, err := runCmd(t, newRegionsCmd(), "", "apply", yamlFile, "--endpoints", eps)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "version 1") || !strings.Contains(out, "zone-a, zone-b") {
		t.Fatalf("apply output %q", out)
	}

	for _, format := range []string{"json", "yaml"} {
		out, err = runCmd(t, newRegionsCmd(), "", "show", "--endpoints", eps, "-o", format)
		if err != nil {
			t.Fatal(err)
		}
		shown, err := coord.ParseRegionsFile([]byte(out))
		if err != nil {
			t.Fatalf("show -o %s output does not parse: %v\n%s", format, err, out)
		}
		stored, err := c.Regions(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !shown.Equal(stored) {
			t.Fatalf("show -o %s printed a table that differs from the stored one", format)
		}
	}

	// What show prints, edited, applies as the next version (from stdin).
	next := strings.Replace(out, "version: 1", "version: 2", 1)
	next = strings.Replace(next, "- zone-a", "- zone-b", 1)
	if _, err := runCmd(t, newRegionsCmd(), next, "apply", "-", "--endpoints", eps); err != nil {
		t.Fatal(err)
	}
	stored, err := c.Regions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if stored.Version() != 2 || stored.Owner(0) != "zone-b" {
		t.Fatalf("after the edit: version %d owner(0) %s", stored.Version(), stored.Owner(0))
	}
}

func TestRegionsApplyConflictsAndExpectVersion(t *testing.T) {
	eps, c := etcdForCmdTest(t)
	registerForCmdTest(t, c, "zone-a")
	file := smallTableFile(t, 1, false, "zone-a", "zone-a", "zone-a", "zone-a")
	if _, err := runCmd(t, newRegionsCmd(), "", "apply", file, "--endpoints", eps); err != nil {
		t.Fatal(err)
	}
	// The same file again (forced or not): it was written against version
	// 0. The error says the stored version and how to apply it anyway.
	_, err := runCmd(t, newRegionsCmd(), "", "apply", file, "--force", "--endpoints", eps)
	wantCmdCode(t, err, coord.CodeRegionsConflict)
	var ce *coord.RegionsConflictError
	if !errors.As(err, &ce) || ce.Actual != 1 || ce.Expected != 0 {
		t.Fatalf("conflict %+v", ce)
	}
	if want := "REGIONS.CONFLICT: the stored region table is version 1, and " + file + " is version 1, which replaces only version 0: " +
		"to store " + file + " over the current table anyway, apply it with --expect-version 1 (it is stored as version 2)"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("conflict says\n%s\nwant it to begin\n%s", err, want)
	}
	// --expect-version overrides the file's version.
	out, err := runCmd(t, newRegionsCmd(), "", "apply", file, "--expect-version", "1", "--endpoints", eps)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "version 2") {
		t.Fatalf("apply output %q, want version 2", out)
	}
	_, err = runCmd(t, newRegionsCmd(), "", "apply", file, "--expect-version", "1", "--endpoints", eps)
	wantCmdCode(t, err, coord.CodeRegionsConflict)
	if want := "REGIONS.CONFLICT: the stored region table is version 2, not --expect-version 1: someone applied a table since you read it"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("conflict says\n%s\nwant it to begin\n%s", err, want)
	}
}

// Two operators running "regions apply" at the same moment, from the same
// version: one wins, the other is told it lost.
func TestRegionsApplyConcurrentOperators(t *testing.T) {
	eps, c := etcdForCmdTest(t)
	registerForCmdTest(t, c, "zone-a")
	registerForCmdTest(t, c, "zone-b")
	files := []string{
		smallTableFile(t, 1, false, "zone-a", "zone-a", "zone-b", "zone-b"),
		smallTableFile(t, 1, true, "zone-b", "zone-b", "zone-a", "zone-a"),
	}
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Go(func() {
			_, errs[i] = runCmd(t, newRegionsCmd(), "", "apply", f, "--endpoints", eps)
		})
	}
	wg.Wait()
	switch {
	case errs[0] == nil && errs[1] != nil:
		wantCmdCode(t, errs[1], coord.CodeRegionsConflict)
	case errs[1] == nil && errs[0] != nil:
		wantCmdCode(t, errs[0], coord.CodeRegionsConflict)
	default:
		t.Fatalf("want exactly one winner, got errors %v", errs)
	}
}

func TestRegionsApplyUnknownNodeNeedsForce(t *testing.T) {
	eps, c := etcdForCmdTest(t)
	registerForCmdTest(t, c, "zone-a")
	file := smallTableFile(t, 1, false, "zone-a", "zone-a", "zone-x", "zone-a")
	_, err := runCmd(t, newRegionsCmd(), "", "apply", file, "--endpoints", eps)
	wantCmdCode(t, err, coord.CodeRegionsUnknown)
	if !strings.Contains(err.Error(), `"zone-x"`) {
		t.Fatalf("error %q does not name the unknown node", err)
	}
	if _, err := runCmd(t, newRegionsCmd(), "", "apply", file, "--force", "--endpoints", eps); err != nil {
		t.Fatal(err)
	}
}

func TestRegionsApplyRefusesBadFile(t *testing.T) {
	eps, _ := etcdForCmdTest(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nowners: [a]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := runCmd(t, newRegionsCmd(), "", "apply", bad, "--endpoints", eps)
	wantCmdCode(t, err, coord.CodeRegionsInvalid)
	huge := filepath.Join(t.TempDir(), "huge.json")
	if err := os.WriteFile(huge, bytes.Repeat([]byte(" "), coord.MaxRegionsFile+10), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = runCmd(t, newRegionsCmd(), "", "apply", huge, "--endpoints", eps)
	wantCmdCode(t, err, coord.CodeRegionsInvalid)
	_, err = runCmd(t, newRegionsCmd(), "", "apply", filepath.Join(t.TempDir(), "missing.json"), "--endpoints", eps)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestRegionsNew: "regions new" prints, without etcd, a table over the
// grid "shardwise zone" runs that "regions apply" reads back: contiguous
// blocks in the order of --nodes, then each --set. Refused flags are named.
func TestRegionsNew(t *testing.T) {
	out, err := runCmd(t, newRootCmd(), "", "regions", "new", "--nodes", "zone-a,zone-b", "--set", "0=zone-b", "--set", "255=zone-c", "--version", "3")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := coord.ParseRegionsFile([]byte(out))
	if err != nil {
		t.Fatalf("regions apply would not read what regions new printed: %v\n%s", err, out)
	}
	grid, err := cells.NewGrid(game.Config{}.RuntimeConfig().Grid)
	if err != nil {
		t.Fatal(err)
	}
	if tb.Grid() != grid || tb.Version() != 3 {
		t.Fatalf("grid %+v version %d, want the game's grid at version 3", tb.Grid().Config(), tb.Version())
	}
	for r, owner := range tb.Owners() {
		want := "zone-a"
		switch {
		case r == 0:
			want = "zone-b"
		case r == 255:
			want = "zone-c"
		case r >= 128:
			want = "zone-b"
		}
		if owner != want {
			t.Errorf("region %d: owner %s, want %s", r, owner, want)
		}
	}
	if y, err := runCmd(t, newRootCmd(), "", "regions", "new", "--nodes", "zone-a", "-o", "yaml"); err != nil || !strings.Contains(y, "owners:\n  - zone-a\n") {
		t.Errorf("-o yaml: %v\n%s", err, y)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, `--nodes = "": required`},
		{[]string{"--nodes", "zone-a,zone-a"}, `--nodes = "zone-a,zone-a": `},
		{[]string{"--nodes", "Zone"}, `--nodes = "Zone": `},
		{[]string{"--nodes", "zone-a", "--version", "0"}, "--version = 0: must be at least 1"},
		{[]string{"--nodes", "zone-a", "--set", "256=zone-b"}, `--set = "256=zone-b": must be REGION=NODE with REGION in [0, 256)`},
		{[]string{"--nodes", "zone-a", "--set", "zone-b"}, `--set = "zone-b": must be REGION=NODE`},
		{[]string{"--nodes", "zone-a", "--set", "1=Zone"}, `--set = "1=Zone": `},
		{[]string{"--nodes", "zone-a", "-o", "xml"}, `--output = "xml": must be json or yaml`},
	} {
		_, err := runCmd(t, newRootCmd(), "", append([]string{"regions", "new"}, c.args...)...)
		if want := errcode.ConfigInvalid + ": invalid configuration: " + c.want; errcode.Of(err) != errcode.ConfigInvalid || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%v:\n got  %v\n want %s…", c.args, err, want)
		}
	}
}

// "regions show" says who wrote the table and why, as a comment apart
// from the table: the operator who applied it, with --reason.
func TestRegionsShowSaysWhoWroteIt(t *testing.T) {
	t.Setenv("USER", "alice")
	eps, c := etcdForCmdTest(t)
	registerForCmdTest(t, c, "zone-a")
	file := smallTableFile(t, 1, false, "zone-a", "zone-a", "zone-a", "zone-a")
	if _, err := runCmd(t, newRegionsCmd(), "", "apply", file, "--reason", "first table", "--endpoints", eps); err != nil {
		t.Fatal(err)
	}
	cmd := newRegionsCmd()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"show", "--endpoints", eps})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stderr.String(), "# version 1 written by operator alice@") || !strings.HasSuffix(stderr.String(), ": first table\n") {
		t.Fatalf("show's stderr %q, want the writer and the reason", stderr.String())
	}
	if _, err := coord.ParseRegionsFile(stdout.Bytes()); err != nil {
		t.Fatalf("show's stdout is not a table file: %v", err)
	}
}
