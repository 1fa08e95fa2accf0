package gateway

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the gateway's Prometheus collectors. The user registers them
// (Collectors) where they want, or nowhere.
type Metrics struct {
	sessions   prometheus.Gauge
	logins     *prometheus.CounterVec // result
	closes     *prometheus.CounterVec // code
	messagesIn *prometheus.CounterVec // kind
	refused    *prometheus.CounterVec // code
	batchesOut prometheus.Counter
	bytesOut   prometheus.Counter

	connsRefused prometheus.Counter
}

// NewMetrics returns a fresh, unregistered set of collectors.
func NewMetrics() *Metrics {
	const ns, sub = "shardwise", "gateway"
	return &Metrics{
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "sessions",
			Help: "Logged-in client connections on this node.",
		}),
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "logins_total",
			Help: "Login and resume attempts by result (ok, resumed, or the refusing error code).",
		}, []string{"result"}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "closes_total",
			Help: "Sockets closed by the server or the client, by reason code (LOGOUT, CLIENT for a client's close or a broken socket).",
		}, []string{"code"}),
		messagesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "messages_in_total",
			Help: "Client messages accepted, by kind (login, input, ping, logout).",
		}, []string{"kind"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "refused_total",
			Help: "Client messages dropped or refused, by error code (GATEWAY.RATE_LIMITED, GATEWAY.NOT_YOURS, ...).",
		}, []string{"code"}),
		batchesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "batches_out_total",
			Help: "Tick batches written to clients.",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "bytes_out_total",
			Help: "Bytes of server messages written to clients (before WebSocket framing).",
		}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "conns_refused_total",
			Help: "TCP connections closed as they were accepted: their remote address already had Limits.MaxConnsPerAddr open.",
		}),
	}
}

// Collectors returns the collectors for the caller to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.sessions, m.logins, m.closes, m.messagesIn, m.refused, m.batchesOut, m.bytesOut, m.connsRefused}
}
