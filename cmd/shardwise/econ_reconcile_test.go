package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// TestEconReconcile: "econ reconcile" refuses while an economy member is
// live (naming it) and writes nothing then; --dry-run prints each counter
// it would set and writes nothing; a run prints the same and sets them;
// a second run finds nothing to change. A zone member does not count.
func TestEconReconcile(t *testing.T) {
	eps, c := etcdForCmdTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "econ.db")
	store, err := sqlstore.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// Drift with no session behind it: both counters belong at 0.
	if _, err := store.ReplacePending(ctx, map[string]netting.Reserved{"alice:spendable": {Debits: -5}, "ghost:spendable": {Credits: 9}}); err != nil {
		t.Fatal(err)
	}
	pendingNow := func() map[string]int64 {
		t.Helper()
		p, err := store.PendingAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	args := []string{"econ", "reconcile", "--store", "sqlite://" + path, "--endpoints", eps}

	live, err := c.Register(ctx, coord.RegisterConfig{Name: "econ-a", Role: econ.Role, TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = runCmd(t, newRootCmd(), "", args...)
	wantCmdCode(t, err, "ECON.NOT_QUIESCED")
	if !strings.Contains(err.Error(), "econ-a (node ") {
		t.Errorf("refusal %q does not name the live member", err)
	}
	if p := pendingNow(); len(p) != 2 {
		t.Fatalf("pending %v after the refusal, want the drift untouched", p)
	}
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	zone, err := c.Register(ctx, coord.RegisterConfig{Name: "zone-a", Role: "zone", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer zone.Close()

	changes := "alice:spendable                  debits -5 credits 0 -> debits 0 credits 0\n" +
		"ghost:spendable                  debits 0 credits 9 -> debits 0 credits 0\n"
	out, err := runCmd(t, newRootCmd(), "", append(args, "--dry-run")...)
	if err != nil {
		t.Fatal(err)
	}
	if want := changes + "reconcile (dry run, nothing written): 2 counter(s) to set, 0 account(s) pending after\n"; out != want {
		t.Errorf("dry run printed\n%s\nwant\n%s", out, want)
	}
	if p := pendingNow(); len(p) != 2 {
		t.Fatalf("pending %v after the dry run, want the drift untouched", p)
	}

	out, err = runCmd(t, newRootCmd(), "", args...)
	if err != nil {
		t.Fatal(err)
	}
	if want := changes + "reconcile: 2 counter(s) set, 0 account(s) pending\n"; out != want {
		t.Errorf("reconcile printed\n%s\nwant\n%s", out, want)
	}
	if p := pendingNow(); len(p) != 0 {
		t.Errorf("pending %v after reconcile, want none", p)
	}
	out, err = runCmd(t, newRootCmd(), "", args...)
	if err != nil || out != "reconcile: every counter already right, 0 account(s) pending\n" {
		t.Errorf("second reconcile: %v\n%s", err, out)
	}
}

// An economy node whose name a live member holds is refused with
// NODENAME.TAKEN before it creates anything: no SQLite file is left.
func TestEconNameTakenCreatesNoStore(t *testing.T) {
	eps, c := etcdForCmdTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	held, err := c.Register(ctx, coord.RegisterConfig{Name: "econ-a", Role: econ.Role, TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	path := filepath.Join(t.TempDir(), "econ.db")
	_, err = runCmd(t, newRootCmd(), "", "econ", "--endpoints", eps, "--name", "econ-a", "--store", "sqlite://"+path)
	wantCmdCode(t, err, coord.CodeNameTaken)
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused econ left %s: %v", path, err)
	}
}
