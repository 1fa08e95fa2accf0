package link_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/link"
)

func TestIssuedCertificateNamesTheNode(t *testing.T) {
	ca := newCA(t)
	nc, err := ca.Issue("zone-1", time.Now(), time.Hour, "10.0.0.5", "zone1.example")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := nc.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(tc.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if id, err := link.NodeIDFromCert(leaf); err != nil || id != "zone-1" {
		t.Fatalf("NodeIDFromCert = %q, %v", id, err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("does not verify as a localhost client: %v", err)
	}
	if err := leaf.VerifyHostname("10.0.0.5"); err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("zone1.example"); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue("Bad/ID", time.Now(), time.Hour); !errors.Is(err, link.ErrBadIdentity) {
		t.Fatalf("bad id accepted: %v", err)
	}
}

func TestNodeIDFromCertRefusesAmbiguity(t *testing.T) {
	u := func(s string) *url.URL { v, _ := url.Parse(s); return v }
	cases := map[string]*x509.Certificate{
		"no URI":      {},
		"two URIs":    {URIs: []*url.URL{u("shardwise://node/a"), u("shardwise://node/b")}},
		"CN mismatch": {URIs: []*url.URL{u("shardwise://node/a")}},
		"bad id":      {URIs: []*url.URL{u("shardwise://node/A%20B")}},
		"query":       {URIs: []*url.URL{u("shardwise://node/a?x=1")}},
		"fragment":    {URIs: []*url.URL{u("shardwise://node/a#x")}},
		"user info":   {URIs: []*url.URL{u("shardwise://b@node/a")}},
		"escaped":     {URIs: []*url.URL{u("shardwise://node/%61")}},
	}
	for _, name := range []string{"query", "fragment", "user info", "escaped"} {
		cases[name].Subject.CommonName = "a"
	}
	cases["CN mismatch"].Subject.CommonName = "b"
	cases["bad id"].Subject.CommonName = "A B"
	for name, c := range cases {
		if id, err := link.NodeIDFromCert(c); !errors.Is(err, link.ErrBadIdentity) {
			t.Errorf("%s: got %q, %v", name, id, err)
		}
	}
}

func TestWriteClusterCertsThenLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if err := link.WriteClusterCerts(dir, "test", []string{"a", "b"}, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, link.NodeKeyFile("a")))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v, want 0600", st.Mode().Perm())
	}
	var nodes []*link.Node
	for _, id := range []string{"a", "b"} {
		cert, pool, err := link.LoadIdentity(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		n, err := link.New(link.Config{Certificate: cert, ClusterCA: pool})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		if n.ID() != id {
			t.Fatalf("node id %q from %s's certificate", n.ID(), id)
		}
		nodes = append(nodes, n)
	}
	addr, err := nodes[1].Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nodes[1].Handle(kindEcho, func(_ context.Context, _ string, p []byte) ([]byte, error) { return p, nil })
	if err := nodes[0].AddPeer("b", addr.String()); err != nil {
		t.Fatal(err)
	}
	if got, err := nodes[0].Call(ctxTimeout(t, 10*time.Second), "b", kindEcho, []byte("loaded")); err != nil || string(got) != "loaded" {
		t.Fatalf("call between loaded identities: %q, %v", got, err)
	}
	// Writing again refuses to overwrite.
	if err := link.WriteClusterCerts(dir, "test", []string{"a"}, time.Now(), time.Hour); err == nil {
		t.Fatal("overwrote an existing certificate directory")
	}
	if err := link.WriteClusterCerts(t.TempDir(), "test", []string{"a", "a"}, time.Now(), time.Hour); !errors.Is(err, link.ErrBadIdentity) {
		t.Fatalf("duplicate ids: %v", err)
	}
}

// FuzzNodeIDFromCert: the URI SANs of a peer's certificate are outside
// input (any cluster CA member chose them). Whatever it accepts must be a
// valid id in the one canonical form, agreeing with the CN.
func FuzzNodeIDFromCert(f *testing.F) {
	for _, s := range []string{"shardwise://node/a", "shardwise://node/a?x", "shardwise://node/%61", "shardwise://node//a", "shardwise://node/a/b", "shardwise:node/a", "shardwise://node:1/a"} {
		f.Add(s, "a")
	}
	f.Fuzz(func(t *testing.T, raw, cn string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		cert := &x509.Certificate{URIs: []*url.URL{u}}
		cert.Subject.CommonName = cn
		id, err := link.NodeIDFromCert(cert)
		if err != nil {
			if !errors.Is(err, link.ErrBadIdentity) {
				t.Fatalf("%q: error %v is not ErrBadIdentity", raw, err)
			}
			return
		}
		if !link.ValidNodeID(id) || id != cn || u.String() != "shardwise://node/"+id {
			t.Fatalf("%q (CN %q) accepted as %q", raw, cn, id)
		}
	})
}

