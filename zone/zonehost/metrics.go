package zonehost

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/zone"
)

// hostMetrics are what a Host serves besides its Ownership's gauges: the
// node's tick, its entities by state and by region, its render ghosts and
// its handoffs. They are set by the goroutine that owns the runtime, after
// every tick, so a scrape sees the node as it stood at the end of a tick.
type hostMetrics struct {
	tick         prometheus.Gauge
	entities     *prometheus.GaugeVec
	regions      *prometheus.GaugeVec
	renderGhosts prometheus.Gauge
	handoffs     *prometheus.CounterVec
	intents      *prometheus.CounterVec

	// shown[r] is the count region r's series shows; a region with no
	// simulated entity has no series (a node owns a few of many regions).
	shown  map[cells.RegionID]int
	handed zone.HandoffStats // the counters already added
	linked zone.ClusterStats // the intent counters already added
}

func newHostMetrics() *hostMetrics {
	const ns, sub = "shardwise", "zone"
	return &hostMetrics{
		tick: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "tick",
			Help: "The last tick this node ran.",
		}),
		entities: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "entities",
			Help: "Entities of this node by state: simulated, or frozen (in a handoff: not yet acked by the target, or taken over and waiting for the source's last tick to pass).",
		}, []string{"state"}),
		regions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "region_entities",
			Help: "Entities this node simulates standing in each region (regions with none are not listed).",
		}, []string{"region"}),
		renderGhosts: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "render_ghosts",
			Help: "Entities of other nodes this node holds as render ghosts.",
		}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "handoffs_total",
			Help: "Entity handoffs by event: sent, acked, refused, aborted (this node as source); adopted (as target); stale (messages naming an epoch not expected).",
		}, []string{"event"}),
		intents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "intents_dropped_total",
			Help: "Intents this node took and could not deliver, by reason: lapsed (no node known to simulate the target), hold_full (past the 64 an entity may wait for), stale (for a stale owner), unconfirmed (sent to a peer that died before confirming them: it may have applied some), unadopted (held for a dead peer's entity that no node brought back within the fence hold), unsent (the link refused them).",
		}, []string{"reason"}),
		shown: map[cells.RegionID]int{},
	}
}

func (m *hostMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.tick, m.entities, m.regions, m.renderGhosts, m.handoffs, m.intents}
}

// update sets the metrics from one tick's report and the per-region counts
// of simulated entities (counts is read, not kept).
func (m *hostMetrics) update(r HostReport, counts map[cells.RegionID]int) {
	m.tick.Set(float64(r.Tick))
	m.entities.WithLabelValues("simulated").Set(float64(r.Simulated))
	m.entities.WithLabelValues("frozen").Set(float64(r.Frozen))
	m.renderGhosts.Set(float64(r.RenderGhosts))
	for region, n := range counts {
		if m.shown[region] != n {
			m.regions.WithLabelValues(strconv.Itoa(int(region))).Set(float64(n))
			m.shown[region] = n
		}
	}
	for region := range m.shown {
		if _, ok := counts[region]; !ok {
			m.regions.DeleteLabelValues(strconv.Itoa(int(region)))
			delete(m.shown, region)
		}
	}
	h, was := r.Handoff, m.handed
	for _, c := range []struct {
		event     string
		now, then int
	}{
		{"sent", h.Sent, was.Sent}, {"acked", h.Acked, was.Acked}, {"refused", h.Refused, was.Refused},
		{"aborted", h.Aborted, was.Aborted}, {"adopted", h.Adopted, was.Adopted}, {"stale", h.Stale, was.Stale},
	} {
		// WithLabelValues also makes the series exist at 0 from the first
		// tick, so "no handoff yet" reads as 0, not as missing.
		m.handoffs.WithLabelValues(c.event).Add(float64(max(c.now-c.then, 0)))
	}
	m.handed = h
	c, had := r.Cluster, m.linked
	for _, d := range []struct {
		reason    string
		now, then int
	}{
		{"lapsed", c.IntentsLapsed, had.IntentsLapsed}, {"hold_full", c.IntentsHoldFull, had.IntentsHoldFull},
		{"stale", c.IntentsStale, had.IntentsStale}, {"unconfirmed", c.IntentsUnconfirmed, had.IntentsUnconfirmed},
		{"unadopted", c.IntentsUnadopted, had.IntentsUnadopted}, {"unsent", c.IntentsUnsent, had.IntentsUnsent},
	} {
		m.intents.WithLabelValues(d.reason).Add(float64(max(d.now-d.then, 0)))
	}
	m.linked = c
}
