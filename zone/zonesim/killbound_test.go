package zonesim

import "testing"

// TestRecoverBound checks the recovery bound's arithmetic (recoverSpan):
// 20 ticks after the lease's end with the default faults, the control
// stream's extra delay counted twice (a query and its answer).
func TestRecoverBound(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	sc := schedule{kill: true, killNode: 0, killAt: 100, installDelay: make([]uint64, 4), noCut: true, noLag: true,
		slowFrom: 90, slowTo: 130}
	for _, tc := range []struct {
		name string
		cfg  Config
		want uint64 // after the lease's end
	}{
		{"default faults", Config{KillTTL: 20}, 20},
		{"control 5 ticks slow", Config{KillTTL: 20, SlowControl: 5}, 30},
		{"control 5 ticks slow, 2-tick lease", Config{KillTTL: 2, SlowControl: 5}, 30},
		{"slow window over before the lease's end", Config{KillTTL: 40, SlowControl: 5}, 20},
		{"heavy faults", Config{KillTTL: 20, Faults: &Faults{MaxDelay: 6}}, 28},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if cfg.Faults == nil {
				cfg.Faults = &Faults{MaxDelay: 2}
			}
			k := newKillState(cfg, sc, names)
			if got := k.by - k.lossAt; got != tc.want {
				t.Errorf("bound = lease's end + %d, want + %d", got, tc.want)
			}
		})
	}
}
