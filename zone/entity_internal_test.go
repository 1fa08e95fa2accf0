package zone

import (
	"testing"

	"github.com/shardwise/shardwise/ecs"
)

// TestEntityTableKeepsItsIndexes walks one record through the table's
// own steps and checks, after each, that the indexes hold exactly the
// records that say so and that a record with nothing left goes (and is
// reused).
func TestEntityTableKeepsItsIndexes(t *testing.T) {
	tab := newEntities()
	check := func(step string) {
		t.Helper()
		for id, e := range tab.recs {
			if (tab.outgoing[id] == e) != (e.phase == phaseOutgoing) || (tab.adopted[id] == e) != (e.phase == phaseAdopted) ||
				(tab.outside[id] == e) != e.outside || (tab.parked[id] == e) != (e.park != nil) ||
				(tab.held[id] == e) != (e.held != nil) || (tab.fenceHeld[id] == e) != (e.fence != nil) || (tab.went[id] == e) != (e.went != nil) {
				t.Fatalf("%s: record %d (%s) and the indexes disagree", step, id, e.phase)
			}
		}
		for _, m := range []map[ecs.ID]*entity{tab.outgoing, tab.adopted, tab.outside, tab.parked, tab.held, tab.fenceHeld, tab.went} {
			for id, e := range m {
				if tab.recs[id] != e {
					t.Fatalf("%s: %d is indexed but not the table's record", step, id)
				}
			}
		}
	}
	const id = ecs.ID(7)
	e := tab.ensure(id, phaseSimulated)
	tab.setOutside(e, true)
	e.rehomed = true
	check("outside")
	tab.tidy(e)
	if tab.get(id) == nil {
		t.Fatal("a record outside went by tidy")
	}
	tab.setPhase(e, phaseOutgoing)
	e.out = &outgoing{target: "b", epoch: 2}
	check("outgoing")
	tab.setPhase(e, phaseGone) // handed over: the local fields go
	if e.outside || e.rehomed || e.out != nil || len(tab.outside) != 0 {
		t.Fatalf("gone keeps local fields: %+v", *e)
	}
	tab.setPhase(e, phaseGhost)
	e.source = "b"
	e.park, e.held, e.fence = &parkedGhost{peer: "b"}, &heldVanish{peer: "b"}, &fenceHeld{peer: "b"}
	tab.parked[id], tab.held[id], tab.fenceHeld[id] = e, e, e
	check("ghost")
	if tab.ghosts != 1 {
		t.Fatalf("ghosts counted %d, want 1", tab.ghosts)
	}
	tab.setPhase(e, phaseGone) // a vanish ends both holds with the ghost
	check("vanished")
	if tab.ghosts != 0 || len(tab.parked) != 0 || len(tab.held) != 0 || len(tab.fenceHeld) != 0 || e.source != "" {
		t.Fatalf("a gone record keeps ghost state: %+v, %d ghosts", *e, tab.ghosts)
	}
	tab.tidy(e)
	if tab.get(id) != nil || len(tab.spare) != 1 {
		t.Fatalf("an empty record stays: %v, %d spare", tab.get(id), len(tab.spare))
	}
	if f := tab.ensure(8, phaseGhost); f != e || f.id != 8 || f.phase != phaseGhost || tab.ghosts != 1 {
		t.Fatalf("the spare record is not reused clean: %+v", *f)
	}
}
