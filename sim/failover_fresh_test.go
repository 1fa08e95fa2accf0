package sim_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// A player brought back from its last save under new ids (its node died
// with no checkpoint of it) gets a second You on the same socket. The
// server starts the view afresh (every entity in the new view appears
// again) and sends no vanish for the old view: the client drops what it
// held on that You (docs/protocol.md), so it ends up knowing what the
// server shows, and not the old master, pet and neighbours that died with
// the node.

// realAt is one entity a live node simulates, and where.
type realAt struct {
	node string
	pos  torus.Pos
}

// reals are the entities the live runtimes hold as reals (simulated, or
// frozen in a handoff), each read on its world goroutine.
func reals(rts []*zone.Runtime) map[uint64]realAt {
	out := make(map[uint64]realAt)
	for _, rt := range rts {
		ch := make(chan map[uint64]realAt, 1)
		rt.Post(func() {
			m := make(map[uint64]realAt)
			rt.Positions().Each(func(id ecs.ID, p *zone.Position) {
				if rt.World().Alive(id) && !rt.Ghosts().Has(id) {
					m[uint64(id)] = realAt{rt.Name(), p.Pos}
				}
			})
			ch <- m
		})
		for id, r := range <-ch {
			out[id] = r
		}
	}
	return out
}

// viewMismatch compares what the client knows with what the live nodes
// simulate around its master: every entity it knows is a live real no
// further than the view holds (its radius and release margin, and a
// column for a walker the client hears of a tick late), and every live
// real well inside the view (a column inside its radius, in the master's
// slab) is known. It returns the differences ("" none).
func viewMismatch(c *sim.Client, rts []*zone.Runtime) string {
	geo := rts[0].Geometry()
	view := interest.DefaultView()
	live := reals(rts)
	var known []uint64
	var master uint64
	c.Look(func(v *sim.View) {
		master, _ = v.You()
		v.Each(func(e *sim.Entity) { known = append(known, e.ID) })
	})
	slices.Sort(known)
	m, ok := live[master]
	if !ok {
		return fmt.Sprintf("the master %d is not simulated on a live node", master)
	}
	at := geo.ChunkOf(m.pos)
	var stale, missing []string
	for _, id := range known {
		r, ok := live[id]
		if !ok {
			stale = append(stale, fmt.Sprintf("%d (no live node has it)", id))
			continue
		}
		if d := geo.ChunkDistance(at, geo.ChunkOf(r.pos)); d > view.Radius+view.ReleaseMargin+1 {
			stale = append(stale, fmt.Sprintf("%d (%d columns away, on %s)", id, d, r.node))
		}
	}
	for id, r := range live {
		ch := geo.ChunkOf(r.pos)
		_, _, dz := geo.ChunkDelta(at, ch)
		if geo.ChunkDistance(at, ch) < view.Radius && dz == 0 {
			if _, ok := slices.BinarySearch(known, id); !ok {
				missing = append(missing, fmt.Sprintf("%d (on %s)", id, r.node))
			}
		}
	}
	if len(stale) == 0 && len(missing) == 0 {
		return ""
	}
	slices.Sort(missing)
	return fmt.Sprintf("the client knows %d entities; held but not in the server's view: %v; in view but not known: %v",
		len(known), stale, missing)
}

// waitViewMatches polls until the client's world matches the server's
// view, failing with the last difference.
func waitViewMatches(t *testing.T, c *sim.Client, rts []*zone.Runtime, when string) {
	t.Helper()
	var diff string
	if !zonetest.Poll(15*time.Second, func() bool {
		diff = viewMismatch(c, rts)
		return diff == ""
	}) {
		t.Fatalf("%s: %s", when, diff)
	}
}

// The gateway lives (zone-0), the master's node (zone-1) dies with no
// checkpoint of the player, who comes back from its last save under new
// ids: the client, on the same socket, ends up knowing the new view and
// nothing of the old one (its old master and pet above all).
func TestAPlayerBackUnderNewIDsStartsItsViewAfresh(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rc := startResumeClusterWith(t, 3, 42, noCheckpoints)
	at := standInRegionOf(rc.rts[0], "zone-1")
	const a = account.ID(4201)
	rc.w.save(a, at)
	c := login(t, ctx, rc.urls[0], rc.w.token(a))
	master, pet := you(c)
	if on := rc.simulatedOn(master, -1); on != "zone-1" {
		t.Fatalf("the master is simulated on %q, want zone-1", on)
	}
	// The comparison holds before anything dies: it is sound.
	waitViewMatches(t, c, rc.rts, "before the kill")
	var before int
	c.Look(func(v *sim.View) { before = v.Entities() })
	t.Logf("the client knows %d entities before the kill", before)

	apply := rc.failNode(t, ctx, 1)
	rc.watch.waitSteps(t, 20)
	apply()
	var m2, p2 uint64
	if err := c.Wait(ctx, func(v *sim.View) bool {
		m2, p2 = v.You()
		_, ok := v.Position(m2)
		return m2 != master && m2 != 0 && ok
	}); err != nil {
		t.Fatalf("the client never got its player back (still %d/%d): %v", master, pet, err)
	}
	live := []*zone.Runtime{rc.rts[0], rc.rts[2]}
	waitViewMatches(t, c, live, "after the player came back")
	c.Look(func(v *sim.View) {
		for _, id := range []uint64{master, pet} {
			if _, ok := v.Entity(id); ok {
				t.Errorf("the client still holds %d, of the player lost with zone-1", id)
			}
		}
		if _, ok := v.Entity(p2); !ok {
			t.Errorf("the client does not know its new pet %d", p2)
		}
		t.Logf("the client knows %d entities after the player came back", v.Entities())
	})
	rc.watch.check(t)
	select {
	case <-c.Done():
		code, reason, _ := c.Closed()
		t.Fatalf("the socket closed (%d %s)", code, reason)
	default:
	}
}
