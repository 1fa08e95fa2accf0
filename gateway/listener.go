package gateway

import (
	"errors"
	"net"
	"net/http"
	"sync"
)

// HTTPServer returns the http.Server a gateway port is to be served by:
// h (the gateway itself, or a mux holding it at its path beside other
// pages) with the Limits' HTTP timeouts. A request the gateway upgrades
// to a WebSocket leaves those timeouts behind (ServeHTTP clears the
// connection's read deadline before the upgrade); every other request,
// and every keep-alive connection between requests, stays bound by them.
func (g *Gateway) HTTPServer(h http.Handler) *http.Server {
	l := g.cfg.Limits
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.HTTPReadTimeout,
		ReadTimeout:       l.HTTPReadTimeout,
		IdleTimeout:       l.HTTPIdleTimeout,
	}
}

// Listener wraps lis so that at most Limits.MaxConnsPerAddr connections
// from one remote IP address are open at once: one over the cap is closed
// as soon as it is accepted (the client sees its connection reset or
// closed before any response) and counted in the gateway's metrics. A
// connection counts until it is closed, whoever closes it (the HTTP
// server, the WebSocket's end). With a negative cap lis is returned as is.
func (g *Gateway) Listener(lis net.Listener) net.Listener {
	if g.cfg.Limits.MaxConnsPerAddr < 0 {
		return lis
	}
	return &capListener{Listener: lis, max: g.cfg.Limits.MaxConnsPerAddr, open: make(map[string]int), refused: g.cfg.Metrics.connsRefused.Inc}
}

// capListener is Gateway.Listener's wrapper.
type capListener struct {
	net.Listener
	max     int
	refused func()

	mu   sync.Mutex
	open map[string]int // remote IP → connections open
}

// Accept returns the next connection whose address is under the cap;
// those over it are closed here and never returned (an error would stop
// http.Server.Serve).
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := remoteIP(c.RemoteAddr())
		l.mu.Lock()
		over := l.open[key] >= l.max
		if !over {
			l.open[key]++
		}
		l.mu.Unlock()
		if over {
			_ = c.Close()
			l.refused()
			continue
		}
		return &cappedConn{Conn: c, l: l, key: key}, nil
	}
}

func (l *capListener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// remoteIP is the key connections are counted by: the IP address without
// the port (every connection of a client has its own port).
func remoteIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// cappedConn gives its slot back once, on its first Close.
type cappedConn struct {
	net.Conn
	l    *capListener
	key  string
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.key) })
	return err
}

// CloseWrite half-closes the connection when the underlying one can (as a
// *net.TCPConn can): http.Server uses it to close a connection gracefully.
func (c *cappedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
