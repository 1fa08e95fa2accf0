package game_test

import (
	"slices"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/entityid"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/zone"
)

// mintedIDs steps g for ticks ticks, moving wall (the clock it booted on)
// with them as a real-time run would, and returns every entity id that
// was alive at the end of some tick, sorted.
func mintedIDs(g *game.Game, wall *clock.Fake, interval time.Duration, ticks int) []ecs.ID {
	seen := map[ecs.ID]bool{}
	collect := func() { g.World().EachEntity(func(id ecs.ID) { seen[id] = true }) }
	collect() // the players, minted in New
	for range ticks {
		wall.Advance(interval)
		g.Step()
		collect()
	}
	ids := make([]ecs.ID, 0, len(seen))
	for id := range seen {
		if !zone.IsDerived(id) { // a den's id is its column's, the same in every run
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestRestartMintsNewIds: a node restarted with the same node part (and
// the same seed) mints none of the ids of its previous run. The defect
// was that ids counted from a configured start plus the ticks, so every
// run of a node minted the same ids again; they now count from the wall
// clock at boot.
func TestRestartMintsNewIds(t *testing.T) {
	cfg := game.Config{Seed: 3, Players: 6, Area: 300, DenChance: 0.2, DenCapacity: 6, Node: 17}
	interval := cfg.WithDefaults().TickInterval
	const ticks = 400

	wall := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cfg.Clock = wall
	first, err := game.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := mintedIDs(first, wall, interval, ticks)

	wall.Advance(2 * time.Second) // the restart takes a moment
	second, err := game.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	after := mintedIDs(second, wall, interval, ticks)

	if len(before) < 50 || len(after) < 50 {
		t.Fatalf("runs minted %d and %d ids: too few to mean anything", len(before), len(after))
	}
	if lo, hi := after[0], before[len(before)-1]; lo <= hi {
		t.Fatalf("the restarted node minted %d (%v), not above the last run's %d (%v); "+
			"%d of its %d ids were minted before", lo, lo.Time(), hi, hi.Time(), countShared(before, after), len(after))
	}
	for _, id := range after {
		if id.Node() != 17 {
			t.Fatalf("id %d has node part %d, want 17", id, id.Node())
		}
	}
}

func countShared(a, b []ecs.ID) int {
	n := 0
	for _, id := range b {
		if _, ok := slices.BinarySearch(a, id); ok {
			n++
		}
	}
	return n
}

// TestBootTimeChangesIdsOnly: the same seed booted at two wall times plays
// the same game. Every tick report (entities, spawns, deaths, intents,
// messages and bytes sent) is the same, and the ids differ by exactly the
// boot times' difference: nothing the game decides depends on when it
// booted.
func TestBootTimeChangesIdsOnly(t *testing.T) {
	cfg := game.Config{Seed: 11, Players: 6, Area: 300, DenChance: 0.2, DenCapacity: 6}
	t1 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	shift := 3*time.Hour + 7*time.Millisecond + 400*time.Microsecond // the sub-millisecond part is dropped
	cfg.Clock = clock.NewFake(t1)
	a, _, ra := run(t, cfg, 300, false)
	cfg.Clock = clock.NewFake(t1.Add(shift))
	b, _, rb := run(t, cfg, 300, false)
	for i := range ra {
		if ra[i] != rb[i] {
			t.Fatalf("tick %d: booted %v later, the report differs: %+v vs %+v", i+1, shift, ra[i], rb[i])
		}
	}
	ma, _ := a.Master(1)
	mb, _ := b.Master(1)
	want, _ := entityid.Make(int64(shift/time.Millisecond), 0, 0)
	if uint64(mb)-uint64(ma) != uint64(want) {
		t.Fatalf("master ids %d and %d differ by %d, want %d (%v)", ma, mb, uint64(mb)-uint64(ma), uint64(want), shift)
	}
}
