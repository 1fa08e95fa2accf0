package coord

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCampaignOneLeaderThenTheNext(t *testing.T) {
	c1 := connect(t, sharedEtcd.Endpoints(), nil)
	c2 := connect(t, sharedEtcd.Endpoints(), nil)
	ctx := testCtx(t)
	if _, err := c1.Leader(ctx, "failover"); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader before any campaign: %v, want ErrNoLeader", err)
	}
	l1, err := c1.Campaign(ctx, CampaignConfig{Election: "failover", Value: "zone-1", TTL: time.Second})
	if err != nil {
		t.Fatalf("Campaign zone-1: %v", err)
	}
	won := make(chan *Leadership, 1)
	go func() {
		l2, err := c2.Campaign(ctx, CampaignConfig{Election: "failover", Value: "zone-2", TTL: time.Second})
		if err != nil {
			t.Errorf("Campaign zone-2: %v", err)
		}
		won <- l2
	}()
	if v, err := c1.Leader(ctx, "failover"); err != nil || v != "zone-1" {
		t.Fatalf("Leader = %q, %v; want zone-1", v, err)
	}
	select {
	case <-won:
		t.Fatal("the second candidate won while the first leads")
	default:
	}
	if err := l1.Resign(); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if err := l1.Resign(); err != nil {
		t.Fatalf("second Resign: %v", err)
	}
	if !isClosed(l1.Done()) {
		t.Fatal("Done not closed after Resign")
	}
	l2 := <-won
	if l2 == nil {
		t.FailNow()
	}
	if v, err := c2.Leader(ctx, "failover"); err != nil || v != "zone-2" {
		t.Fatalf("Leader = %q, %v; want zone-2", v, err)
	}
	_ = c2.Close() // resigns
	if _, err := c1.Leader(ctx, "failover"); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader after the client closed: %v, want ErrNoLeader", err)
	}
}

func TestCampaignGivesUpWithItsContext(t *testing.T) {
	c1 := connect(t, sharedEtcd.Endpoints(), nil)
	c2 := connect(t, sharedEtcd.Endpoints(), nil)
	if _, err := c1.Campaign(testCtx(t), CampaignConfig{Election: "e", Value: "a", TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	if _, err := c2.Campaign(ctx, CampaignConfig{Election: "e", Value: "b", TTL: time.Second}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Campaign with a cancelled context: %v", err)
	}
}

func TestApplyFencedByLeadership(t *testing.T) {
	c := connect(t, sharedEtcd.Endpoints(), nil)
	ctx := testCtx(t)
	register(t, c, RegisterConfig{Role: "zone", Name: "a", TTL: time.Second})
	l, err := c.Campaign(ctx, CampaignConfig{Election: "e", Value: "a", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyRegions(ctx, table(t, 1, "a"), ApplyOptions{Leader: l, Writer: "controller a", Reason: "first"}); err != nil {
		t.Fatalf("apply while leading: %v", err)
	}
	if err := l.Resign(); err != nil {
		t.Fatal(err)
	}
	err = c.ApplyRegions(ctx, table(t, 2, "a"), ApplyOptions{Leader: l})
	wantCode(t, err, CodeNotLeader)
	if got, err := c.Regions(ctx); err != nil || got.Version() != 1 {
		t.Fatalf("after a refused apply: version %v, %v; want 1", got, err)
	}
}

func TestRegionsProvenance(t *testing.T) {
	c := connect(t, sharedEtcd.Endpoints(), nil)
	ctx := testCtx(t)
	register(t, c, RegisterConfig{Role: "zone", Name: "a", TTL: time.Second})
	if err := c.ApplyRegions(ctx, table(t, 1, "a"), ApplyOptions{Writer: "operator alice", Reason: "boot"}); err != nil {
		t.Fatal(err)
	}
	tb, p, err := c.RegionsProvenance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tb.Version() != 1 || p.Version != 1 || p.Writer != "operator alice" || p.Reason != "boot" || p.At.IsZero() {
		t.Fatalf("provenance = %+v of version %d", p, tb.Version())
	}
	// A write without a writer replaces the record: the old one must not
	// be reported for the new version.
	if err := c.ApplyRegions(ctx, table(t, 2, "a"), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, p, err = c.RegionsProvenance(ctx); err != nil || p.Version != 2 || p.Writer != "" || p.Reason != "" {
		t.Fatalf("provenance of version 2 = %+v, %v", p, err)
	}
}
