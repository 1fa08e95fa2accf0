package nodehttp

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// serve serves a tiny page with t until the test ends, and returns its
// address.
func serve(t *testing.T, tm Timeouts) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }), tm)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return lis.Addr().String()
}

// closedByServer reports whether the server closes c: a read returns EOF
// (or a reset) before within passes. within bounds a failing test, and
// is not what the test waits on: a server that closes returns at once.
func closedByServer(t *testing.T, c net.Conn, r *bufio.Reader, within time.Duration) bool {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(within)); err != nil {
		t.Fatal(err)
	}
	_, err := r.ReadByte()
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return false
	case err != nil: // a reset
		return true
	}
	t.Fatal("the server sent a byte nobody asked for")
	return false
}

// TestIdleKeepAliveClosed: a keep-alive connection that got its page and
// asks for nothing more is closed after Idle.
func TestIdleKeepAliveClosed(t *testing.T) {
	addr := serve(t, Timeouts{Idle: 50 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: node\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the server closed the connection with its response: not a keep-alive test")
	}
	if !closedByServer(t, c, r, 5*time.Second) {
		t.Fatal("an idle keep-alive connection is still open")
	}
}

// TestTrickledHeadersCut: a client that sends half a request and stops is
// cut after ReadHeader.
func TestTrickledHeadersCut(t *testing.T) {
	addr := serve(t, Timeouts{ReadHeader: 50 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: no"); err != nil {
		t.Fatal(err)
	}
	if !closedByServer(t, c, bufio.NewReader(c), 5*time.Second) {
		t.Fatal("a connection that stopped inside its headers is still open")
	}
}

func TestDefaults(t *testing.T) {
	s := NewServer(http.NotFoundHandler(), Timeouts{})
	if s.ReadHeaderTimeout != DefaultReadHeader || s.ReadTimeout != DefaultRead || s.IdleTimeout != DefaultIdle {
		t.Fatalf("timeouts %v %v %v, want the defaults", s.ReadHeaderTimeout, s.ReadTimeout, s.IdleTimeout)
	}
	if s := NewServer(http.NotFoundHandler(), Timeouts{Read: -1}); s.ReadTimeout != 0 || s.IdleTimeout != DefaultIdle {
		t.Fatalf("Read -1: read %v idle %v, want none and the default idle", s.ReadTimeout, s.IdleTimeout)
	}
}
