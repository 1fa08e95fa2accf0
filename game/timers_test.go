package game

import (
	"reflect"
	"testing"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/torus"
)

// copyEntity recreates id in dst with every component it has in src, the
// values as they are, as a handoff would, and indexes it at once (a
// handoff target files an arriving entity before its first tick).
func copyEntity(t *testing.T, src, dst *Game, id ecs.ID) {
	t.Helper()
	if err := dst.w.CreateEntity(id); err != nil {
		t.Fatal(err)
	}
	for _, c := range src.w.Components() {
		v, ok := c.GetAny(id)
		if !ok {
			continue
		}
		to, ok := dst.w.ComponentNamed(c.Type().Name)
		if !ok {
			t.Fatalf("no component %q in the target world", c.Type().Name)
		}
		if err := to.AddAny(id, v); err != nil {
			t.Fatal(err)
		}
	}
	dst.r.Reindex(id)
}

// TestTimersSurviveAMoveToAnotherClock: attack and heal cooldowns mean the
// same after an entity's components move to a world whose tick counter is
// far ahead of, or far behind, the one they were written in. A master, its
// pet and a mob fighting it run for a while on world A; then their
// components are copied to world B, whose tick counter differs by offset;
// from then on both worlds must send the same intents on the same
// (relative) ticks. The defect was that cooldowns were absolute tick
// numbers: ahead, every cooldown had already expired (all three attacked
// or healed at once); behind, they would have waited offset ticks more.
func TestTimersSurviveAMoveToAnotherClock(t *testing.T) {
	// offset is a multiple of perceptionStagger, so the staggered
	// perception phases, which do follow the tick counter, line up.
	const offset = 1 << 14
	const fight, after = 30, 200
	for _, c := range []struct {
		name         string
		preA, preB   int // ticks each world runs before the scene
		wantTickSkew int64
	}{
		{"target ahead", 0, offset + fight, offset},
		{"target behind", offset, fight, -offset},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := torus.Pos{X: 1000, Y: 1000}
			a := newScene(t, Config{Seed: 9, Roam: 0.01})
			master := a.place(t, 1, at)
			// B mints other ids (node part 1); its own player is taken
			// away at once, so account 1 and the scene are A's alone.
			b := newScene(t, Config{Seed: 9, Roam: 0.01, Node: 1})
			own, _ := b.Master(1)
			ownPet, _ := b.c.master.Get(own)
			for _, id := range []ecs.ID{own, ownPet.Pet} {
				if err := b.w.Evict(id); err != nil {
					t.Fatal(err)
				}
			}
			for range c.preA {
				a.Step()
			}
			for range c.preB {
				b.Step()
			}

			// The scene on A: a tough mob in reach, chasing the master;
			// the master hurt, so its pet heals it.
			mob, ok := a.spawnMob(a.w, 0, a.geo.Translate(at, torus.Pos{X: 0.8}))
			if !ok {
				t.Fatal("spawnMob")
			}
			m, _ := a.c.mob.Get(mob)
			m.State, m.Target = Chasing, master
			*a.hpOf(mob) = Health{HP: 10_000, Max: 10_000}
			a.hpOf(master).HP = 40
			a.w.MarkMoved(mob)
			for range fight {
				a.Step()
			}
			pet := a.petOf(master)
			for _, id := range []ecs.ID{master, pet, mob} {
				copyEntity(t, a, b, id)
			}
			if skew := int64(b.w.CurrentTick().N) - int64(a.w.CurrentTick().N); skew != c.wantTickSkew {
				t.Fatalf("tick counters differ by %d, want %d", skew, c.wantTickSkew)
			}

			fired := map[ecs.ID]int{}
			for i := range after {
				a.Step()
				b.Step()
				// g.intents holds what this tick sent, until the next
				// tick applies it.
				if !reflect.DeepEqual(a.r.AppendPending(nil), b.r.AppendPending(nil)) {
					t.Fatalf("tick %d after the move: A sent %+v, B sent %+v", i+1, a.r.AppendPending(nil), b.r.AppendPending(nil))
				}
				for _, in := range a.r.AppendPending(nil) {
					if in.Kind == Damage || in.Kind == Heal {
						fired[in.Source]++
					}
				}
			}
			// Each of the three cooldowns ran through several times.
			for _, who := range []struct {
				name string
				id   ecs.ID
			}{{"master", master}, {"pet", pet}, {"mob", mob}} {
				if fired[who.id] < 2 {
					t.Fatalf("the %s acted %d times in %d ticks: the scene does not exercise its cooldown", who.name, fired[who.id], after)
				}
			}
		})
	}
}

func (g *Game) hpOf(id ecs.ID) *Health {
	h, _ := g.c.health.Get(id)
	return h
}

func (g *Game) petOf(master ecs.ID) ecs.ID {
	m, _ := g.c.master.Get(master)
	return m.Pet
}

// TestCooldownCountsDown pins the arithmetic the systems rely on: set to
// n, a cooldown is over on the n-th countDown after it, and stays over.
func TestCooldownCountsDown(t *testing.T) {
	for _, n := range []Cooldown{0, 1, 2, attackCooldown, healCooldown} {
		c := n
		for i := Cooldown(1); i < n; i++ {
			if c.countDown() {
				t.Fatalf("cooldown %d over after %d ticks", n, i)
			}
		}
		if n > 0 && !c.countDown() {
			t.Fatalf("cooldown %d not over after %d ticks", n, n)
		}
		if !c.countDown() || c != 0 {
			t.Fatalf("cooldown %d: over once, then %v (%d)", n, c.countDown(), c)
		}
	}
}
