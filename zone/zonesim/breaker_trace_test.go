package zonesim_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// breakerTrace logs, from tick from on, where entity id is on each node:
// real or ghost, its position and epoch, and the checkpoint records of
// it each node holds (a helper to read a break; SHARDWISE_BREAKER_TRACE
// names the entity).
func breakerTrace(t *testing.T, cfg zonesim.Config, from uint64) {
	v := os.Getenv("SHARDWISE_BREAKER_TRACE")
	if v == "" {
		t.Skip("SHARDWISE_BREAKER_TRACE=entity runs it")
	}
	n, _ := strconv.ParseUint(v, 10, 64)
	id := ecs.ID(n)
	cfg.Check = func(tick uint64, rs []*zone.Runtime) error {
		if tick < from {
			return nil
		}
		line := fmt.Sprintf("t%d:", tick)
		for i, r := range rs {
			if r == nil {
				line += fmt.Sprintf(" [%d fenced]", i)
				continue
			}
			s := fmt.Sprintf(" [%d", i)
			if r.AdoptionPending() {
				s += " ADOPTING"
			}
			if r.World().Alive(id) {
				p, _ := r.Positions().Get(id)
				e, _ := r.Epoch(id)
				kind := "real"
				if r.Ghosts().Has(id) {
					kind = "ghost"
				}
				s += fmt.Sprintf(" %s e%d (%.0f,%.0f)", kind, e, p.Pos.X, p.Pos.Y)
			}
			for _, rec := range r.Checkpointed(nil, id) {
				s += fmt.Sprintf(" ck{r%d %s e%d t%d}", rec.Region, rec.Owner, rec.Epoch, rec.Tick)
			}
			line += s + "]"
		}
		t.Log(line)
		return nil
	}
	res, err := zonesim.Run(cfg)
	for _, e := range res.Events {
		t.Log(e)
	}
	t.Log(err)
}

func TestBreakerTraceCrowd4(t *testing.T) {
	breakerTrace(t, zonesim.Config{Seed: 4, Ticks: shortTicks, Kill: true, Wander: wanderCrowd()}, 50)
}

func TestBreakerTraceTTL2Slow6(t *testing.T) {
	breakerTrace(t, zonesim.Config{Seed: 6, Ticks: shortTicks, Kill: true, KillTTL: 2, SlowControl: 5}, 30)
}

func TestBreakerTracePlain200Seed4(t *testing.T) {
	breakerTrace(t, zonesim.Config{Seed: 4, Ticks: 200, Kill: true}, 60)
}

func TestBreakerTraceTTL2Slow31(t *testing.T) {
	breakerTrace(t, zonesim.Config{Seed: 31, Ticks: shortTicks, Kill: true, KillTTL: 2, SlowControl: 5}, 60)
}

func TestBreakerTraceHeavy1(t *testing.T) {
	breakerTrace(t, zonesim.Config{Seed: 1, Ticks: shortTicks, Kill: true, Faults: &zonesim.Faults{Drop: 0.4, Duplicate: 0.2, Reorder: 0.3, MaxDelay: 6}}, 60)
}
