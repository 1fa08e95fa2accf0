package econ

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardwise/shardwise/netting"
)

// metrics are one node's series. They are never registered globally: the
// user registers Collectors where they want (two nodes in one registry need
// distinguishing labels, prometheus.WrapRegistererWith).
type metrics struct {
	records *prometheus.CounterVec
	ready   prometheus.Gauge
	members prometheus.Gauge
	views   prometheus.Counter
	settled prometheus.Counter
	swept   prometheus.Counter
}

func newMetrics() *metrics {
	const ns, sub = "shardwise", "econ"
	return &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "records_total",
			Help: "Record calls by result: accepted, rejected, misrouted, not_ready, stopped, error.",
		}, []string{"result"}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "ready",
			Help: "1 while the node records under a view every member adopted, else 0.",
		}),
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "view_members",
			Help: "Economy nodes in the node's current view.",
		}),
		views: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "view_changes_total",
			Help: "Views the node re-formed for (the first included).",
		}),
		settled: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "settled_sessions_total",
			Help: "Sessions this node settled: rotations, view changes, close, operator calls.",
		}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "swept_orphans_total",
			Help: "Orphan sessions (of dead nodes) this node's sweep settled.",
		}),
	}
}

// Collectors returns the node's Prometheus collectors for the caller to
// register.
func (n *Node) Collectors() []prometheus.Collector {
	m := n.met
	return []prometheus.Collector{m.records, m.ready, m.members, m.views, m.settled, m.swept}
}

func (m *metrics) record(err error) {
	m.records.WithLabelValues(resultOf(netting.Outcome{}, err)).Inc()
}

func (m *metrics) recordOutcome(out netting.Outcome, err error) {
	m.records.WithLabelValues(resultOf(out, err)).Inc()
}

func resultOf(out netting.Outcome, err error) string {
	switch {
	case err == nil && out.Status == netting.Accepted:
		return "accepted"
	case err == nil:
		return "rejected"
	case errors.Is(err, netting.ErrMisrouted):
		return "misrouted"
	case errors.Is(err, ErrNotReady):
		return "not_ready"
	case errors.Is(err, ErrClosed), errors.Is(err, ErrLeaseLost):
		return "stopped"
	}
	return "error"
}
