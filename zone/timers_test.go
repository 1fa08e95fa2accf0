package zone_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/zone"
)

func TestTimersDefaults(t *testing.T) {
	if got := (zone.Timers{}).WithDefaults(); got != zone.DefaultTimers() {
		t.Fatalf("zero timers with defaults: %+v, want %+v", got, zone.DefaultTimers())
	}
	if err := zone.DefaultTimers().Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	// A field set keeps its value; the others take theirs.
	if got := (zone.Timers{Park: 3}).WithDefaults(); got.Park != 3 || got.Hold != zone.DefaultTimers().Hold {
		t.Fatalf("Park 3 with defaults: %+v", got)
	}
}

// TestTimersValidate runs every rule of Timers.Validate once broken, through
// zone.New as a user meets it: each is refused with ZONE's config code,
// naming the field as the user wrote it.
func TestTimersValidate(t *testing.T) {
	d := zone.DefaultTimers()
	for _, tc := range []struct {
		name  string
		set   func(*zone.Timers)
		field string
	}{
		{"negative park", func(t *zone.Timers) { t.Park = -1 }, "Config.Timers.Park"},
		{"negative hold", func(t *zone.Timers) { t.Hold = -1 }, "Config.Timers.Hold"},
		{"negative resync", func(t *zone.Timers) { t.Resync = -1 }, "Config.Timers.Resync"},
		{"negative resend", func(t *zone.Timers) { t.Resend = -1 }, "Config.Timers.Resend"},
		{"negative handoff timeout", func(t *zone.Timers) { t.HandoffTimeout = -1 }, "Config.Timers.HandoffTimeout"},
		{"negative handoff retry", func(t *zone.Timers) { t.HandoffRetry = -1 }, "Config.Timers.HandoffRetry"},
		{"negative table grace", func(t *zone.Timers) { t.TableGrace = -1 }, "Config.Timers.TableGrace"},
		{"negative went", func(t *zone.Timers) { t.Went = -1 }, "Config.Timers.Went"},
		{"negative full routes", func(t *zone.Timers) { t.FullRoutes = -1 }, "Config.Timers.FullRoutes"},
		{"full routes every tick", func(t *zone.Timers) { t.FullRoutes = 1 }, "Config.Timers.FullRoutes"},
		{"handoff timeout as long as the grace", func(t *zone.Timers) { t.HandoffTimeout = d.TableGrace }, "Config.Timers.HandoffTimeout"},
		{"hold as long as the grace", func(t *zone.Timers) { t.Hold = d.TableGrace; t.Resend = 1 }, "Config.Timers.Hold"},
		{"resend past the hold", func(t *zone.Timers) { t.Resend = d.Hold + 1 }, "Config.Timers.Resend"},
		{"went shorter than the grace", func(t *zone.Timers) { t.Went = d.TableGrace - 1 }, "Config.Timers.TableGrace"},
		{"negative checkpoint interval", func(t *zone.Timers) { t.CheckpointEvery = -1 }, "Config.Timers.CheckpointEvery"},
		{"checkpoints rarer than handoff retries", func(t *zone.Timers) { t.CheckpointEvery = d.HandoffRetry + 1 }, "Config.Timers.CheckpointEvery"},
		{"negative unclaimed wait", func(t *zone.Timers) { t.Unclaimed = -1 }, "Config.Timers.Unclaimed"},
		{"unclaimed wait shorter than the full routes", func(t *zone.Timers) { t.Unclaimed = d.FullRoutes - 1 }, "Config.Timers.FullRoutes"},
		{"negative fence hold", func(t *zone.Timers) { t.FenceHold = -1 }, "Config.Timers.FenceHold"},
		{"fence hold shorter than the hold", func(t *zone.Timers) { t.FenceHold = d.Hold - 1 }, "Config.Timers.Hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timers := zone.Timers{}
			tc.set(&timers)
			rt, err := zone.New(zone.Config{Timers: timers}, moduleFunc(func(*zone.Runtime) error { return nil }))
			if err == nil {
				_ = rt.Close()
			}
			var ce *errcode.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("zone.New with timers %+v: %v, want a config error naming %s", timers, err, tc.field)
			}
			if errcode.Of(err) != errcode.ConfigInvalid || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %q (code %q): want code %s naming %s", err, errcode.Of(err), errcode.ConfigInvalid, tc.field)
			}
		})
	}
	// The boundaries the relations allow.
	for _, ok := range []zone.Timers{
		{Resend: d.Hold},
		{Went: d.TableGrace},
		{HandoffTimeout: d.TableGrace - 1, Hold: d.TableGrace - 1},
		{FullRoutes: 2},
		{CheckpointEvery: d.HandoffRetry},
		{CheckpointEvery: 1},
		{Unclaimed: d.FullRoutes},
		{FenceHold: d.Hold},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("timers %+v refused: %v", ok, err)
		}
	}
}
