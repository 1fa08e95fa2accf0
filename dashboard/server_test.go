package dashboard_test

import (
	"bufio"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/dashboard"
	"github.com/shardwise/shardwise/errcode"
)

// TestServerServesAndCloses: Listen serves the page and the stream at the
// address it reports; Close ends an open stream, returns, and may be
// called again; an address that cannot be listened on is a config error
// naming the field given.
func TestServerServesAndCloses(t *testing.T) {
	col := dashboard.NewCollector(dashboard.CollectorConfig{})
	s, err := dashboard.Listen("--dashboard", "127.0.0.1:0", col, dashboard.HandlerConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if r := get(t, "http://"+s.Addr()+"/"); r.StatusCode != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %q", r.StatusCode, r.Header.Get("Content-Type"))
	}
	resp := get(t, "http://"+s.Addr()+"/events")
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "event: snapshot") {
		t.Fatalf("first line of the stream %q, %v", line, err)
	}
	if err := s.Close(); err != nil { // must not wait for the browser
		t.Fatalf("Close with a stream open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	_, err = dashboard.Listen("--dashboard", s.Addr()+"x", col, dashboard.HandlerConfig{}, nil)
	var ce *errcode.ConfigError
	if !errors.As(err, &ce) || ce.Field != "--dashboard" {
		t.Fatalf("Listen on a bad address: %v, want a config error naming --dashboard", err)
	}
}
