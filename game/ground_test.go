package game

import (
	"testing"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/zone"
)

// docs/protocol.md, Terrain (heights and z): the reference game does not
// put its entities on the ground. Players, pets, mobs and dens all stand
// on the plane z = 0 whatever the terrain's height there (which lies
// within ±176 m), so a client that draws them on the ground samples the
// heightmap under their x and y itself.
func TestEveryEntityStandsAtZeroWhateverTheGround(t *testing.T) {
	g, err := New(Config{Seed: 7, Players: 6, Area: 300, DenChance: 0.2, DenCapacity: 6, WanderChance: 1})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[Kind]int{}
	for range 200 {
		g.Step()
	}
	g.Runtime().Positions().Each(func(id ecs.ID, p *zone.Position) {
		if p.Pos.Z != 0 {
			t.Errorf("entity %d stands at z = %v", id, p.Pos.Z)
		}
		if v, ok := g.c.visual.Get(id); ok {
			kinds[v.Kind]++
		}
	})
	if kinds[KindPlayer] == 0 || kinds[KindPet] == 0 || kinds[KindMob] == 0 || kinds[KindDen] == 0 {
		t.Fatalf("the scene lacks a kind: %v", kinds)
	}
}
