package link

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Stream names one of the two streams of a peer connection.
type Stream string

const (
	StreamReplication Stream = "replication"
	StreamControl     Stream = "control"
)

// Reasons a frame is dropped, the "reason" label of
// shardwise_link_dropped_total.
const (
	DropQueueFull = "queue_full" // replication queue full at the sender: the oldest batch went
	DropDuplicate = "duplicate"  // receiver saw a seq it had already accepted
	DropGap       = "gap"        // receiver saw replication seqs skipped (lost in flight)
	DropExpired   = "expired"    // request whose deadline passed before it ran or was sent
	DropLost      = "lost"       // control frames the sender no longer holds and the receiver never saw (defensive; acks should make it impossible)
	DropClosed    = "closed"     // still queued when the peer was removed or the node closed
	DropNoHandler = "no_handler" // one-way message of a kind with no handler
)

// Metrics are the link's Prometheus collectors. A Metrics is a
// prometheus.Collector; the user registers it (there is no global registry).
// One Metrics may be shared by several nodes only if they register it once.
type Metrics struct {
	sent       *prometheus.CounterVec
	received   *prometheus.CounterVec
	dropped    *prometheus.CounterVec
	reconnects *prometheus.CounterVec
	queueDepth *prometheus.GaugeVec
}

// NewMetrics returns unregistered collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardwise_link_sent_total",
			Help: "Frames written to a peer stream.",
		}, []string{"peer", "stream"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardwise_link_received_total",
			Help: "Frames accepted from a peer stream (duplicates excluded).",
		}, []string{"peer", "stream"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardwise_link_dropped_total",
			Help: "Frames dropped, by stream and reason.",
		}, []string{"peer", "stream", "reason"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardwise_link_reconnects_total",
			Help: "Connection attempts to a peer after the first.",
		}, []string{"peer"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardwise_link_queue_depth",
			Help: "Frames waiting in a peer's send queue.",
		}, []string{"peer", "stream"}),
	}
}

func (m *Metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.sent, m.received, m.dropped, m.reconnects, m.queueDepth}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all() {
		c.Collect(ch)
	}
}

// Sent, Received, Dropped and Reconnects read a counter; tests and the
// dashboard use them without scraping.
func (m *Metrics) Sent(peer string, s Stream) float64 {
	return metricValue(m.sent.WithLabelValues(peer, string(s)))
}
func (m *Metrics) Received(peer string, s Stream) float64 {
	return metricValue(m.received.WithLabelValues(peer, string(s)))
}
func (m *Metrics) Dropped(peer string, s Stream, reason string) float64 {
	return metricValue(m.dropped.WithLabelValues(peer, string(s), reason))
}
func (m *Metrics) Reconnects(peer string) float64 {
	return metricValue(m.reconnects.WithLabelValues(peer))
}
func (m *Metrics) QueueDepth(peer string, s Stream) float64 {
	return metricValue(m.queueDepth.WithLabelValues(peer, string(s)))
}

func metricValue(c prometheus.Metric) float64 {
	var pb dto.Metric
	if err := c.Write(&pb); err != nil {
		return 0
	}
	switch {
	case pb.Counter != nil:
		return pb.Counter.GetValue()
	case pb.Gauge != nil:
		return pb.Gauge.GetValue()
	}
	return 0
}

// forgetPeer removes a removed peer's series so label sets do not pile up.
func (m *Metrics) forgetPeer(peer string) {
	for _, s := range []Stream{StreamReplication, StreamControl} {
		m.queueDepth.DeleteLabelValues(peer, string(s))
	}
}
