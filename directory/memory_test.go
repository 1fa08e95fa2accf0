package directory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/directory/dirtest"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/logintoken"
)

var start = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

const ttl = 10 * time.Second

func newMemory(t *testing.T) (*directory.Memory, *clock.Fake) {
	t.Helper()
	fc := clock.NewFake(start)
	m, err := directory.NewMemory(directory.MemoryConfig{LeaseTTL: ttl, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	return m, fc
}

func memoryControls(fc *clock.Fake) dirtest.Controls {
	return dirtest.Controls{
		Expire:       func(t *testing.T, _ account.ID) { fc.Advance(ttl) },
		ExpireResume: func(t *testing.T, _ account.ID) { fc.Advance(time.Second) },
		Now:          fc.Now,
	}
}

func TestMemoryContract(t *testing.T) {
	dirtest.Run(t, func(t *testing.T) (directory.Directory, dirtest.Controls) {
		m, fc := newMemory(t)
		return m, memoryControls(fc)
	})
}

// The wrapper must be transparent: the same suite passes through it.
func TestInstrumentedContract(t *testing.T) {
	dirtest.Run(t, func(t *testing.T) (directory.Directory, dirtest.Controls) {
		m, fc := newMemory(t)
		return directory.Instrument(m, directory.NewMetrics(), nil), memoryControls(fc)
	})
}

func TestMemoryLeaseExactTTL(t *testing.T) {
	m, fc := newMemory(t)
	ctx := context.Background()
	s, _, err := m.Connect(ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !s.LeaseExpiry.Equal(start.Add(ttl)) {
		t.Fatalf("lease expiry %v, want %v", s.LeaseExpiry, start.Add(ttl))
	}
	fc.Advance(ttl - time.Nanosecond)
	if _, err := m.Lookup(ctx, 1); err != nil {
		t.Fatalf("lookup just before expiry: %v", err)
	}
	r, err := m.Renew(ctx, 1, s.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	if want := start.Add(2*ttl - time.Nanosecond); !r.LeaseExpiry.Equal(want) {
		t.Fatalf("renewed expiry %v, want %v", r.LeaseExpiry, want)
	}
	fc.Advance(ttl - time.Nanosecond)
	if _, err := m.Lookup(ctx, 1); err != nil {
		t.Fatalf("renewed lease expired early: %v", err)
	}
	fc.Advance(time.Nanosecond)
	if _, err := m.Lookup(ctx, 1); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("lookup at expiry: %v", err)
	}
}

// Epochs come from the clock when it is ahead of the counter, and from the
// counter when connects are faster than the clock's resolution.
func TestMemoryEpochRule(t *testing.T) {
	m, fc := newMemory(t)
	ctx := context.Background()
	s1, _, _ := m.Connect(ctx, 1, 1)
	if want := directory.Epoch(start.UnixMicro()); s1.Epoch != want {
		t.Fatalf("first epoch %d, want the clock in µs %d", s1.Epoch, want)
	}
	s2, _, _ := m.Connect(ctx, 1, 1) // same instant
	if s2.Epoch != s1.Epoch+1 {
		t.Fatalf("second epoch in the same µs %d, want %d", s2.Epoch, s1.Epoch+1)
	}
	fc.Set(start.Add(-time.Hour)) // the clock steps back: the counter still rules
	s3, _, _ := m.Connect(ctx, 1, 1)
	if s3.Epoch != s2.Epoch+1 {
		t.Fatalf("epoch after the clock stepped back %d, want %d", s3.Epoch, s2.Epoch+1)
	}
}

// After CounterRetention of silence the counters are gone: epochs still go
// up (time floor), the route-version floor is forgotten.
func TestMemoryCounterRetention(t *testing.T) {
	fc := clock.NewFake(start)
	m, err := directory.NewMemory(directory.MemoryConfig{LeaseTTL: ttl, CounterRetention: time.Minute, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, _, _ := m.Connect(ctx, 1, 1)
	if _, err := m.SetMaster(ctx, 1, s.Epoch, directory.Route{Node: 2, Version: 5}); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Minute)
	s2, _, _ := m.Connect(ctx, 1, 1)
	if s2.Epoch <= s.Epoch || s2.Master.Version != 0 {
		t.Fatalf("after retention: %+v (first epoch %d)", s2, s.Epoch)
	}
}

func TestMemoryTokenClaimExpires(t *testing.T) {
	m, fc := newMemory(t)
	ctx := context.Background()
	id := logintoken.ID{1}
	if err := m.ClaimToken(ctx, id, start.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Minute - time.Nanosecond)
	if err := m.ClaimToken(ctx, id, start.Add(2*time.Minute)); !errors.Is(err, logintoken.ErrReplayed) {
		t.Fatalf("claim before until: %v", err)
	}
	fc.Advance(time.Nanosecond)
	// Past `until` no verifier accepts the token any more, so forgetting it
	// is safe; the record must not pile up forever.
	if err := m.ClaimToken(ctx, id, start.Add(2*time.Minute)); err != nil {
		t.Fatalf("claim after until: %v", err)
	}
}

func TestMemoryConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg   directory.MemoryConfig
		field string
	}{
		{directory.MemoryConfig{LeaseTTL: -time.Second}, "LeaseTTL"},
		{directory.MemoryConfig{LeaseTTL: time.Microsecond}, "LeaseTTL"},
		{directory.MemoryConfig{LeaseTTL: time.Hour, CounterRetention: time.Minute}, "CounterRetention"},
	} {
		err := tc.cfg.Validate()
		var ce *errcode.ConfigError
		if !errors.Is(err, errcode.ErrConfigInvalid) || !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("Validate(%+v) = %v, want a config error on %s", tc.cfg, err, tc.field)
		}
		if _, err := directory.NewMemory(tc.cfg); !errors.Is(err, errcode.ErrConfigInvalid) {
			t.Errorf("NewMemory(%+v) = %v", tc.cfg, err)
		}
	}
	if err := (directory.MemoryConfig{}).Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func TestInstrumentedCounts(t *testing.T) {
	m, _ := newMemory(t)
	met := directory.NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(met.Collectors()...)
	d := directory.Instrument(m, met, nil)
	ctx := context.Background()
	old, _, _ := d.Connect(ctx, 1, 1)
	cur, _, _ := d.Connect(ctx, 1, 2)
	_, _ = d.Renew(ctx, 1, old.Epoch)
	_, _ = d.SetMaster(ctx, 1, cur.Epoch, directory.Route{Node: 1, Version: 2})
	_, _ = d.SetMaster(ctx, 1, cur.Epoch, directory.Route{Node: 1, Version: 1})
	_, _ = d.Lookup(ctx, 999)
	_ = d.ClaimToken(ctx, logintoken.ID{1}, start.Add(time.Minute))
	_ = d.ClaimToken(ctx, logintoken.ID{1}, start.Add(time.Minute))
	if err := reg.Register(met.Collectors()[0]); err == nil {
		t.Fatal("registering the same collectors twice succeeded")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	stale := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "shardwise_directory_stale_refusals_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			stale[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	if len(stale) != 2 || stale[directory.OpRenew] != 1 || stale[directory.OpSetMaster] != 1 {
		t.Errorf("stale refusals = %v, want renew 1 and set_master 1", stale)
	}
	for _, c := range []struct {
		op, result string
		n          float64
	}{
		{directory.OpConnect, directory.ResultOK, 2},
		{directory.OpRenew, directory.ResultStaleEpoch, 1},
		{directory.OpSetMaster, directory.ResultOK, 1},
		{directory.OpSetMaster, directory.ResultStaleRoute, 1},
		{directory.OpLookup, directory.ResultNotFound, 1},
		{directory.OpClaimToken, directory.ResultOK, 1},
		{directory.OpClaimToken, directory.ResultReplayed, 1},
	} {
		got := counterValue(t, met.Operations().WithLabelValues(c.op, c.result))
		if got != c.n {
			t.Errorf("operations{op=%q,result=%q} = %v, want %v", c.op, c.result, got, c.n)
		}
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A renewal restarts the resume window: the credential of a session that
// stays alive never runs out, and runs out a window after the last sign
// of life.
func TestMemoryRenewRestartsTheResumeWindow(t *testing.T) {
	ctx := context.Background()
	for _, renew := range []bool{true, false} {
		m, fc := newMemory(t)
		s, _, err := m.Connect(ctx, 7, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.ArmResume(ctx, 7, s.Epoch, directory.ResumeHash{1}, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		fc.Advance(4 * time.Second)
		if renew {
			if _, err := m.Renew(ctx, 7, s.Epoch); err != nil {
				t.Fatal(err)
			}
		}
		fc.Advance(4 * time.Second)
		_, _, err = m.Resume(ctx, 7, s.Epoch, directory.ResumeHash{1}, 2)
		if renew && err != nil {
			t.Fatalf("resume 4 s after a renewal, window 5 s: %v", err)
		}
		if !renew && !errors.Is(err, directory.ErrResumeRefused) {
			t.Fatalf("resume 8 s after arming with no renewal, window 5 s: %v, want refused", err)
		}
	}
}
