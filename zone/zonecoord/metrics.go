package zonecoord

import "github.com/prometheus/client_golang/prometheus"

// metrics are one node's gauges. They are created per Ownership and never
// registered globally; the user registers them (Collectors) where they
// want. Two nodes in one registry need distinguishing labels, for example
// with prometheus.WrapRegistererWith.
type metrics struct {
	owned   prometheus.Gauge
	version prometheus.Gauge
	fenced  prometheus.Gauge
}

func newMetrics() *metrics {
	const ns, sub = "shardwise", "zone"
	return &metrics{
		owned: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "owned_regions",
			Help: "Regions the held region table gives this node (0 once fenced).",
		}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "table_version",
			Help: "Version of the region table this node holds (0 before the first).",
		}),
		fenced: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "fenced",
			Help: "1 once the node's lease is lost or it is closed, else 0.",
		}),
	}
}

// Collectors returns the node's Prometheus collectors for the caller to
// register: owned regions, held table version and the fenced flag.
func (o *Ownership) Collectors() []prometheus.Collector {
	return []prometheus.Collector{o.met.owned, o.met.version, o.met.fenced}
}
