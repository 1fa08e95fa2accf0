package econ_test

import (
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/link/linktest"
)

// TestClientTLSPresentsARotatedCertificate: a caller's certificate rotated
// on disk is presented from its next connection on, without a new config.
func TestClientTLSPresentsARotatedCertificate(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "certs")
	ca, err := link.NewCA("test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := link.WriteCA(dir, ca, filepath.Join(base, "ca.key")); err != nil {
		t.Fatal(err)
	}
	if err := link.WriteNodeCerts(dir, ca, []string{"zone-a", "econ-a"}, nil, false, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	cfg, err := econ.ClientTLS(dir, "zone-a")
	if err != nil {
		t.Fatal(err)
	}
	server, pool, err := link.LoadIdentity(dir, "econ-a")
	if err != nil {
		t.Fatal(err)
	}
	// The server hands each client certificate it saw to the test.
	seen := make(chan string)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{server}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			if tc.Handshake() == nil {
				seen <- tc.ConnectionState().PeerCertificates[0].SerialNumber.String()
			}
			c.Close()
		}
	}()
	connect := func() string {
		t.Helper()
		c := cfg.Clone()
		c.ServerName = "localhost"
		conn, err := tls.Dial("tcp", ln.Addr().String(), c)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// The server's handshake ends once it has the client's certificate
		// and Finished, which the client sent before Dial returned.
		return <-seen
	}
	onDisk := func() string { return linktest.SerialOnDisk(t, dir, "zone-a") }
	before := onDisk()
	if got := connect(); got != before {
		t.Fatalf("presented %s, want %s", got, before)
	}
	if err := link.WriteNodeCerts(dir, ca, []string{"zone-a"}, nil, true, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	after := onDisk()
	if got := connect(); got != after || after == before {
		t.Fatalf("after rotation presented %s, on disk %s (before %s)", got, after, before)
	}
}
