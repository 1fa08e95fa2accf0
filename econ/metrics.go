package econ

import (
	"errors"
	"sync"

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
	// postings and netted are what this node's settles wrote and settled
	// (netted / postings is its netting ratio); the sweep's settles of
	// orphans are not in them (the sweep reports no counts).
	postings prometheus.Counter
	netted   prometheus.Counter
	swept    prometheus.Counter
	// expired and claimed count the escrow sweep's decisions (escrow.go).
	expired prometheus.Counter
	claimed prometheus.Counter
	// breaches sums netting.ClusterNode.Breaches over every generation the
	// node has opened (a scrape never waits for a view change's gate).
	breaches prometheus.CounterFunc
	gensMu   sync.Mutex
	gens     []*netting.ClusterNode
}

// watchBreaches adds a generation's breaches to the counter.
func (m *metrics) watchBreaches(cn *netting.ClusterNode) {
	m.gensMu.Lock()
	m.gens = append(m.gens, cn)
	m.gensMu.Unlock()
}

func (m *metrics) breachTotal() float64 {
	m.gensMu.Lock()
	defer m.gensMu.Unlock()
	var sum int64
	for _, cn := range m.gens {
		sum += cn.Breaches()
	}
	return float64(sum)
}

func newMetrics() *metrics {
	const ns, sub = "shardwise", "econ"
	m := &metrics{
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
		postings: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "settle_postings_total",
			Help: "Ledger postings this node's settles wrote (sweeps of orphans excluded).",
		}),
		netted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "settled_movements_total",
			Help: "Journaled movements this node's settles settled (sweeps of orphans excluded); divided by settle_postings_total, the netting ratio.",
		}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "swept_orphans_total",
			Help: "Orphan sessions (of dead nodes) this node's sweep settled.",
		}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "escrows_expired_total",
			Help: "Escrows (trades) this node's escrow sweep cancelled: their decider left them past the escrow bound.",
		}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "escrow_claims_total",
			Help: "Claims of ended escrows this node's escrow sweep recorded for a decider that did not.",
		}),
	}
	m.breaches = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "settle_breaches_total",
		Help: "Invariant breaches this node's settles met: a netted chunk or an accepted movement the ledger refused, which the spending rule makes impossible. Alert on any.",
	}, m.breachTotal)
	return m
}

// Collectors returns the node's Prometheus collectors for the caller to
// register.
func (n *Node) Collectors() []prometheus.Collector {
	m := n.met
	return []prometheus.Collector{m.records, m.ready, m.members, m.views, m.settled, m.postings, m.netted, m.swept, m.expired, m.claimed, m.breaches}
}

// settledAll counts settles: every report a session, and what a settle
// that did the work (not one that found it done) wrote and settled.
func (m *metrics) settledAll(reps []netting.SettleReport) {
	m.settled.Add(float64(len(reps)))
	for _, r := range reps {
		if !r.AlreadySettled {
			m.postings.Add(float64(r.Postings))
			m.netted.Add(float64(r.Netted))
		}
	}
}

// escrows counts an escrow sweep's decisions.
func (m *metrics) escrows(sum EscrowSweepSummary) {
	m.expired.Add(float64(len(sum.Expired)))
	m.claimed.Add(float64(sum.Claimed))
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
