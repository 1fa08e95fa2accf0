package zone_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/gateway/clientinput"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// A login during a failover waits for the standbys that hold checkpoint
// records of its player (they answer Saving) and is answered again once
// those records are adopted (issue 30: the demo's player twice after a
// zone node kill). A player whose master and pet stand on either side of
// a border of the dead node's regions is adopted by two standbys, and
// each adopter becomes the owner of a new stream whose standby may be the
// other adopter: the master's adopter then holds the pet's new record
// from a live owner for as long as the pet stands there. It must not wait
// for that one (it answered Saving for the dead node's records): a login
// left waiting brings a second player in from the store at its timeout,
// beside the adopted one.

// pairLink names a master's pet.
type pairLink struct{ Pet ecs.ID }

// petMark marks a pet.
type petMark struct{ Of ecs.ID }

// pairOffset is how far east of its master a pet stands.
const pairOffset = 4

// pairs is a module of client players that stand still, each with its
// pet pairOffset metres east of its master.
type pairs struct {
	r    *zone.Runtime
	link *ecs.Store[pairLink]
	pet  *ecs.Store[petMark]
}

func (m *pairs) Setup(r *zone.Runtime) error {
	m.r = r
	var err error
	if m.link, err = zone.Register(r, zone.Spec[pairLink]{Name: "test.pair", Handoff: zone.FixedCodec[pairLink]()}); err != nil {
		return err
	}
	if m.pet, err = zone.Register(r, zone.Spec[petMark]{Name: "test.pet", Handoff: zone.FixedCodec[petMark]()}); err != nil {
		return err
	}
	r.SetPlayers(zone.Players{
		Spawn: func(a account.ID, master, pet ecs.ID, pos torus.Pos, _ []byte) error {
			w := r.World()
			return errors.Join(
				w.CreateEntity(master), r.Positions().Add(master, zone.Position{Pos: pos}),
				m.link.Add(master, pairLink{Pet: pet}), r.SetOwner(master, a),
				w.CreateEntity(pet), r.Positions().Add(pet, zone.Position{Pos: r.Geometry().Translate(pos, torus.Pos{X: pairOffset})}),
				m.pet.Add(pet, petMark{Of: master}), r.SetOwner(pet, a))
		},
		Save: func(master ecs.ID) ([]byte, bool) {
			_, ok := m.link.Get(master)
			return nil, ok
		},
		Remove: func(master ecs.ID) {
			if l, ok := m.link.Get(master); ok && r.Simulated(l.Pet) {
				_ = r.Destroy(l.Pet, interest.Gone)
			}
			_ = r.Destroy(master, interest.Gone)
		},
		Pet: func(master ecs.ID) (ecs.ID, bool) {
			l, ok := m.link.Get(master)
			if !ok {
				return 0, false
			}
			return l.Pet, true
		},
		Home:       func(account.ID) torus.Pos { return torus.Pos{} },
		CheckInput: func(clientinput.Input) error { return nil },
		Input:      func(ecs.ID, clientinput.Input) {},
	})
	return nil
}

// splitPair is a border between two regions of node dead whose standbys
// differ and where, once the failover gives each region to its standby,
// the first region's adopter is the standby of the second's.
type splitPair struct {
	dead, first, second string // the dead owner, the master's adopter, the pet's
	third               string // the live node that adopts neither
	at                  torus.Pos
}

// findSplit finds such a border in table: x is the border, the master
// stands just west of it and its pet just east.
func findSplit(table *cells.Table, names []string) (splitPair, bool) {
	grid := table.Grid()
	for _, dead := range names {
		live := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == dead })
		next, _, err := zone.PlanFailover(table, live, []string{dead})
		if err != nil {
			continue
		}
		for _, r1 := range table.RegionsOf(dead) {
			_, y0, x1, _ := grid.Bounds(r1)
			at := torus.Pos{X: x1 - pairOffset/2, Y: y0 + 100}
			r2 := grid.RegionOf(torus.Pos{X: at.X + pairOffset, Y: at.Y})
			if table.Owner(r2) != dead {
				continue
			}
			first, second := next.Owner(r1), next.Owner(r2)
			if first == second || zone.Standby(r2, second, live) != first {
				continue
			}
			third := slices.DeleteFunc(slices.Clone(live), func(n string) bool { return n == first || n == second })
			return splitPair{dead: dead, first: first, second: second, third: third[0], at: at}, true
		}
	}
	return splitPair{}, false
}

func TestALoginDuringAFailoverIsHandedTheAdoptedPlayer(t *testing.T) {
	t.Parallel()
	for _, gw := range []string{"a third node", "the master's adopter", "the pet's adopter"} {
		t.Run("the login on "+gw, func(t *testing.T) { loginDuringAFailover(t, gw) })
	}
}

