package main

import (
	"bytes"
	"crypto/x509"
	"errors"
	"net"
	"path/filepath"
	"slices"
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
