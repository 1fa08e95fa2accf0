package zone_test

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
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

// A player that logged out after its node's last checkpoint (issue 30):
// its logout saved it; the node died before its next checkpoint, so its
// standby holds the player's master as it was at that checkpoint, older
// than the logout, under the same session. Whatever the standby does
// with that master, the store must keep the logout's record: a returning
// player is never older than its last acknowledged save.

// hike is a hiker's progress: what the store keeps of it besides its
// position. It grows every tick, as experience does while a player plays.
type hike struct{ Exp uint32 }

// hikers is a module of client players only: each walks east a metre a
// tick and gains a point of experience a tick.
type hikers struct {
	r    *zone.Runtime
	hike *ecs.Store[hike]
}

func (h *hikers) Setup(r *zone.Runtime) error {
	h.r = r
	var err error
	if h.hike, err = zone.Register(r, zone.Spec[hike]{Name: "test.hike", Handoff: zone.FixedCodec[hike]()}); err != nil {
		return err
	}
	r.SetPlayers(zone.Players{
		Spawn: func(a account.ID, master, _ ecs.ID, pos torus.Pos, state []byte) error {
			var exp uint32
			if len(state) == 4 {
				exp = binary.LittleEndian.Uint32(state)
			}
			return errors.Join(r.World().CreateEntity(master), r.Positions().Add(master, zone.Position{Pos: pos}),
				h.hike.Add(master, hike{Exp: exp}), r.SetOwner(master, a))
		},
		Save: func(master ecs.ID) ([]byte, bool) {
			hk, ok := h.hike.Get(master)
			if !ok {
				return nil, false
			}
			return binary.LittleEndian.AppendUint32(nil, hk.Exp), true
		},
		Remove: func(master ecs.ID) { _ = r.Destroy(master, interest.Gone) },
		Pet: func(master ecs.ID) (ecs.ID, bool) {
			_, ok := h.hike.Get(master)
			return 0, ok
		},
		Home:       func(account.ID) torus.Pos { return torus.Pos{} },
		CheckInput: func(clientinput.Input) error { return nil },
		Input:      func(ecs.ID, clientinput.Input) {},
	})
	return r.AddSystem(ecs.System{Name: "hike", Run: func(w *ecs.World, _ ecs.Tick) {
		h.hike.Each(func(id ecs.ID, hk *hike) {
			if !r.Simulated(id) {
				return
			}
			hk.Exp++
			h.hike.MarkDirty(id)
			if p, ok := r.Positions().Get(id); ok {
				p.X++
				r.Positions().MarkDirty(id)
				w.MarkMoved(id)
			}
		})
	}})
}

// hikeOf reads a master's position and experience on rt.
func hikeOf(t *testing.T, c *zonetest.Cluster, node string, id ecs.ID) (torus.Pos, uint32) {
	t.Helper()
	n := c.Node(node)
	p, ok := n.Runtime.Positions().Get(id)
	hk, ok2 := n.Module.(*hikers).hike.Get(id)
	if !ok || !ok2 {
		t.Fatalf("%s holds no hiker %d", node, id)
	}
	return p.Pos, hk.Exp
}

// gatedStore holds final saves (logouts') until release: the save of a
// node cut off from the cluster that reaches the store late.
type gatedStore struct {
	worldstore.Store
	gate chan struct{}
	held chan struct{} // closed when a final save waits at the gate
	once sync.Once
}

func (g *gatedStore) SavePlayer(ctx context.Context, p worldstore.Player) error {
	if p.Final {
		g.once.Do(func() { close(g.held) })
		<-g.gate
	}
	return g.Store.SavePlayer(ctx, p)
}

func TestALogoutAfterTheLastCheckpointIsNeverSavedOver(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		late bool
	}{
		// The node dies with the logout's save landed: the adopter
		// finds the session ended and takes the master out unsaved.
		{"the logout's save lands before the node dies", false},
		// The node is cut off (its lease ends, it stops) with the save
		// still on its way, which lands after the adopter asked: the
		// master waits for a claim, and its save at the end of the wait
		// is refused by the store.
		{"the logout's save lands after the adoption", true},
	} {
		t.Run(tc.name, func(t *testing.T) { logoutAfterCheckpoint(t, tc.late) })
	}
}

