package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/link"
)

func TestCertsCommandWritesLoadableIdentities(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	cmd := newCertsCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--dir", dir, "--nodes", "a,b,c"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		cert, pool, err := link.LoadIdentity(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		n, err := link.New(link.Config{Certificate: cert, ClusterCA: pool})
		if err != nil {
			t.Fatal(err)
		}
		if n.ID() != id {
			t.Fatalf("certificate for %s names %s", id, n.ID())
		}
		n.Close()
	}

	bad := newCertsCmd()
	bad.SetArgs([]string{"--dir", t.TempDir(), "--nodes", "Not Valid"})
	if err := bad.Execute(); !errors.Is(err, errcode.ErrConfigInvalid) {
		t.Fatalf("invalid node id: %v", err)
	}

	// Into a directory that already holds the cluster's files: refused by
	// --dir before anything is written.
	again := newCertsCmd()
	again.SetArgs([]string{"--dir", dir, "--nodes", "d,a"})
	err := again.Execute()
	if !errors.Is(err, errcode.ErrConfigInvalid) || !strings.Contains(err.Error(), "--dir = \""+dir+"\": already holds ca.pem: certs never overwrites a file") {
		t.Fatalf("certs into %s again: %v", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, link.NodeCertFile("d"))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused certs wrote d's certificate: %v", err)
	}
}
