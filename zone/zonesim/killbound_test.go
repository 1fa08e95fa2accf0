package zonesim

import "testing"

// TestLostSteps checks the state-loss bound's arithmetic (lostSteps):
// the dead node's own steps after the last tick whose control messages
// surely reached a standby, one case per term.
func TestLostSteps(t *testing.T) {
	const at = 50 // the kill
	// steady: one step a tick; lag: the dead node skipped 6 steps at
	// 30–35 and makes them up two a tick at 44–49.
	steady := func(w uint64) uint64 { return w }
	lag := func(w uint64) uint64 {
		switch {
		case w < 30:
			return w
		case w < 44:
			return min(w, 29) + max(w, 35) - 35
		default:
			return 37 + 2*(w-43)
		}
	}
	noFaults := func(w uint64) uint64 { return w + 1 }
	slow5 := func(w uint64) uint64 { return w + 1 + 2 + 5 } // MaxDelay 2, SlowControl 5
	for _, tc := range []struct {
		name          string
		own, due      func(uint64) uint64
		cutAt, lossAt uint64
		sc            schedule
		want          uint64
	}{
		// Sent at 48, due at 49: the last tick before the cut at 50.
		{"steady, no faults", steady, noFaults, at, at + 20, schedule{noCut: true, noLag: true}, 1},
		{"cut 3 ticks after the kill", steady, noFaults, at + 3, at + 20, schedule{noCut: true, noLag: true}, 0},
		// Due by 49 if sent by 41: 8 steps since.
		{"control 5 ticks slow", steady, slow5, at, at + 20, schedule{noCut: true, noLag: true}, 8},
		// The dead node made up its steps two a tick: 12 steps in the 6
		// ticks 44–49 after the last tick (43) whose message is due by 51.
		{"dead node making up steps", lag, slow5, at + 2, at + 20, schedule{noCut: true, noLag: true}, 12},
		// A 2-tick lease ends at 52, before the cut at 53.
		{"lease ends before the cut", steady, noFaults, at + 3, at + 2, schedule{noCut: true, noLag: true}, 0},
		{"lease ends before the cut, slow", steady, slow5, at + 3, at + 1, schedule{noCut: true, noLag: true}, 7},
		// Cut from a peer at 40, never healed: due by 39 if sent by 38.
		{"cut from a peer, not healed", steady, noFaults, at, at + 20,
			schedule{noLag: true, cutA: 1, cutB: 0, cutFrom: 40, cutTo: 70}, 11},
		{"cut from a peer, healed before the kill", steady, noFaults, at, at + 20,
			schedule{noLag: true, cutA: 0, cutB: 1, cutFrom: 40, cutTo: 45}, 1},
		// A heal in the tick of the kill's cut is undone before delivery.
		{"healed in the tick of the kill's cut", steady, noFaults, at, at + 20,
			schedule{noLag: true, cutA: 0, cutB: 1, cutFrom: 40, cutTo: at}, 11},
		{"a cut of two live peers", steady, noFaults, at, at + 20,
			schedule{noLag: true, cutA: 1, cutB: 2, cutFrom: 40, cutTo: 70}, 1},
		// A standby skipping steps 45–52 reads at 53 what it is
		// delivered from 45 on: after the lease's end at 52.
		{"standby skipping across the lease's end", steady, noFaults, at + 3, at + 2,
			schedule{noCut: true, lagNode: 1, lagFrom: 45, lagN: 8}, 6},
		{"standby caught up before the lease's end", steady, noFaults, at + 3, at + 2,
			schedule{noCut: true, lagNode: 1, lagFrom: 45, lagN: 3}, 0},
		{"dead node skipping", steady, noFaults, at, at + 2,
			schedule{noCut: true, lagNode: 0, lagFrom: 45, lagN: 8}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &killState{on: true, node: 0, at: at, cutAt: tc.cutAt, lossAt: tc.lossAt, sc: tc.sc}
			for w := range uint64(at) {
				k.own = append(k.own, tc.own(w))
				k.due = append(k.due, tc.due(w))
			}
			if got := k.lostSteps(tc.own(at - 1)); got != tc.want {
				t.Errorf("lostSteps = %d, want %d", got, tc.want)
			}
		})
	}
}

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
