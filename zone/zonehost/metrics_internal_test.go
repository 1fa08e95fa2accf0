package zonehost

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/shardwise/shardwise/zone"
)

// TestIntentsDroppedMetric: shardwise_zone_intents_dropped_total follows
// the runtime's per-reason counters (ClusterStats), adding each tick's
// increase, every reason shown from the first tick.
func TestIntentsDroppedMetric(t *testing.T) {
	m := newHostMetrics()
	value := func(reason string) float64 {
		var d dto.Metric
		if err := m.intents.WithLabelValues(reason).Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetCounter().GetValue()
	}
	m.update(HostReport{}, nil)
	m.update(HostReport{Cluster: zone.ClusterStats{IntentsUnconfirmed: 3, IntentsLapsed: 1}}, nil)
	m.update(HostReport{Cluster: zone.ClusterStats{IntentsUnconfirmed: 5, IntentsLapsed: 1, IntentsUnadopted: 2}}, nil)
	for reason, want := range map[string]float64{"unconfirmed": 5, "lapsed": 1, "unadopted": 2, "hold_full": 0, "stale": 0, "unsent": 0} {
		if got := value(reason); got != want {
			t.Errorf("reason %s: %v, want %v", reason, got, want)
		}
	}
}