func loginDuringAFailover(t *testing.T, gw string) {
	store := worldstore.NewMemory(nil)
	grid := cells.GridConfig{RegionEdge: 512}
	grid.World.Width, grid.World.Height = 2048, 2048
	c := zonetest.Start(t, zonetest.Config{
		Nodes: 4, Memory: true, Grid: grid,
		Module: func(int, string) (zone.Module, error) { return &pairs{}, nil },
		Runtime: func(_ int, rc *zone.Config) {
			rc.WorldStore = store
			rc.SaveEvery = time.Hour
		},
	})
	names := []string{"zone-0", "zone-1", "zone-2", "zone-3"}
	table := c.Node("zone-0").Runtime.Table()
	sp, ok := findSplit(table, names)
	if !ok {
		t.Fatal("no border of a node's regions whose adopters are each other's standby: the test no longer builds the case")
	}
	live := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == sp.dead })
	gateway := map[string]string{"a third node": sp.third, "the master's adopter": sp.first, "the pet's adopter": sp.second}[gw]
	t.Logf("%s dies; its master's adopter %s, its pet's %s; the login on %s", sp.dead, sp.first, sp.second, gateway)

	// Every live node's saver has answered before each step, so that the
	// store's answers land at the same tick in every run.
	dead := map[string]bool{}
	var twice []string
	const a = account.ID(7)
	step := func() {
		for _, n := range names {
			if !dead[n] {
				c.Node(n).Runtime.SaverBarrier()
			}
		}
		c.Step()
		count := 0
		for _, n := range live {
			rt := c.Node(n).Runtime
			rt.Owners().Each(func(id ecs.ID, o *zone.Owner) {
				if o.Account == a && o.Session != 0 && rt.Simulated(id) {
					count++
				}
			})
		}
		if count > 2 && len(twice) < 5 {
			twice = append(twice, fmt.Sprintf("tick %d: %d entities of the account in the world", c.Node(live[0]).Runtime.World().CurrentTick().N, count))
		}
	}

	owner := c.Node(sp.dead).Runtime
	master, err := owner.NewID()
	if err != nil {
		t.Fatal(err)
	}
	pet, err := owner.NewID()
	if err != nil {
		t.Fatal(err)
	}
	if !owner.SpawnPlayer(a, 1, master, pet, sp.at, nil) {
		t.Fatal("the player was not spawned")
	}
	owner.World().MarkMoved(master)
	owner.World().MarkMoved(pet)
	first, second := c.Node(sp.first).Runtime, c.Node(sp.second).Runtime
	for i := 0; len(first.Checkpointed(nil, master)) == 0 || len(second.Checkpointed(nil, pet)) == 0; i++ {
		if i == 200 {
			t.Fatalf("the standbys hold no checkpoint of the master (%s) or the pet (%s)", sp.first, sp.second)
		}
		step()
	}

	// The node dies; its lease runs on. A login of the account (a
	// resume: its gateway may have been the dead node) comes meanwhile.
	c.Halt(sp.dead)
	dead[sp.dead] = true
	sessions, err := c.Node(gateway).Runtime.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeSession{account: a, epoch: 2}
	if err := sessions.Join(s); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		step()
	}
	if s.master != 0 {
		t.Fatalf("the login was handed %d before the failover", s.master)
	}
	// The lease ends; the failover gives each region to its standby.
	c.Kill(sp.dead)
	next, _, err := zone.PlanFailover(table, live, []string{sp.dead})
	if err != nil {
		t.Fatal(err)
	}
	c.Apply(next)
	for i := 0; !first.Simulated(master) || !second.Simulated(pet); i++ {
		if i == 100 {
			t.Fatalf("the master was not adopted by %s (%v) or the pet by %s (%v)", sp.first, first.Simulated(master), sp.second, second.Simulated(pet))
		}
		step()
	}
	if len(first.Checkpointed(nil, pet)) == 0 {
		for range 40 {
			step()
			if len(first.Checkpointed(nil, pet)) > 0 {
				break
			}
		}
	}
	if len(first.Checkpointed(nil, pet)) == 0 {
		t.Fatalf("%s holds no record of the pet from %s's stream: the test no longer builds the case", sp.first, sp.second)
	}

	// The login is handed the adopted player within a few ticks (the
	// store's answer about its session, then the takeover's answer), and
	// the account never has more than a master and a pet in the world,
	// past the login's wait for a save (12 s, 240 ticks).
	handed := -1
	for i := range 300 {
		step()
		if handed < 0 && s.master == uint64(master) && s.pet == uint64(pet) {
			handed = i
		}
	}
	if len(twice) > 0 {
		t.Errorf("two players of the account in the world:\n%v", twice)
	}
	if handed < 0 || handed > 20 {
		t.Fatalf("the login was handed %d/%d (after %d ticks), want the adopted %d/%d within 20 ticks of the adoption", s.master, s.pet, handed, master, pet)
	}
}
