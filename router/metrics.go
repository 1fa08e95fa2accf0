package router

import "github.com/prometheus/client_golang/prometheus"

// Mark-down reasons, the "reason" label of the mark-downs counter and the
// "reason" attribute of the mark-down log event.
const (
	ReasonExecute = "execute" // a call through Execute or ExecuteAll failed
	ReasonProbe   = "probe"   // FailureThreshold consecutive probes failed
	ReasonManual  = "manual"  // the user called MarkDown
)

// metrics are the router's Prometheus collectors. Each router owns its own
// set; the user registers them (Collectors) where they want, or nowhere. Two
// routers in one registry need distinguishing labels, for example with
// prometheus.WrapRegistererWith.
type metrics struct {
	routes        *prometheus.CounterVec // node
	failovers     prometheus.Counter
	markDowns     *prometheus.CounterVec // node, reason
	probeFailures *prometheus.CounterVec // node
	reconnects    *prometheus.CounterVec // node
	liveNodes     prometheus.Gauge
}

func newMetrics() *metrics {
	const ns, sub = "shardwise", "router"
	return &metrics{
		routes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "routes_total",
			Help: "Keys routed to a node (Route, RouteAll, and every attempt of Execute and ExecuteAll).",
		}, []string{"node"}),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "failovers_total",
			Help: "Times Execute moved on from a failed node to the next replica.",
		}),
		markDowns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "mark_downs_total",
			Help: "Nodes taken off the ring, by reason (execute, probe, manual).",
		}, []string{"node", "reason"}),
		probeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "probe_failures_total",
			Help: "Failed health probes (error, timeout, or previous probe still running).",
		}, []string{"node"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "reconnect_attempts_total",
			Help: "Background reconnect attempts of nodes that were marked down.",
		}, []string{"node"}),
		liveNodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "live_nodes",
			Help: "Nodes currently on the ring.",
		}),
	}
}

// Collectors returns the router's Prometheus collectors for the caller to
// register: routes, failovers, mark-downs, probe failures, reconnect
// attempts and live nodes.
func (r *Router[C]) Collectors() []prometheus.Collector {
	m := r.metrics
	return []prometheus.Collector{m.routes, m.failovers, m.markDowns, m.probeFailures, m.reconnects, m.liveNodes}
}
