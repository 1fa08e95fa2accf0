package testenv

import (
	"testing"

	"github.com/shardwise/shardwise/internal/tcpproxy"
)

// TCPProxy forwards TCP connections on a free 127.0.0.1 port to a target
// until Cut (package tcpproxy).
type TCPProxy = tcpproxy.Proxy

// StartTCPProxy starts a proxy to target ("host:port", or a URL such as
// "http://127.0.0.1:2379", whose scheme is dropped). It is cut when the
// test ends.
func StartTCPProxy(tb testing.TB, target string) *TCPProxy {
	tb.Helper()
	p, err := tcpproxy.Start(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Cut)
	return p
}
