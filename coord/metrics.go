package coord

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardwise/shardwise/errcode"
)

// Label values of shardwise_coord_leases_lost_total's "reason".
const (
	LostExpired     = "expired"     // etcd said the lease is gone (expired or revoked)
	LostUnreachable = "unreachable" // no renewal got through within the TTL
)

// Metrics are coord's Prometheus collectors. A Metrics is a
// prometheus.Collector; the user registers it (there is no global
// registry) and passes it in ClientConfig.Metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	renewals      *prometheus.CounterVec
	lost          *prometheus.CounterVec
	registrations *prometheus.CounterVec
	applies       *prometheus.CounterVec
	headroom      *prometheus.GaugeVec
}

// NewMetrics returns unregistered collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardwise_coord_lease_renewals_total",
			Help: "Lease renewals attempted by registrations, by result (ok, error).",
		}, []string{"result"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardwise_coord_leases_lost_total",
			Help: "Registrations that lost their lease (the node stopped writing), by reason.",
		}, []string{"reason"}),
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardwise_coord_registrations_total",
			Help: "Register calls, by result: ok or the error code.",
		}, []string{"result"}),
		applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardwise_coord_region_applies_total",
			Help: "ApplyRegions calls, by result: ok or the error code.",
		}, []string{"result"}),
		headroom: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardwise_coord_fence_headroom_seconds",
			Help: "Time left before a registration's fence deadline, as of its last successful renewal.",
		}, []string{"node"}),
	}
}

func (m *Metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.renewals, m.lost, m.registrations, m.applies, m.headroom}
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

func (m *Metrics) renewal(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.renewals.WithLabelValues("ok").Inc()
	} else {
		m.renewals.WithLabelValues("error").Inc()
	}
}

func (m *Metrics) leaseLost(reason string) {
	if m != nil {
		m.lost.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) registered(err error) {
	if m != nil {
		m.registrations.WithLabelValues(resultOf(err)).Inc()
	}
}

func (m *Metrics) applied(err error) {
	if m != nil {
		m.applies.WithLabelValues(resultOf(err)).Inc()
	}
}

func (m *Metrics) setHeadroom(node string, seconds float64) {
	if m != nil {
		m.headroom.WithLabelValues(node).Set(seconds)
	}
}

func (m *Metrics) forgetNode(node string) {
	if m != nil {
		m.headroom.DeleteLabelValues(node)
	}
}

// resultOf is "ok" for nil, else the error's code ("error" if it has none).
func resultOf(err error) string {
	if err == nil {
		return "ok"
	}
	if code := errcode.Of(err); code != "" {
		return code
	}
	return "error"
}
