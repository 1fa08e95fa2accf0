package game

import (
	"fmt"
	"testing"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/torus"
)

// keptAbout lists every place outside the component stores where the game
// still mentions id. Anchors are not listed by id (interest does not
// expose them); the test checks them through the holder counts.
func (g *Game) keptAbout(id ecs.ID) []string {
	var left []string
	if c, ok := g.r.ChunkOf(id); ok {
		left = append(left, fmt.Sprintf("visibility index (chunk %v)", c))
	}
	if c, ok := g.players.at[id]; ok {
		left = append(left, fmt.Sprintf("player grid (chunk %v)", c))
	}
	for a, m := range g.masters {
		if m == id {
			left = append(left, fmt.Sprintf("master of account %d", a))
		}
	}
	if a, ok := g.accountOf[id]; ok {
		left = append(left, fmt.Sprintf("account of master (%d)", a))
	}
	for col, d := range g.dens {
		if d == id {
			left = append(left, fmt.Sprintf("den of column %v", col))
		}
	}
	if col, ok := g.denColumn[id]; ok {
		left = append(left, fmt.Sprintf("column of den (%v)", col))
	}
	return left
}

// TestForgetLeavesNothingBehind: an entity destroyed or evicted leaves no
// trace in the game's own state: not in the visibility index or the
// player grid, no residency anchor (the columns it held lose exactly its
// hold), no account → master entry, no column → den entry. The defect was
// that on Evict the anchor and the master entry stayed (and the den entry
// did too): a master handed to another node would have kept its columns
// resident here for ever, and Master would have answered with an entity
// this world no longer has.
func TestForgetLeavesNothingBehind(t *testing.T) {
	kinds := []struct {
		name     string
		anchored bool // a master or a pet: holds residency
		pick     func(g *Game, master ecs.ID) ecs.ID
	}{
		{"master", true, func(_ *Game, master ecs.ID) ecs.ID { return master }},
		{"pet", true, func(g *Game, master ecs.ID) ecs.ID {
			m, _ := g.c.master.Get(master)
			return m.Pet
		}},
		{"den", false, func(g *Game, _ ecs.ID) ecs.ID {
			var best ecs.ID
			for _, d := range g.dens { // the smallest id, so the pick is stable
				if best == 0 || d < best {
					best = d
				}
			}
			return best
		}},
		{"mob", false, func(g *Game, master ecs.ID) ecs.ID {
			p, _ := g.c.pos.Get(master)
			id, ok := g.spawnMob(g.w, 0, g.geo.Translate(p.Pos, torus.Pos{X: 30}))
			if !ok {
				return 0
			}
			g.Step() // index it
			return id
		}},
	}
	leave := map[string]func(w *ecs.World, id ecs.ID) error{
		"evict":   (*ecs.World).Evict,
		"destroy": (*ecs.World).Destroy,
	}
	for _, k := range kinds {
		for _, how := range []string{"evict", "destroy"} {
			t.Run(k.name+"/"+how, func(t *testing.T) {
				g := newScene(t, Config{Seed: 13, Players: 2, DenChance: 0.5, MaterialiseBudget: 1000})
				master := g.place(t, 1, torus.Pos{X: 10, Y: 10})
				g.place(t, 2, torus.Pos{X: 20_000, Y: 20_000}) // holds nothing near account 1
				for range 3 {
					g.Step()
				}
				id := k.pick(g, master)
				if id == 0 || !g.w.Alive(id) {
					t.Fatalf("scene has no %s", k.name)
				}
				if len(g.keptAbout(id)) == 0 {
					t.Fatalf("the %s is not indexed before it leaves: the test proves nothing", k.name)
				}
				p, _ := g.c.pos.Get(id)
				col := interest.ColumnOf(g.geo.ChunkOf(p.Pos))
				before := g.r.ColumnHolders(col)

				if err := leave[how](g.w, id); err != nil {
					t.Fatal(err)
				}
				g.Step()

				if g.w.Alive(id) {
					t.Fatalf("%s still alive", k.name)
				}
				if left := g.keptAbout(id); len(left) > 0 {
					t.Errorf("after %s the game still keeps the %s in: %v", how, k.name, left)
				}
				want := before
				if k.anchored {
					want-- // its anchor, and nothing else: the account's view still holds
				}
				if got := g.r.ColumnHolders(col); got != want {
					t.Errorf("column %v has %d holders after the %s left, want %d (it had %d)", col, got, k.name, want, before)
				}
				if k.name == "master" {
					if m, ok := g.Master(1); ok {
						t.Errorf("Master(1) = %d after the master left", m)
					}
				}
				if m, ok := g.Master(2); !ok || !g.w.Alive(m) {
					t.Errorf("account 2's master (%d, %v) went too", m, ok)
				}
			})
		}
	}
}
