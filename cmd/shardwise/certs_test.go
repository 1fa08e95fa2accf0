package main

import (
	"bytes"
	"errors"
	"path/filepath"
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
}
