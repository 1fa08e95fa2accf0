package main

import (
	"bytes"
	"crypto/x509"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/link/linktest"
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

	// Into a directory that already holds a CA, without its key: refused,
	// naming --ca-key, before anything is written.
	again := newCertsCmd()
	again.SetArgs([]string{"--dir", dir, "--nodes", "d,a"})
	var ce *errcode.ConfigError
	if err := again.Execute(); !errors.As(err, &ce) || ce.Field != "--ca-key" {
		t.Fatalf("certs into %s again: %v, want a configuration error naming --ca-key", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, link.NodeCertFile("d"))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused certs wrote d's certificate: %v", err)
	}
}

func TestCertsSANsNameTheNodesHosts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	cmd := newCertsCmd()
	cmd.SetOut(new(bytes.Buffer))
	cmd.SetArgs([]string{"--dir", dir, "--nodes", "zone-0,zone-1", "--san", "zone-0=zone-0.zone,10.0.0.7", "--san", "zone-1=zone-1.zone"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for id, host := range map[string]string{"zone-0": "zone-0.zone", "zone-1": "zone-1.zone"} {
		cert, pool, err := link.LoadIdentity(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("%s for %s: %v", id, host, err)
		}
		if !slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.String() == "10.0.0.7" }) != (id == "zone-1") {
			t.Errorf("%s: IP SANs %v", id, leaf.IPAddresses)
		}
	}

	for _, tc := range []struct{ san, value string }{
		{"zone-9=zone-9.zone", "zone-9=zone-9.zone"},
		{"zone-0", "zone-0"},
		{"zone-0=", "zone-0="},
		{"zone-0=a_b.zone", "a_b.zone"},
	} {
		bad := newCertsCmd()
		bad.SetArgs([]string{"--dir", filepath.Join(t.TempDir(), "c"), "--nodes", "zone-0", "--san", tc.san})
		var ce *errcode.ConfigError
		if err := bad.Execute(); !errors.As(err, &ce) || ce.Field != "--san" || ce.Value != tc.value {
			t.Errorf("--san %s: %v, want a configuration error naming --san = %q", tc.san, err, tc.value)
		}
	}
}

func TestCertsKeepsTheCAKeyAddsAndRotatesNodes(t *testing.T) {
	base := t.TempDir()
	dir, key := filepath.Join(base, "certs"), filepath.Join(base, "ca.key")
	run := func(args ...string) error {
		cmd := newCertsCmd()
		cmd.SetOut(new(bytes.Buffer))
		cmd.SetArgs(args)
		return cmd.Execute()
	}
	if err := run("--dir", dir, "--nodes", "zone-a,zone-b", "--ca-key", key); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v, %v; want a 0600 file", st, err)
	}
	serial := func(id string) string { return linktest.SerialOnDisk(t, dir, id) }
	a, b := serial("zone-a"), serial("zone-b")

	if err := run("--dir", dir, "--nodes", "zone-c", "--ca-key", key, "--san", "zone-c=10.0.0.3"); err != nil {
		t.Fatal(err)
	}
	c := serial("zone-c")
	if err := run("--dir", dir, "--nodes", "zone-b", "--ca-key", key, "--rotate"); err != nil {
		t.Fatal(err)
	}
	if serial("zone-a") != a || serial("zone-c") != c {
		t.Fatal("adding zone-c or rotating zone-b changed another node's certificate")
	}
	if serial("zone-b") == b {
		t.Fatal("zone-b's certificate was not rotated")
	}
	// Every node, old, added and rotated, trusts every other: one CA.
	for _, id := range []string{"zone-a", "zone-b", "zone-c"} {
		cert, pool, err := link.LoadIdentity(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := link.New(link.Config{Certificate: cert, ClusterCA: pool}); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}

	otherKey := filepath.Join(base, "other.key")
	if err := run("--dir", filepath.Join(base, "other"), "--nodes", "x", "--ca-key", otherKey); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		field string
	}{
		{[]string{"--dir", dir, "--nodes", "zone-d"}, "--ca-key"},                                    // the CA exists: its key is needed
		{[]string{"--dir", dir, "--nodes", "zone-d", "--ca-key", otherKey}, "--ca-key"},              // another CA's key
		{[]string{"--dir", dir, "--nodes", "zone-a", "--ca-key", key}, "--nodes"},                    // exists: rotate it instead
		{[]string{"--dir", dir, "--nodes", "zone-e", "--ca-key", key, "--rotate"}, "--nodes"},        // nothing to rotate
		{[]string{"--dir", filepath.Join(base, "new"), "--nodes", "a", "--rotate"}, "--rotate"},      // no CA at all
		{[]string{"--dir", filepath.Join(base, "new"), "--nodes", "a", "--ca-key", key}, "--ca-key"}, // the key file exists
		{[]string{"--dir", filepath.Join(base, "new"), "--nodes", "a", "--ca-key", filepath.Join(base, "new", "ca.key")}, "--ca-key"},
		{[]string{"--dir", filepath.Join(base, "new"), "--nodes", "a,b,a"}, "--nodes"},
	} {
		var ce *errcode.ConfigError
		if err := run(tc.args...); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("certs %v: %v, want a configuration error naming %s", tc.args, err, tc.field)
		}
	}
	for _, p := range []string{filepath.Join(dir, link.NodeCertFile("zone-d")), filepath.Join(base, "new")} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s written by a refused command: %v", p, err)
		}
	}
}
