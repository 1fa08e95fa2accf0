package zone_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardwise/shardwise/internal/testenv"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// TestAParkedGhostOfADestroyedEntityIsNotShownAgain: a viewer on zone-0 sees
// an entity of zone-1 (outside zone-0's band), looks away, the entity is
// destroyed once zone-1 took in the unsubscribe, and the viewer looks back
// within parkTicks: it must not be shown the entity again.
func TestAParkedGhostOfADestroyedEntityIsNotShownAgain(t *testing.T) {
	near := torus.Pos{X: 1000, Y: 4056}
	far := torus.Pos{X: 1000, Y: 3700}
	m := func(int, string) (zone.Module, error) {
		return &pacers{accounts: 1, specs: []Pace{
			{Centre: near},                        // the viewer, on zone-0
			{Centre: torus.Pos{X: 1000, Y: 4200}}, // X, on zone-1, chunk y 131
		}}, nil
	}
	c := zonetest.Start(t, zonetest.Config{Nodes: 2, Grid: clusterGrid(), Module: m})
	z0, z1 := c.Nodes[0], c.Nodes[1]
	viewer, _ := zone.DerivedID(0)
	x, _ := zone.DerivedID(1)
	if _, ok := z0.Runtime.Viewer(account.ID(1)); !ok {
		t.Fatal("viewer not on zone-0")
	}
	log := newSightLog()
	z0.Runtime.Attach(account.ID(1), log)
	move := func(p torus.Pos) {
		pos, _ := z0.Runtime.Positions().Get(viewer)
		pos.Pos = p
		z0.Runtime.Positions().MarkDirty(viewer)
		z0.Runtime.World().MarkMoved(viewer)
	}
	c.StepSync(10)
	if ap, va := log.count(uint64(x)); ap != 1 || va != 0 {
		t.Fatalf("before: shown %d, vanished %d", ap, va)
	}
	move(far)
	c.StepSync(1) // zone-0 drops chunk 131: parks X's ghost
	t.Logf("zone-0 render ghosts after parking: %d", z0.Runtime.RenderGhosts())
	if ap, va := log.count(uint64(x)); ap != 1 || va != 1 {
		t.Fatalf("after looking away: shown %d, vanished %d", ap, va)
	}
	c.StepSync(1) // zone-1 takes in the unsubscribe
	t.Logf("zone-0 render ghosts after zone-1 took the unsubscribe: %d", z0.Runtime.RenderGhosts())
	c.StepSync(1)
	t.Logf("zone-0 render ghosts a tick later: %d", z0.Runtime.RenderGhosts())
	if err := z1.Runtime.Destroy(x, interest.Gone); err != nil {
		t.Fatal(err)
	}
	c.StepSync(2)
	t.Logf("zone-0 render ghosts while X is destroyed: %d", z0.Runtime.RenderGhosts())
	move(near)
	for i := range 6 {
		c.StepSync(1)
		ap, va := log.count(uint64(x))
		t.Logf("tick +%d after looking back: shown %d, vanished %d", i+1, ap, va)
	}
	if ap, _ := log.count(uint64(x)); ap != 1 {
		t.Errorf("the destroyed entity was shown again (%d appears in all): a zombie from a parked ghost", ap)
	}
}

// TestAParkedGhostOfAFencedPeerIsNotShown (a review found it shown): a viewer on zone-0 looks away from
// an entity of zone-1 (its ghost is parked), zone-1 loses its lease, and
// the viewer looks back within parkTicks: a fenced node's ghosts vanish
// (fencedPeers), so it must not be shown the entity again.
func TestAParkedGhostOfAFencedPeerIsNotShown(t *testing.T) {
	near := torus.Pos{X: 1000, Y: 4056}
	far := torus.Pos{X: 1000, Y: 3700}
	m := func(int, string) (zone.Module, error) {
		return &pacers{accounts: 1, specs: []Pace{
			{Centre: near},
			{Centre: torus.Pos{X: 1000, Y: 4200}},
		}}, nil
	}
	const ttl = 2 * time.Second
	c := zonetest.Start(t, zonetest.Config{Nodes: 2, Grid: clusterGrid(), Module: m, TTL: ttl})
	z0, z1 := c.Nodes[0], c.Nodes[1]
	viewer, _ := zone.DerivedID(0)
	x, _ := zone.DerivedID(1)
	log := newSightLog()
	z0.Runtime.Attach(account.ID(1), log)
	move := func(p torus.Pos) {
		pos, _ := z0.Runtime.Positions().Get(viewer)
		pos.Pos = p
		z0.Runtime.Positions().MarkDirty(viewer)
		z0.Runtime.World().MarkMoved(viewer)
	}
	c.StepSync(10)
	if ap, va := log.count(uint64(x)); ap != 1 || va != 0 {
		t.Fatalf("before: shown %d, vanished %d", ap, va)
	}
	move(far)
	z0.Runtime.Step() // parks X's ghost; zone-1 does not step again
	t.Logf("after looking away: render ghosts %d", z0.Runtime.RenderGhosts())

	raw, err := clientv3.New(clientv3.Config{Endpoints: c.Etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease := z1.Ownership.Lease()
	if _, err := raw.Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	testenv.PollUntil(t, ttl, "the membership drops the revoked lease", func() bool { return !c.Accepts(z1.Name, lease) })
	z0.Runtime.Step() // fencedPeers forgets zone-1
	t.Logf("after the fence: render ghosts %d", z0.Runtime.RenderGhosts())
	move(near)
	for i := range 10 {
		z0.Runtime.Step()
		ap, va := log.count(uint64(x))
		t.Logf("tick +%d after looking back: shown %d, vanished %d, render ghosts %d", i+1, ap, va, z0.Runtime.RenderGhosts())
	}
	if ap, _ := log.count(uint64(x)); ap != 1 {
		t.Errorf("the fenced node's entity was shown again (%d appears in all)", ap)
	}
}
