package zonehost

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardwise/shardwise/internal/nodehttp"
)

// TestMetricsServerTimeouts: the node's metrics and probes address closes
// idle keep-alive connections and bounds reading a request
// (internal/nodehttp, whose tests show the timeouts at work): without
// them a probe or a scraper that keeps its connection holds a file
// descriptor for ever.
func TestMetricsServerTimeouts(t *testing.T) {
	m, err := serveMetrics("127.0.0.1:0", prometheus.NewRegistry(), func(context.Context) (string, error) { return "ok", nil }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer m.stop()
	if s := m.srv; s.IdleTimeout != nodehttp.DefaultIdle || s.ReadTimeout != nodehttp.DefaultRead || s.ReadHeaderTimeout != nodehttp.DefaultReadHeader {
		t.Fatalf("idle %v, read %v, read header %v: want nodehttp's defaults", s.IdleTimeout, s.ReadTimeout, s.ReadHeaderTimeout)
	}
}
