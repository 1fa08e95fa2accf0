package dashboard

import (
	"testing"

	"github.com/shardwise/shardwise/internal/nodehttp"
)

// TestServerTimeouts: the dashboard's address closes idle keep-alive
// connections and bounds reading headers (internal/nodehttp, whose tests
// show the timeouts at work), but sets no read timeout: the server would
// cancel the /events stream at its read deadline.
func TestServerTimeouts(t *testing.T) {
	s, err := Listen("--dashboard", "127.0.0.1:0", NewCollector(CollectorConfig{}), HandlerConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.srv.IdleTimeout != nodehttp.DefaultIdle || s.srv.ReadHeaderTimeout != nodehttp.DefaultReadHeader || s.srv.ReadTimeout != 0 {
		t.Fatalf("idle %v, read header %v, read %v: want nodehttp's idle and header defaults and no read timeout",
			s.srv.IdleTimeout, s.srv.ReadHeaderTimeout, s.srv.ReadTimeout)
	}
}
