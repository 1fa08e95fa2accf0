package coord

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestMetricsCountWhatHappened(t *testing.T) {
	ctx := testCtx(t)
	met := NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(met); err != nil {
		t.Fatal(err)
	}
	c, err := Connect(ctx, ClientConfig{Endpoints: sharedEtcd.Endpoints(), Prefix: testPrefix(t), Metrics: met})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	a := register(t, c, RegisterConfig{Name: "zone-a", Role: "zone", TTL: 2 * time.Second})
	if _, err := c.Register(ctx, RegisterConfig{Name: "zone-a", Role: "zone"}); err == nil {
		t.Fatal("second zone-a registered")
	}
	if got := gauge(t, reg, "shardwise_coord_registrations_total", "result", "ok"); got != 1 {
		t.Fatalf("registrations ok = %v, want 1", got)
	}
	if got := gauge(t, reg, "shardwise_coord_registrations_total", "result", CodeNameTaken); got != 1 {
		t.Fatalf("registrations %s = %v, want 1", CodeNameTaken, got)
	}

	if err := c.ApplyRegions(ctx, table(t, 1, "zone-a"), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = c.ApplyRegions(ctx, table(t, 1, "zone-a"), ApplyOptions{})
	if got := gauge(t, reg, "shardwise_coord_region_applies_total", "result", "ok"); got != 1 {
		t.Fatalf("applies ok = %v", got)
	}
	if got := gauge(t, reg, "shardwise_coord_region_applies_total", "result", CodeRegionsConflict); got != 1 {
		t.Fatalf("applies conflict = %v", got)
	}

	// Renewals are counted and the headroom is published while live.
	eventually(t, 30*time.Second, "a counted renewal", func() bool {
		return gauge(t, reg, "shardwise_coord_lease_renewals_total", "result", "ok") >= 1
	})
	if h := gauge(t, reg, "shardwise_coord_fence_headroom_seconds", "node", "zone-a"); h <= 0 || h > a.TTL().Seconds() {
		t.Fatalf("headroom %v s, want within (0, %v]", h, a.TTL().Seconds())
	}
	if _, err := c.cli.Revoke(ctx, clientv3.LeaseID(a.LeaseID())); err != nil {
		t.Fatal(err)
	}
	<-a.Lost()
	if got := gauge(t, reg, "shardwise_coord_leases_lost_total", "reason", LostExpired); got != 1 {
		t.Fatalf("leases lost (expired) = %v, want 1", got)
	}
	if n := series(t, reg, "shardwise_coord_fence_headroom_seconds"); n != 0 {
		t.Fatalf("%d headroom series after the loss, want 0", n)
	}
}

// gauge returns the value of the series of name with label = value (0 if
// absent), counter or gauge.
func gauge(t *testing.T, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// series counts the series of name.
func series(t *testing.T, reg prometheus.Gatherer, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}
