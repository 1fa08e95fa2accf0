package link_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/link/linktest"
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

// rotatingCluster is a certificate directory whose CA key is kept in a
// file beside it, as "shardwise certs --ca-key" keeps it.
func rotatingCluster(t *testing.T, ids ...string) (dir string, ca *link.CA) {
	t.Helper()
	base := t.TempDir()
	dir, keyFile := filepath.Join(base, "certs"), filepath.Join(base, "ca.key")
	ca, err := link.NewCA("test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := link.WriteCA(dir, ca, keyFile); err != nil {
		t.Fatal(err)
	}
	if err := link.WriteNodeCerts(dir, ca, ids, nil, false, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	// What a later run has: the CA read back from its two files.
	certPEM, err := os.ReadFile(filepath.Join(dir, link.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("CA key file: %v, %v; want mode 0600", st, err)
	}
	if ca, err = link.LoadCA(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return dir, ca
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriteNodeCertsAddsAndRotatesWithoutTouchingTheOthers(t *testing.T) {
	dir, ca := rotatingCluster(t, "a", "b")
	aCert, aKey := readFile(t, filepath.Join(dir, link.NodeCertFile("a"))), readFile(t, filepath.Join(dir, link.NodeKeyFile("a")))

	// A node added with the kept CA is trusted by the others' pool.
	if err := link.WriteNodeCerts(dir, ca, []string{"c"}, map[string][]string{"c": {"c.zone"}}, false, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	cCert, _, err := link.LoadIdentity(dir, "c")
	if err != nil {
		t.Fatal(err)
	}
	_, aPool, err := link.LoadIdentity(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cCert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: aPool, DNSName: "c.zone"}); err != nil {
		t.Fatalf("the added node's certificate, against a's CA pool: %v", err)
	}
	oldSerial := leaf.SerialNumber

	// Adding a node that exists, or rotating one that does not, writes
	// nothing.
	if err := link.WriteNodeCerts(dir, ca, []string{"d", "a"}, nil, false, time.Now(), time.Hour); err == nil {
		t.Fatal("adding an existing node: no error")
	}
	if _, err := os.Stat(filepath.Join(dir, link.NodeCertFile("d"))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("d written although a was refused: %v", err)
	}
	if err := link.WriteNodeCerts(dir, ca, []string{"e"}, nil, true, time.Now(), time.Hour); err == nil {
		t.Fatal("rotating a missing node: no error")
	}

	// Rotating c gives it a new key and certificate; a's files are as they were.
	if err := link.WriteNodeCerts(dir, ca, []string{"c"}, nil, true, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	cCert, _, err = link.LoadIdentity(dir, "c")
	if err != nil {
		t.Fatal(err)
	}
	if leaf, err = x509.ParseCertificate(cCert.Certificate[0]); err != nil {
		t.Fatal(err)
	}
	if leaf.SerialNumber.Cmp(oldSerial) == 0 {
		t.Fatal("rotated certificate has the old serial")
	}
	// Rotated without hosts, it names the hosts it named before.
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: aPool, DNSName: "c.zone"}); err != nil {
		t.Fatalf("the rotated certificate lost its host: %v", err)
	}
	if !bytes.Equal(aCert, readFile(t, filepath.Join(dir, link.NodeCertFile("a")))) || !bytes.Equal(aKey, readFile(t, filepath.Join(dir, link.NodeKeyFile("a")))) {
		t.Fatal("a's files changed when c was added and rotated")
	}

	// Another CA's key is refused, and a directory of another CA too.
	other, err := link.NewCA("other", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := other.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := link.LoadCA(ca.CertPEM, otherKey); err == nil {
		t.Fatal("LoadCA with another CA's key: no error")
	}
	if err := link.WriteNodeCerts(dir, other, []string{"f"}, nil, false, time.Now(), time.Hour); err == nil {
		t.Fatal("WriteNodeCerts with another CA: no error")
	}
	if err := link.WriteCA(dir, other, filepath.Join(dir, "ca.key")); err == nil {
		t.Fatal("WriteCA with the key inside the directory: no error")
	}
}

// servedSerial makes a TLS connection to addr and returns the serial of
// the certificate the server presented.
func servedSerial(t *testing.T, addr string, pool *x509.CertPool) string {
	t.Helper()
	return linktest.ServedSerial(t, addr, &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS13})
}

func TestCertReloaderServesARotatedCertificate(t *testing.T) {
	dir, ca := rotatingCluster(t, "b", "x")
	r, err := link.NewCertReloader(dir, "b")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // completes each handshake, then closes
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	first := linktest.SerialOnDisk(t, dir, "b")
	if got := servedSerial(t, addr, r.Pool()); got != first {
		t.Fatalf("served serial %s, want the one on disk %s", got, first)
	}

	// Mid-rotation (the new key written, not yet the certificate): the old
	// pair stays in use.
	newCA := ca
	nc, err := newCA.Issue("b", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, link.NodeKeyFile("b")), nc.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, addr, r.Pool()); got != first {
		t.Fatalf("mid-rotation: served %s, want the old %s", got, first)
	}
	if r.Err() == nil {
		t.Fatal("mid-rotation: Err is nil")
	}
	// The certificate lands: served from the next handshake on.
	if err := os.WriteFile(filepath.Join(dir, link.NodeCertFile("b")), nc.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	second := linktest.SerialOnDisk(t, dir, "b")
	if second == first {
		t.Fatal("the test's rotation kept the serial")
	}
	if got := servedSerial(t, addr, r.Pool()); got != second {
		t.Fatalf("after rotation: served %s, want the new %s", got, second)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("after rotation: %v", err)
	}

	// The rotation as the CLI does it.
	if err := link.WriteNodeCerts(dir, ca, []string{"b"}, nil, true, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	third := linktest.SerialOnDisk(t, dir, "b")
	if got := servedSerial(t, addr, r.Pool()); got != third || third == second {
		t.Fatalf("after WriteNodeCerts rotate: served %s, on disk %s (before %s)", got, third, second)
	}

	// Another node's certificate put in b's place is not served.
	for _, f := range []func(string) string{link.NodeCertFile, link.NodeKeyFile} {
		if err := os.WriteFile(filepath.Join(dir, f("b")), readFile(t, filepath.Join(dir, f("x"))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := servedSerial(t, addr, r.Pool()); got != third {
		t.Fatalf("x's certificate in b's files: served %s, want b's %s", got, third)
	}
	if !errors.Is(r.Err(), link.ErrBadIdentity) {
		t.Fatalf("x's certificate in b's files: Err = %v, want ErrBadIdentity", r.Err())
	}
}

func TestNodeUsesReloadOnBothSides(t *testing.T) {
	dir, _ := rotatingCluster(t, "a", "b")
	var nodes []*link.Node
	var calls []*atomic.Int64
	for _, id := range []string{"a", "b"} {
		r, err := link.NewCertReloader(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := r.Certificate()
		if err != nil {
			t.Fatal(err)
		}
		n := new(atomic.Int64)
		node, err := link.New(link.Config{Certificate: *cert, ClusterCA: r.Pool(), Reload: func() (*tls.Certificate, error) {
			n.Add(1)
			return r.Certificate()
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { node.Close() })
		nodes, calls = append(nodes, node), append(calls, n)
	}
	addr, err := nodes[1].Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nodes[1].Handle(kindEcho, func(_ context.Context, _ string, p []byte) ([]byte, error) { return p, nil })
	if err := nodes[0].AddPeer("b", addr.String()); err != nil {
		t.Fatal(err)
	}
	if got, err := nodes[0].Call(ctxTimeout(t, 10*time.Second), "b", kindEcho, []byte("reloaded")); err != nil || string(got) != "reloaded" {
		t.Fatalf("call: %q, %v", got, err)
	}
	if calls[0].Load() == 0 || calls[1].Load() == 0 {
		t.Fatalf("Reload called %d times as client, %d as server; want both", calls[0].Load(), calls[1].Load())
	}
}
