package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardwise/shardwise/gateway"
)

// served serves a gateway as a node's gateway port is served: at /ws
// beside a page at /, by Gateway.HTTPServer on Gateway.Listener over a
// real TCP listener. It returns the node and the port's address.
func (f *fixture) served(mod func(*gateway.Config)) (*node, string) {
	f.t.Helper()
	n := f.node("gw-a", 1, mod) // its httptest server goes unused here
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", n.gw)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "page") })
	srv := n.gw.HTTPServer(mux)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(n.gw.Listener(lis))
	}()
	f.t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	addr := lis.Addr().String()
	n.url = "ws://" + addr + "/ws"
	return n, addr
}

// get sends one keep-alive request on c and reads its response.
func get(t *testing.T, c net.Conn, br *bufio.Reader, path string, header string) *http.Response {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: gw\r\n"+header+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// waitClosed reads from c until the server closes it, failing if it is
// still open after a deadline far above the timeouts under test; it
// returns how long that took.
func waitClosed(t *testing.T, c net.Conn, br *bufio.Reader, what string) time.Duration {
	t.Helper()
	t0 := time.Now()
	_ = c.SetReadDeadline(t0.Add(10 * time.Second))
	_, err := br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: still open after %s", what, time.Since(t0).Round(time.Millisecond))
	}
	if err == nil {
		t.Fatalf("%s: the server sent a byte, want it to close the connection", what)
	}
	return time.Since(t0)
}

// An HTTP keep-alive connection that asks nothing more is closed after
// Limits.HTTPIdleTimeout, whatever its last answer was: a page, or a 403
// for an upgrade from a foreign Origin.
func TestIdleKeepAliveConnectionsAreClosed(t *testing.T) {
	f := newFixture(t)
	const idle = 200 * time.Millisecond
	_, addr := f.served(func(c *gateway.Config) {
		c.Limits.HTTPIdleTimeout = idle
		c.Limits.HTTPReadTimeout = time.Minute // not what closes them
	})
	for _, tc := range []struct {
		name, path, header string
		status             int
	}{
		{"a page", "/", "", http.StatusOK},
		{"an upgrade from a foreign Origin", "/ws",
			"Origin: http://elsewhere.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
			http.StatusForbidden},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if resp := get(t, c, br, tc.path, tc.header); resp.StatusCode != tc.status {
			t.Fatalf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
		took := waitClosed(t, c, br, tc.name+", then idle")
		t.Logf("%s: closed %s after its answer (idle timeout %s)", tc.name, took.Round(time.Millisecond), idle)
	}
}

// A request trickled slower than Limits.HTTPReadTimeout is cut.
func TestASlowRequestIsCutAtTheReadTimeout(t *testing.T) {
	f := newFixture(t)
	_, addr := f.served(func(c *gateway.Config) {
		c.Limits.HTTPReadTimeout = 200 * time.Millisecond
		c.Limits.HTTPIdleTimeout = time.Minute
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: gw\r\n"); err != nil { // and never the blank line
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	// The server may answer 408 before closing; either way it must close.
	for {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := br.ReadString('\n'); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("a request without its end is still being read after 10s")
			}
			return
		}
	}
}

// A WebSocket the gateway upgraded is not bound by the HTTP read timeout:
// it plays on, well past it, until its own limits end it.
func TestAnUpgradedSocketOutlivesTheHTTPReadTimeout(t *testing.T) {
	f := newFixture(t)
	const readTimeout = 100 * time.Millisecond
	n, _ := f.served(func(c *gateway.Config) {
		c.Limits.HTTPReadTimeout = readTimeout
		c.Limits.InputBurst = 1 << 30 // the fake clock never refills the bucket
	})
	c, _ := f.loggedIn(n, 3)
	// Ping and read the pong, back to back, until three read timeouts of
	// wall time have passed since the upgrade: a deadline left on the
	// connection would have cut it by then.
	t0 := time.Now()
	pings := uint64(0)
	for time.Since(t0) < 3*readTimeout {
		pings++
		c.send(ping(pings))
		m, code, reason := c.recv()
		if m == nil {
			t.Fatalf("socket closed (%d %s) %s after the upgrade, at ping %d", code, reason, time.Since(t0).Round(time.Millisecond), pings)
		}
		if m.GetPong() == nil {
			t.Fatalf("ping %d answered by %v", pings, m)
		}
	}
	t.Logf("%d pings answered over %s", pings, time.Since(t0).Round(time.Millisecond))
}

// At most Limits.MaxConnsPerAddr connections from one address are open at
// once; one over the cap is closed unanswered and counted, and a slot is
// free again once one of them closes.
func TestConnectionsPerAddressAreCapped(t *testing.T) {
	f := newFixture(t)
	const capacity = 3
	n, addr := f.served(func(c *gateway.Config) { c.Limits.MaxConnsPerAddr = capacity })
	var open []net.Conn
	for i := range capacity {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if resp := get(t, c, bufio.NewReader(c), "/", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d: status %d", i, resp.StatusCode)
		}
		open = append(open, c)
	}
	// A WebSocket counts as well: the cap is on connections, not requests.
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	br := bufio.NewReader(over)
	_, _ = io.WriteString(over, "GET / HTTP/1.1\r\nHost: gw\r\n\r\n")
	waitClosed(t, over, br, "a connection over the cap")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ws, _, err := websocket.Dial(ctx, n.url, nil); err == nil {
		ws.CloseNow()
		t.Fatal("a WebSocket over the cap was upgraded")
	}
	if got := counterValue(t, n.gw.Metrics(), "shardwise_gateway_conns_refused_total"); got != 2 {
		t.Errorf("conns_refused_total = %v, want 2", got)
	}

	open[0].Close()
	var served bool
	poll(t, "a slot to be free once a connection closed", func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: gw\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		served = resp.StatusCode == http.StatusOK
		return true
	})
	if !served {
		t.Fatal("the connection in the freed slot was not served")
	}
}

func counterValue(t *testing.T, m *gateway.Metrics, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64
			for _, mt := range mf.GetMetric() {
				sum += mt.GetCounter().GetValue()
			}
			return sum
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
