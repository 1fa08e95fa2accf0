package game

import (
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/zone"
)

// TestKindOfNamesEveryEntityOfTheGame: on a running game every
// positioned entity is named by what the game made it (its own components
// say so: Master, Pet, Mob, Den), every kind occurs, and an entity the game
// did not make is named "".
func TestKindOfNamesEveryEntityOfTheGame(t *testing.T) {
	g, err := New(Config{Seed: 5, Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	rt := g.Runtime()
	seen := map[string]int{}
	for range 200 {
		g.Step()
	}
	rt.Positions().Each(func(id ecs.ID, _ *zone.Position) {
		want := ""
		switch {
		case g.c.master.Has(id):
			want = KindNamePlayer
		case g.c.pet.Has(id):
			want = KindNamePet
		case g.c.mob.Has(id):
			want = KindNameMob
		case g.c.den.Has(id):
			want = KindNameDen
		}
		got := KindOf(rt, id)
		if got != want {
			t.Errorf("entity %d: KindOf %q, want %q", id, got, want)
		}
		seen[got]++
	})
	for _, k := range []string{KindNamePlayer, KindNamePet, KindNameMob, KindNameDen} {
		if seen[k] == 0 {
			t.Errorf("no %s among the game's entities (seen %v)", k, seen)
		}
	}
	id, err := rt.NewID()
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.World().CreateEntity(id); err != nil {
		t.Fatal(err)
	}
	if got := KindOf(rt, id); got != "" {
		t.Errorf("an entity the game did not make: KindOf %q, want \"\"", got)
	}
}