func logoutAfterCheckpoint(t *testing.T, late bool) {
	mem := worldstore.NewMemory(nil)
	store := &gatedStore{Store: mem, gate: make(chan struct{}), held: make(chan struct{})}
	if !late {
		close(store.gate)
	}
	released := !late
	release := func() {
		if !released {
			released = true
			close(store.gate)
		}
	}
	t.Cleanup(release) // before the runtimes close: their savers drain
	grid := cells.GridConfig{RegionEdge: 512}
	grid.World.Width, grid.World.Height = 2048, 2048
	c := zonetest.Start(t, zonetest.Config{
		Nodes: 3, Memory: true, Grid: grid,
		Module: func(int, string) (zone.Module, error) { return &hikers{}, nil },
		Runtime: func(_ int, rc *zone.Config) {
			rc.WorldStore = store
			rc.SaveEvery = time.Hour // only the logout and the standby save
		},
	})
	const (
		a       = account.ID(7)
		session = uint64(1_700_000_000_000_001)
	)
	owner := c.Node("zone-1")
	table := owner.Runtime.Table()
	x0, y0, _, _ := table.Grid().Bounds(table.RegionsOf("zone-1")[0])
	at := torus.Pos{X: x0 + 100, Y: y0 + 256}
	live := []string{"zone-0", "zone-1", "zone-2"}
	standby := c.Node(zone.Standby(table.Grid().RegionOf(at), "zone-1", live))
	master, err := owner.Runtime.NewID()
	if err != nil {
		t.Fatal(err)
	}
	if !owner.Runtime.SpawnPlayer(a, session, master, 0, at, nil) {
		t.Fatal("the player was not spawned")
	}
	owner.Runtime.World().MarkMoved(master)

	// It plays for a while; then, a few ticks after zone-1's checkpoint,
	// it logs out.
	c.StepSync(60)
	last := owner.Runtime.LastCheckpoint()
	for owner.Runtime.LastCheckpoint() == last {
		c.Step()
	}
	last = owner.Runtime.LastCheckpoint()
	if len(standby.Runtime.Checkpointed(nil, master)) == 0 {
		t.Fatalf("the standby %s holds no checkpoint of the master", standby.Name)
	}
	c.StepSync(5)
	logoutPos, logoutExp := hikeOf(t, c, "zone-1", master)
	owner.Runtime.LogOut(master, session)
	c.Step() // the logout is applied: saved and taken out
	if owner.Runtime.World().Alive(master) {
		t.Fatal("the master is still in the world after its logout")
	}
	t.Logf("logged out near %v with exp %d, %d ticks after zone-1's checkpoint", logoutPos, logoutExp, owner.Runtime.World().CurrentTick().N-last)

	// zone-1 dies (or is cut off) before its next checkpoint: its standby
	// holds the master as it was at the last one.
	if owner.Runtime.LastCheckpoint() != last {
		t.Fatal("zone-1 checkpointed after the logout: the test no longer builds the case")
	}
	if late {
		if !zonetest.Poll(10*time.Second, func() bool {
			select {
			case <-store.held:
				return true
			default:
			}
			_, err := mem.LoadPlayer(context.Background(), a)
			return err == nil // saved, and not as final: not held
		}) {
			t.Fatal("the logout saved nothing")
		}
		if rec, err := mem.LoadPlayer(context.Background(), a); err == nil {
			t.Fatalf("the logout saved %+v as a record that is not final", rec)
		}
		c.CutEtcd("zone-1")
		c.Halt("zone-1")
	} else {
		owner.Runtime.SaverBarrier()
		c.Kill("zone-1")
	}
	next, _, err := zone.PlanFailover(table, []string{"zone-0", "zone-2"}, []string{"zone-1"})
	if err != nil {
		t.Fatal(err)
	}
	c.Apply(next)
	adopted := false
	for range 200 {
		c.Step()
		if adopted = standby.Runtime.Simulated(master); adopted {
			break
		}
	}
	if !adopted {
		t.Fatalf("the standby %s never adopted the master", standby.Name)
	}
	_, adoptedExp := hikeOf(t, c, standby.Name, master)
	t.Logf("%s adopted the master with exp %d", standby.Name, adoptedExp)
	if adoptedExp >= logoutExp {
		t.Fatalf("adopted with exp %d, not older than the logout's %d: the test no longer builds the case", adoptedExp, logoutExp)
	}

	// The adopter asked the store about the master's session as it
	// adopted it; the answer comes at its next tick. A login meanwhile
	// waits for it: the master is not handed over.
	if !late {
		if got := standby.Runtime.AnswerTakeover("zone-2", a, session+1); got != "saving" {
			t.Fatalf("%s answered a takeover of the adopted master %q before the store answered, want \"saving\"", standby.Name, got)
		}
	}
	standby.Runtime.SaverBarrier()
	c.Step()
	if !late {
		// The session's final record: the master is taken out, unsaved;
		// no login can take it over meanwhile.
		if standby.Runtime.Simulated(master) {
			t.Fatalf("%s still simulates the master of a player that logged out, a tick after the store answered", standby.Name)
		}
		if s := standby.Runtime.PlayerStats(); s.Ended != 1 || s.Unclaimed != 0 {
			t.Fatalf("%s counted %d ended and %d unclaimed players, want 1 and 0", standby.Name, s.Ended, s.Unclaimed)
		}
	} else {
		// No record of the session's end yet: it waits for a claim.
		// The logout's save lands now.
		if !standby.Runtime.Simulated(master) {
			t.Fatalf("%s took the master out with no word of its session's end", standby.Name)
		}
		release()
		c.Kill("zone-1") // its saver drains
	}
	for range zone.DefaultTimers().Unclaimed + 40 {
		c.Step()
	}
	for _, n := range c.Nodes {
		if n.Name != "zone-1" && n.Runtime.Simulated(master) {
			t.Fatalf("%s simulates the master of a player that logged out", n.Name)
		}
	}
	if s := standby.Runtime.PlayerStats(); late && s.Unclaimed != 1 {
		t.Fatalf("%s counted %d unclaimed players, want 1 (saved, refused, taken out)", standby.Name, s.Unclaimed)
	}

	// Every save the nodes queued lands before their runtimes close: the
	// store holds the logout's record.
	c.Kill("zone-0")
	c.Kill("zone-2")
	rec, err := mem.LoadPlayer(context.Background(), a)
	exp := uint32(0)
	if len(rec.State) == 4 {
		exp = binary.LittleEndian.Uint32(rec.State)
	}
	if err != nil || rec.Epoch != session || !rec.Final || exp != logoutExp+1 && exp != logoutExp {
		t.Fatalf("the store holds %+v (exp %d, %v), want the logout's final record of session %d (exp %d)", rec, exp, err, session, logoutExp)
	}
}
