package link_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/link/faulty"
)

// cluster is a set of nodes on loopback, every pair peered, all traffic
// through one faulty.Network.
type cluster struct {
	t     testing.TB
	ca    *link.CA
	net   *faulty.Network
	nodes map[string]*link.Node
	addrs map[string]string
}

type clusterOpts struct {
	clock   clock.Clock
	tweak   func(*link.Config)
	noPeers bool
	// wrap, when set, wraps each node's listener (to watch the server's
	// side of connections).
	wrap func(id string, l net.Listener) net.Listener
}

func newCA(t testing.TB) *link.CA {
	t.Helper()
	ca, err := link.NewCA("test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func nodeConfig(t testing.TB, ca *link.CA, id string) link.Config {
	t.Helper()
	nc, err := ca.Issue(id, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := nc.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	return link.Config{
		Certificate: cert,
		ClusterCA:   ca.Pool(),
		BackoffMin:  5 * time.Millisecond,
		BackoffMax:  50 * time.Millisecond,
	}
}

func newCluster(t testing.TB, opts clusterOpts, ids ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, ca: newCA(t), net: faulty.New(1, opts.clock), nodes: map[string]*link.Node{}, addrs: map[string]string{}}
	for _, id := range ids {
		cfg := nodeConfig(t, c.ca, id)
		cfg.Clock = opts.clock
		cfg.Dial = c.net.Dialer(id)
		cfg.StreamInterceptors = append(cfg.StreamInterceptors, c.net.StreamInterceptor(id))
		if opts.tweak != nil {
			opts.tweak(&cfg)
		}
		n, err := link.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		lis, err := c.net.Listen(id, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if opts.wrap != nil {
			lis = opts.wrap(id, lis)
		}
		if err := n.Serve(lis); err != nil {
			t.Fatal(err)
		}
		c.nodes[id] = n
		c.addrs[id] = lis.Addr().String()
	}
	if !opts.noPeers {
		for _, a := range ids {
			for _, b := range ids {
				if a != b {
					c.peer(a, b)
				}
			}
		}
	}
	return c
}

func (c *cluster) peer(a, b string) {
	c.t.Helper()
	if err := c.nodes[a].AddPeer(b, c.addrs[b]); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) waitConnected(a, b string) {
	c.t.Helper()
	testenv.PollUntil(c.t, 10*time.Second, a+" connected to "+b, func() bool { return c.nodes[a].Connected(b) })
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

type tlsServer struct{ c link.Config }

func (s *tlsServer) cfg() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{s.c.Certificate}, ClientCAs: s.c.ClusterCA, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
}

func tlsClient(c link.Config) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c.Certificate}, RootCAs: c.ClusterCA, MinVersion: tls.VersionTLS13}
}
