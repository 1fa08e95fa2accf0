package zone_test

import (
	"testing"

	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// TestKillSupersedeBites: a standby whose adoption round is held up (a
// cut peer) takes an entity by handoff from the dying node while it holds
// the dead node's older record of it, and hands it on before the round
// ends. Planted "nosupersede" (the round keeps that candidate), the round
// restores the stale record and the entity is simulated on two nodes:
// the breaker's kill run with a 2-tick lease TTL and a slow control
// stream, seed 31, catches it, and passes without it.
func TestKillSupersedeBites(t *testing.T) {
	t.Parallel()
	cfg := zonesim.Config{Seed: 31, Ticks: 150, Kill: true, KillTTL: 2, SlowControl: 5}
	if res, err := zonesim.Run(cfg); err != nil || res.Restored == 0 {
		t.Fatalf("without the bug: %v (%d restored)", err, res.Restored)
	}
	cfg.Started = func(_ int, r *zone.Runtime) { r.PlantCheckpoint("nosupersede") }
	if _, err := zonesim.Run(cfg); err == nil {
		t.Fatal("nosupersede: not caught")
	} else {
		t.Logf("nosupersede caught: %v", err)
	}
}
