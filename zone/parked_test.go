package zone_test

import (
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// parkScene is two nodes and a viewer on zone-0 that sees X, an entity
// of zone-1 outside zone-0's band, from near, and can look away to far.
type parkScene struct {
	c         *zonetest.Cluster
	z0, z1    *zonetest.Node
	x         ecs.ID
	log       *sightLog
	near, far torus.Pos
}

func newParkScene(t *testing.T, ttl time.Duration) *parkScene {
	t.Helper()
	ps := &parkScene{near: torus.Pos{X: 1000, Y: 4056}, far: torus.Pos{X: 1000, Y: 3700}}
	m := func(int, string) (zone.Module, error) {
		return &pacers{accounts: 1, specs: []Pace{
			{Centre: ps.near},                     // the viewer, on zone-0
			{Centre: torus.Pos{X: 1000, Y: 4200}}, // X, on zone-1, chunk y 131
		}}, nil
	}
	ps.c = zonetest.Start(t, zonetest.Config{Nodes: 2, Grid: clusterGrid(), Module: m, TTL: ttl})
	ps.z0, ps.z1 = ps.c.Nodes[0], ps.c.Nodes[1]
	ps.x, _ = zone.DerivedID(1)
	if _, ok := ps.z0.Runtime.Viewer(account.ID(1)); !ok {
		t.Fatal("viewer not on zone-0")
	}
	ps.log = newSightLog()
	ps.z0.Runtime.Attach(account.ID(1), ps.log)
	return ps
}

// look moves the viewer to p.
func (ps *parkScene) look(p torus.Pos) {
	viewer, _ := zone.DerivedID(0)
	pos, _ := ps.z0.Runtime.Positions().Get(viewer)
	pos.Pos = p
	ps.z0.Runtime.Positions().MarkDirty(viewer)
	ps.z0.Runtime.World().MarkMoved(viewer)
}

// TestAParkedGhostOfADestroyedEntityIsNotShownAgain: a viewer on zone-0 sees
// an entity of zone-1 (outside zone-0's band), looks away, the entity is
// destroyed once zone-1 took in the unsubscribe, and the viewer looks back
// within Timers.Park ticks: it must not be shown the entity again.
func TestAParkedGhostOfADestroyedEntityIsNotShownAgain(t *testing.T) {
	ps := newParkScene(t, 0)
	ps.c.StepSync(10)
	if ap, va := ps.log.count(uint64(ps.x)); ap != 1 || va != 0 {
		t.Fatalf("before: shown %d, vanished %d", ap, va)
	}
	ps.look(ps.far)
	ps.c.StepSync(1) // zone-0 drops chunk 131: parks X's ghost
	t.Logf("zone-0 render ghosts after parking: %d", ps.z0.Runtime.RenderGhosts())
	if ap, va := ps.log.count(uint64(ps.x)); ap != 1 || va != 1 {
		t.Fatalf("after looking away: shown %d, vanished %d", ap, va)
	}
	ps.c.StepSync(1) // zone-1 takes in the unsubscribe
	t.Logf("zone-0 render ghosts after zone-1 took the unsubscribe: %d", ps.z0.Runtime.RenderGhosts())
	ps.c.StepSync(1)
	t.Logf("zone-0 render ghosts a tick later: %d", ps.z0.Runtime.RenderGhosts())
	if err := ps.z1.Runtime.Destroy(ps.x, interest.Gone); err != nil {
		t.Fatal(err)
	}
	ps.c.StepSync(2)
	t.Logf("zone-0 render ghosts while X is destroyed: %d", ps.z0.Runtime.RenderGhosts())
	ps.look(ps.near)
	for i := range 6 {
		ps.c.StepSync(1)
		ap, va := ps.log.count(uint64(ps.x))
		t.Logf("tick +%d after looking back: shown %d, vanished %d", i+1, ap, va)
	}
	if ap, _ := ps.log.count(uint64(ps.x)); ap != 1 {
		t.Errorf("the destroyed entity was shown again (%d appears in all): a zombie from a parked ghost", ap)
	}
}

// TestAParkedGhostOfAFencedPeerIsNotShown (a review found it shown): a
// viewer on zone-0 looks away from an entity of zone-1 (its ghost is
// parked), zone-1 loses its lease, and the viewer looks back within
// Timers.Park ticks: a fenced node's parked ghosts are dropped (sweepParked; only
// the ghosts a client or the band holds are held at the fence), so it must not be
// shown the entity again.
func TestAParkedGhostOfAFencedPeerIsNotShown(t *testing.T) {
	const ttl = 2 * time.Second
	ps := newParkScene(t, ttl)
	ps.c.StepSync(10)
	if ap, va := ps.log.count(uint64(ps.x)); ap != 1 || va != 0 {
		t.Fatalf("before: shown %d, vanished %d", ap, va)
	}
	ps.look(ps.far)
	ps.z0.Runtime.Step() // parks X's ghost; zone-1 does not step again
	t.Logf("after looking away: render ghosts %d", ps.z0.Runtime.RenderGhosts())

	lease := ps.z1.Ownership.Lease()
	revokeLease(t, ps.c, lease)
	testenv.PollUntil(t, ttl, "the membership drops the revoked lease", func() bool { return !ps.c.Accepts(ps.z1.Name, lease) })
	ps.z0.Runtime.Step() // fencedPeers forgets zone-1
	t.Logf("after the fence: render ghosts %d", ps.z0.Runtime.RenderGhosts())
	ps.look(ps.near)
	for i := range 10 {
		ps.z0.Runtime.Step()
		ap, va := ps.log.count(uint64(ps.x))
		t.Logf("tick +%d after looking back: shown %d, vanished %d, render ghosts %d", i+1, ap, va, ps.z0.Runtime.RenderGhosts())
	}
	if ap, _ := ps.log.count(uint64(ps.x)); ap != 1 {
		t.Errorf("the fenced node's entity was shown again (%d appears in all)", ap)
	}
}
