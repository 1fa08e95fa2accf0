// Package tcpproxy forwards TCP connections to one target until cut: a
// network partition between a client and a server with both left
// running. The demo puts one before each zone node's etcd (its zone node
// kill cuts it); tests use it through testenv.StartTCPProxy.
package tcpproxy

import (
	"io"
	"net"
	"strings"
	"sync"
)

// Proxy forwards TCP connections on a free 127.0.0.1 port to a target
// until Cut, which closes every connection and refuses new ones: a network
// partition between a client and a server, with both left running.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	cut   bool
	wg    sync.WaitGroup
}

// Start starts a proxy to target ("host:port", or a URL such as
// "http://127.0.0.1:2379", whose scheme is dropped), listening on a free
// 127.0.0.1 port. Its owner calls Cut.
func Start(target string) (*Proxy, error) {
	if _, hp, ok := strings.Cut(target, "://"); ok {
		target = hp
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Go(p.accept)
	return p, nil
}

// Endpoint is the proxy's address as an http:// URL (the form etcd
// clients take).
func (p *Proxy) Endpoint() string { return "http://" + p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		p.wg.Go(func() { pipe(c, up) })
		p.wg.Go(func() { pipe(up, c) })
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// Cut partitions the two sides and waits for the proxy's goroutines.
// Idempotent.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}
