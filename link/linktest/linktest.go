// Package linktest holds what the tests of certificate rotation in
// several packages (link, zone, econ, cmd/shardwise) read: the serial of
// the certificate a node's files hold, and of the one a server presents
// to a new connection. It is for tests only.
package linktest

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/shardwise/shardwise/link"
)

// SerialOnDisk returns the serial of node id's certificate in dir, as
// link.LoadIdentity reads it; it fails t if the files do not load.
func SerialOnDisk(t testing.TB, dir, id string) string {
	t.Helper()
	cert, _, err := link.LoadIdentity(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.String()
}

// ServedSerial makes a TLS connection to addr with cfg and returns the
// serial of the certificate the server presented; it fails t if the
// handshake does.
func ServedSerial(t testing.TB, addr string, cfg *tls.Config) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}
