package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/internal/testenv"
)

// TestWorldDirsKeepOnlyTheDatabasesInData: with --data the run's scratch
// (the etcd data, the certificates with their private keys) is a temporary
// directory outside it, removed at the end; without, one directory holds
// everything and is removed.
func TestWorldDirsKeepOnlyTheDatabasesInData(t *testing.T) {
	keep := filepath.Join(t.TempDir(), "data")
	var out testenv.Buffer
	d := &worldDemo{cfg: WorldConfig{DataDir: keep}, out: &out}
	data, scratch, cleanup, err := d.dirs()
	if err != nil {
		t.Fatal(err)
	}
	if data != keep || scratch == keep || strings.HasPrefix(scratch, keep+string(filepath.Separator)) {
		t.Fatalf("data %q, scratch %q: want the data in %q and the scratch elsewhere", data, scratch, keep)
	}
	if err := os.WriteFile(filepath.Join(scratch, "ca.key"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cleanup()
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Fatalf("scratch %s left after the run: %v", scratch, err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("--data removed: %v", err)
	}

	d = &worldDemo{out: &out}
	data, scratch, cleanup, err = d.dirs()
	if err != nil {
		t.Fatal(err)
	}
	if data != scratch {
		t.Fatalf("without --data: data %q, scratch %q, want one directory", data, scratch)
	}
	cleanup()
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("temporary directory %s left after the run: %v", data, err)
	}
}