// A peer id is a node name: the one rule (nodename) is enforced wherever
// link takes one, and the refusal names the argument and the value as well
// as being ErrBadIdentity.
func TestBadNodeNamesAreRefusedWithTheField(t *testing.T) {
	ca := newCA(t)
	n, err := link.New(nodeConfig(t, ca, "zone-a"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	u, _ := url.Parse("shardwise://node/Zone-B")
	fromCert := &x509.Certificate{URIs: []*url.URL{u}}
	fromCert.Subject.CommonName = "Zone-B"
	for _, tc := range []struct {
		what         string
		err          error
		field, value string
	}{
		{"Issue upper case", func() error { _, err := ca.Issue("Zone-A", time.Now(), time.Hour); return err }(), "id", "Zone-A"},
		{"Issue dot dot", func() error { _, err := ca.Issue("..", time.Now(), time.Hour); return err }(), "id", ".."},
		{"Issue too long", func() error { _, err := ca.Issue(strings.Repeat("a", 65), time.Now(), time.Hour); return err }(), "id", strings.Repeat("a", 65)},
		{"WriteClusterCerts", link.WriteClusterCerts(t.TempDir(), "test", []string{"a", ".hidden"}, time.Now(), time.Hour), "ids[1]", ".hidden"},
		{"AddPeer", n.AddPeer("zone b", "127.0.0.1:1"), "id", "zone b"},
		{"AddPeer leading dash", n.AddPeer("-b", "127.0.0.1:1"), "id", "-b"},
		{"NodeIDFromCert", func() error { _, err := link.NodeIDFromCert(fromCert); return err }(), "URI SAN shardwise://node/<id>", "Zone-B"},
	} {
		var ce *errcode.ConfigError
		if !errors.Is(tc.err, link.ErrBadIdentity) || errcode.Of(tc.err) != link.CodeBadIdentity ||
			!errors.As(tc.err, &ce) || ce.Field != tc.field || ce.Value != tc.value {
			t.Errorf("%s: error %v, want ErrBadIdentity naming %s = %q", tc.what, tc.err, tc.field, tc.value)
		}
	}
}

// Node names that collided under the old file names ("a-key" with node
// "a"'s key, "ca" with the CA) each get their own files, and every loaded
// identity is its own node's.
func TestNodeFilesNeverCollide(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	ids := []string{"a", "a-key", "ca", "a.key", "a.cert", "b.cert.pem"}
	if err := link.WriteClusterCerts(dir, "test", ids, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{link.CAFile: "the CA"}
	for _, id := range ids {
		for _, f := range []string{link.NodeCertFile(id), link.NodeKeyFile(id)} {
			if other, ok := seen[f]; ok {
				t.Fatalf("%s: file %s is also %s's", id, f, other)
			}
			seen[f] = id
		}
		cert, _, err := link.LoadIdentity(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if got, err := link.NodeIDFromCert(leaf); err != nil || got != id {
			t.Fatalf("LoadIdentity(%q) loaded %q (%v)", id, got, err)
		}
	}
}

// A directory written with the old names (<id>.pem, <id>-key.pem) still
// loads.
func TestLoadIdentityReadsTheOldNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if err := link.WriteClusterCerts(dir, "test", []string{"a"}, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{link.NodeCertFile("a"): "a.pem", link.NodeKeyFile("a"): "a-key.pem"} {
		if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := link.LoadIdentity(dir, "a"); err != nil {
		t.Fatalf("LoadIdentity on old names: %v", err)
	}
}

func TestWriteClusterCertsWithHostsNamesEachNodesHosts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	hosts := map[string][]string{"b": {"b.zone", "b.zone.ns.svc", "10.1.2.3"}}
	if err := link.WriteClusterCertsWithHosts(dir, "test", []string{"a", "b"}, hosts, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	verify := func(id, host string) error {
		cert, pool, err := link.LoadIdentity(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		return err
	}
	for _, h := range []string{"b.zone", "b.zone.ns.svc", "10.1.2.3", "localhost", "127.0.0.1"} {
		if err := verify("b", h); err != nil {
			t.Errorf("b's certificate for %s: %v", h, err)
		}
	}
	// The extra names are b's alone.
	for _, h := range []string{"b.zone", "10.1.2.3"} {
		if err := verify("a", h); err == nil {
			t.Errorf("a's certificate is valid for b's host %s", h)
		}
	}

	for _, tc := range []struct {
		name  string
		hosts map[string][]string
		field string
	}{
		{"unknown node", map[string][]string{"c": {"c.zone"}}, "hosts"},
		{"wildcard", map[string][]string{"a": {"*.zone"}}, "hosts[a]"},
		{"empty label", map[string][]string{"a": {"a..zone"}}, "hosts[a]"},
		{"hyphen first", map[string][]string{"a": {"-a.zone"}}, "hosts[a]"},
		{"empty", map[string][]string{"a": {""}}, "hosts[a]"},
		{"port", map[string][]string{"a": {"a.zone:7100"}}, "hosts[a]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := link.WriteClusterCertsWithHosts(filepath.Join(t.TempDir(), "c"), "test", []string{"a"}, tc.hosts, time.Now(), time.Hour)
			var ce *errcode.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("got %v, want a configuration error naming %s", err, tc.field)
			}
		})
	}
}
