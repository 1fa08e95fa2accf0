package econ

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shardwise/shardwise/netting"
)

// Stats are one economy node's numbers since Start, for an observer (the
// demo's dashboard) that shows them live: read from the node's own
// Prometheus series (Collectors), so they are the numbers /metrics serves.
type Stats struct {
	Name string `json:"name"`
	// Ready, Fenced and Closed are Status's.
	Ready  bool `json:"ready"`
	Fenced bool `json:"fenced"`
	Closed bool `json:"closed"`
	// Accepted and Rejected count the movements Record accepted and
	// rejected (by the ledger's rules); the other outcomes (misrouted,
	// not ready, stopped, errors) are in neither.
	Accepted int64 `json:"accepted"`
	Rejected int64 `json:"rejected"`
	// SettledSessions counts the sessions the node settled (rotations,
	// view changes, close, operator calls).
	SettledSessions int64 `json:"settledSessions"`
	// SettlePostings and SettledMovements are what those settles wrote
	// and settled (shardwise_econ_settle_postings_total and
	// shardwise_econ_settled_movements_total: sweeps of orphans are in
	// neither); NettingRatio is SettledMovements / SettlePostings, the
	// movements per posting, 0 until a settle wrote a posting.
	SettlePostings   int64   `json:"settlePostings"`
	SettledMovements int64   `json:"settledMovements"`
	NettingRatio     float64 `json:"nettingRatio"`
	// OrphansSwept counts the orphan sessions (of dead nodes) the node's
	// sweep settled.
	OrphansSwept int64 `json:"orphansSwept"`
	// SessionsOpen is the node's open sessions with movements journaled
	// and not settled. Stats does not ask the store, so it leaves this 0;
	// OpenSessions counts it for every node at once (a dead node's open
	// sessions are the orphans the sweep will settle).
	SessionsOpen int `json:"sessionsOpen"`
}

// Names of the series Stats reads (metrics.go).
const (
	seriesRecords          = "shardwise_econ_records_total"
	seriesSettledSessions  = "shardwise_econ_settled_sessions_total"
	seriesSettlePostings   = "shardwise_econ_settle_postings_total"
	seriesSettledMovements = "shardwise_econ_settled_movements_total"
	seriesSwept            = "shardwise_econ_swept_orphans_total"
)

// Stats reads the node's counters. It does no I/O and may be called at
// any time, from any goroutine, also after Close or Halt (the counters
// keep their last values).
func (n *Node) Stats() Stats {
	st := n.Status()
	s := Stats{Name: st.Name, Ready: st.Ready, Fenced: st.Fenced, Closed: st.Closed}
	// A registry of our own: gathering is the series' one public reader.
	reg := prometheus.NewRegistry()
	for _, c := range n.Collectors() {
		if err := reg.Register(c); err != nil {
			n.log.Warn("econ: stats: register a series", "err", err)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		n.log.Warn("econ: stats: gather the series", "err", err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			v := int64(m.GetCounter().GetValue())
			switch f.GetName() {
			case seriesRecords:
				switch label(m, "result") {
				case "accepted":
					s.Accepted += v
				case "rejected":
					s.Rejected += v
				}
			case seriesSettledSessions:
				s.SettledSessions += v
			case seriesSettlePostings:
				s.SettlePostings += v
			case seriesSettledMovements:
				s.SettledMovements += v
			case seriesSwept:
				s.OrphansSwept += v
			}
		}
	}
	if s.SettlePostings > 0 {
		s.NettingRatio = float64(s.SettledMovements) / float64(s.SettlePostings)
	}
	return s
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// OpenSessions counts, by node name, the sessions store holds with
// movements journaled and not yet settled: a live node's open epochs, and
// a dead node's orphans until a sweep settles them. One query for the
// whole cluster (netting.SessionStore.ListUnsettled).
func OpenSessions(ctx context.Context, store netting.SessionStore) (map[string]int, error) {
	list, err := store.ListUnsettled(ctx, 0)
	if err != nil {
		return nil, err
	}
	open := make(map[string]int)
	for _, u := range list {
		if u.Records > 0 {
			open[u.NodeID]++
		}
	}
	return open, nil
}
