package zonecoord

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

func TestConfigValidateNamesTheField(t *testing.T) {
	c := newClient(t, testPrefix(t))
	for _, tc := range []struct {
		name  string
		cfg   JoinConfig
		field string
	}{
		{"no coord", JoinConfig{}, "JoinConfig.Coord"},
		{"bad name", JoinConfig{Coord: c, Name: "Zone A"}, "JoinConfig.Name"},
		{"short ttl", JoinConfig{Coord: c, TTL: 500 * time.Millisecond}, "JoinConfig.TTL"},
		{"fractional ttl", JoinConfig{Coord: c, TTL: 1500 * time.Millisecond}, "JoinConfig.TTL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			var ce *errcode.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("Validate() = %v, want a config error on %s", err, tc.field)
			}
			if _, err := Join(testCtx(t), tc.cfg); !errors.Is(err, errcode.ErrConfigInvalid) {
				t.Fatalf("Join = %v, want the config error", err)
			}
		})
	}
	if err := (JoinConfig{Coord: c, Name: "zone-a", TTL: 2 * time.Second}).Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
}

func TestJoinRegistersAsZone(t *testing.T) {
	p := testPrefix(t)
	op := newClient(t, p)
	named := join(t, p, JoinConfig{Name: "zone-a", Addrs: map[string]string{"link": "127.0.0.1:1"}})
	derived := join(t, p, JoinConfig{})
	if derived.Name() != "node-"+derived.NodeID().String() {
		t.Fatalf("derived name %q for node id %v", derived.Name(), derived.NodeID())
	}
	ms, err := op.Members(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 {
		t.Fatalf("members %+v, want 2", ms)
	}
	for _, m := range ms {
		if m.Role != Role {
			t.Fatalf("member %+v: role %q, want %q", m, m.Role, Role)
		}
	}
	if named.Table() != nil || named.Version() != 0 || named.Owns(0) || named.OwnerOf(torus.Pos{}) != "" {
		t.Fatal("a node with no table held answers as if it had one")
	}
	_, err = named.CheckWrite(0)
	wantCode(t, err, zone.CodeNoTable)

	// A name is held by one live node.
	_, err = Join(testCtx(t), JoinConfig{Coord: op, Name: "zone-a"})
	wantCode(t, err, coord.CodeNameTaken)
}

// Two nodes split the world: each owns exactly the regions the table gives
// it, and both derive the same owner for any position.
func TestTwoNodesSplitTheTable(t *testing.T) {
	p := testPrefix(t)
	op := newClient(t, p)
	a := join(t, p, JoinConfig{Name: "zone-a"})
	b := join(t, p, JoinConfig{Name: "zone-b"})
	tb := uniform(t, 1, "zone-a", "zone-b")
	apply(t, op, tb)
	waitVersion(t, a, 1)
	waitVersion(t, b, 1)

	for _, o := range []*Ownership{a, b} {
		if !o.Table().Equal(tb) {
			t.Fatalf("%s holds a table that differs from the applied one", o.Name())
		}
		want := tb.RegionsOf(o.Name())
		got := o.OwnedRegions()
		if len(want) == 0 || len(got) != len(want) {
			t.Fatalf("%s owns %d regions, want %d", o.Name(), len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: owned regions %v, want %v", o.Name(), got, want)
			}
		}
	}
	grid := tb.Grid()
	for r := range cells.RegionID(grid.Regions()) {
		if a.Owns(r) == b.Owns(r) {
			t.Fatalf("region %d: a owns %v, b owns %v; want exactly one", r, a.Owns(r), b.Owns(r))
		}
	}
	if a.Owns(-1) || a.Owns(cells.RegionID(grid.Regions())) {
		t.Fatal("a region outside the grid is owned")
	}

	rng := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	w := grid.World()
	for range 2000 {
		pos := torus.Pos{X: (rng.Float64()*3 - 1) * w.Width(), Y: (rng.Float64()*3 - 1) * w.Height()}
		oa, ob := a.OwnerOf(pos), b.OwnerOf(pos)
		if oa != ob || oa != tb.OwnerOf(pos) {
			t.Fatalf("OwnerOf(%v): a says %q, b says %q, the table %q", pos, oa, ob, tb.OwnerOf(pos))
		}
		r := grid.RegionOf(pos)
		owner, other := a, b
		if oa == "zone-b" {
			owner, other = b, a
		}
		if !owner.Owns(r) || other.Owns(r) {
			t.Fatalf("OwnerOf(%v) = %q but Owns(%d): a %v, b %v", pos, oa, r, a.Owns(r), b.Owns(r))
		}
		g, err := owner.CheckWrite(r)
		if err != nil || g.TableVersion != 1 || g.Region != r || g.Node != owner.Name() || g.Lease != owner.Lease() {
			t.Fatalf("owner CheckWrite(%d) = %+v, %v", r, g, err)
		}
		_, err = other.CheckWrite(r)
		var noe *zone.NotOwnerError
		if !errors.As(err, &noe) || !errors.Is(err, zone.ErrNotOwner) || noe.Owner != owner.Name() || noe.TableVersion != 1 {
			t.Fatalf("non-owner CheckWrite(%d) = %v, want *zone.NotOwnerError naming %s at version 1", r, err, owner.Name())
		}
		wantCode(t, err, zone.CodeNotOwner)
	}
}

// changeLog records the changes a node is told of.
type changeLog struct {
	mu  sync.Mutex
	chs []Change
}

func (l *changeLog) add(c Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.chs = append(l.chs, c)
}

func (l *changeLog) all() []Change {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Change(nil), l.chs...)
}

// An operator moves regions with a compare-and-set through coord; both
// nodes converge on the new owners and are told what they gained and lost.
func TestTableChangeMovesRegions(t *testing.T) {
	p := testPrefix(t)
	op := newClient(t, p)
	var la, lb changeLog
	a := join(t, p, JoinConfig{Name: "zone-a", OnChange: la.add})
	b := join(t, p, JoinConfig{Name: "zone-b", OnChange: lb.add})
	v1 := uniform(t, 1, "zone-a", "zone-b")
	apply(t, op, v1)

	rng := rand.New(rand.NewPCG(testseed.Seed(t), 1))
	fromA := v1.RegionsOf("zone-a")
	fromB := v1.RegionsOf("zone-b")
	ra, rb := fromA[rng.IntN(len(fromA))], fromB[rng.IntN(len(fromB))]
	v2, err := v1.WithOwners(2, map[cells.RegionID]string{ra: "zone-b", rb: "zone-a"})
	if err != nil {
		t.Fatal(err)
	}
	// A stale compare-and-set loses and changes nothing.
	err = op.ApplyRegions(testCtx(t), uniform(t, 1, "zone-b"), coord.ApplyOptions{})
	wantCode(t, err, coord.CodeRegionsConflict)
	apply(t, op, v2)

	testenv.PollUntil(t, 10*time.Second, "both nodes to own the moved regions", func() bool {
		return b.Owns(ra) && !a.Owns(ra) && a.Owns(rb) && !b.Owns(rb)
	})
	for r := range cells.RegionID(v2.Grid().Regions()) {
		if a.Owns(r) == b.Owns(r) || a.Owns(r) != (v2.Owner(r) == "zone-a") {
			t.Fatalf("region %d after the move: a %v, b %v, table %q", r, a.Owns(r), b.Owns(r), v2.Owner(r))
		}
	}
	for _, tc := range []struct {
		log          *changeLog
		gained, lost cells.RegionID
	}{{&la, rb, ra}, {&lb, ra, rb}} {
		testenv.PollUntil(t, 10*time.Second, "two changes told", func() bool { return len(tc.log.all()) == 2 })
		chs := tc.log.all()
		if chs[0].OldVersion() != 0 || chs[0].NewVersion() != 1 || len(chs[0].Lost) != 0 || len(chs[0].Gained) != 128 {
			t.Fatalf("first change %d→%d gained %d lost %d", chs[0].OldVersion(), chs[0].NewVersion(), len(chs[0].Gained), len(chs[0].Lost))
		}
		c := chs[1]
		if c.OldVersion() != 1 || c.NewVersion() != 2 || len(c.Gained) != 1 || c.Gained[0] != tc.gained || len(c.Lost) != 1 || c.Lost[0] != tc.lost {
			t.Fatalf("second change %d→%d gained %v lost %v, want gained [%d] lost [%d]", c.OldVersion(), c.NewVersion(), c.Gained, c.Lost, tc.gained, tc.lost)
		}
	}
}

// A node given a region does not own it until it holds the version that
// gives it: here b's follower is held back inside its callback for version
// 1 while version 2, which gives b a region of a's, is already stored.
func TestGivenRegionNotOwnedBeforeItsVersionIsHeld(t *testing.T) {
	p := testPrefix(t)
	op := newClient(t, p)
	release := make(chan struct{})
	inV1 := make(chan struct{})
	a := join(t, p, JoinConfig{Name: "zone-a"})
	b := join(t, p, JoinConfig{Name: "zone-b", OnChange: func(c Change) {
		if c.NewVersion() == 1 {
			close(inV1)
			<-release
		}
	}})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	v1 := uniform(t, 1, "zone-a", "zone-b")
	apply(t, op, v1)
	<-inV1
	r := v1.RegionsOf("zone-a")[0]
	v2, err := v1.WithOwners(2, map[cells.RegionID]string{r: "zone-b"})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, op, v2)
	waitVersion(t, a, 2)
	if a.Owns(r) {
		t.Fatal("a still owns the region it lost in the version it holds")
	}
	// Stored in etcd, held by a, not yet held by b: nobody owns r now,
	// which is the safe side of the move.
	if b.Version() != 1 || b.Owns(r) {
		t.Fatalf("b at version %d owns %d: %v; want version 1, not owned", b.Version(), r, b.Owns(r))
	}
	_, err = b.CheckWrite(r)
	var noe *zone.NotOwnerError
	if !errors.As(err, &noe) || noe.Owner != "zone-a" || noe.TableVersion != 1 {
		t.Fatalf("b CheckWrite(%d) before holding v2 = %v, want not owner (zone-a, v1)", r, err)
	}
	close(release)
	waitVersion(t, b, 2)
	if g, err := b.CheckWrite(r); err != nil || g.TableVersion != 2 {
		t.Fatalf("b CheckWrite(%d) at v2 = %+v, %v", r, g, err)
	}
}

// A revoked lease fences the node within its TTL: it owns nothing, every
// write permission is refused with ZONE.FENCED, and the fence holds.
func TestLeaseLossFences(t *testing.T) {
	p := testPrefix(t)
	op := newClient(t, p)
	a := join(t, p, JoinConfig{Name: "zone-a", TTL: 2 * time.Second})
	b := join(t, p, JoinConfig{Name: "zone-b"})
	apply(t, op, uniform(t, 1, "zone-a", "zone-b"))
	waitVersion(t, a, 1)
	if len(a.OwnedRegions()) == 0 {
		t.Fatal("a owns nothing before the fence")
	}
	r := a.OwnedRegions()[0]

	raw, err := clientv3.New(clientv3.Config{Endpoints: sharedEtcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	revoked := time.Now()
	if _, err := raw.Revoke(testCtx(t), clientv3.LeaseID(a.Lease())); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Fenced():
	case <-time.After(2 * time.Second):
		t.Fatal("not fenced within the lease TTL after a revoke")
	}
	t.Logf("fenced %v after the revoke", time.Since(revoked))
	if a.Context().Err() == nil {
		t.Fatal("Context not cancelled at the fence")
	}
	for r := range cells.RegionID(cells.DefaultGrid().Regions()) {
		if a.Owns(r) {
			t.Fatalf("fenced node owns region %d", r)
		}
	}
	if a.OwnedRegions() != nil {
		t.Fatal("fenced node lists owned regions")
	}
	_, err = a.CheckWrite(r)
	wantCode(t, err, zone.CodeFenced)
	var fe *zone.FencedError
	if !errors.As(err, &fe) || fe.TableVersion != 1 || !errors.Is(err, zone.ErrFenced) || !errors.Is(err, coord.ErrLeaseLost) {
		t.Fatalf("CheckWrite after the fence = %v, want *zone.FencedError at version 1 matching coord.ErrLeaseLost", err)
	}
	if err := a.WaitVersion(testCtx(t), 2); !errors.Is(err, zone.ErrFenced) {
		t.Fatalf("WaitVersion after the fence = %v, want ErrFenced", err)
	}
	// The operator gives a's regions to b; a learns nothing more (its
	// follower stopped with the lease), b takes them.
	apply(t, op, uniform(t, 2, "zone-b"))
	waitVersion(t, b, 2)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if a.Version() != 1 || a.Owns(r) {
		t.Fatalf("fenced node moved to version %d or owns %d again", a.Version(), r)
	}
	if !b.Owns(r) {
		t.Fatalf("b does not own region %d at version 2", r)
	}
	// Close after the fence keeps the fence's reason.
	_, err = a.CheckWrite(r)
	wantCode(t, err, zone.CodeFenced)
}

// Close fences the node, frees its name at once, stops its goroutine, and
// can be called again.
func TestCloseStopsEverything(t *testing.T) {
	p := testPrefix(t)
	op := newClient(t, p)
	a := join(t, p, JoinConfig{Name: "zone-a"})
	apply(t, op, uniform(t, 1, "zone-a"))
	waitVersion(t, a, 1)
	if !a.Owns(0) {
		t.Fatal("sole node does not own region 0")
	}
	for range 2 {
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if a.Owns(0) || !isClosed(a.Fenced()) || !errors.Is(a.Err(), zone.ErrClosed) {
		t.Fatalf("after Close: owns %v, fenced %v, err %v", a.Owns(0), isClosed(a.Fenced()), a.Err())
	}
	_, err := a.CheckWrite(0)
	wantCode(t, err, zone.CodeClosed)
	if err := a.WaitVersion(testCtx(t), 2); !errors.Is(err, zone.ErrClosed) {
		t.Fatalf("WaitVersion after Close = %v", err)
	}
	noZoneGoroutines(t)
	// Revoked, not left to expire: the name is free at once.
	again := join(t, p, JoinConfig{Coord: op, Name: "zone-a"})
	waitVersion(t, again, 1)
	if !again.Owns(0) {
		t.Fatal("the restarted node does not own region 0")
	}
}

// Join fails cleanly, registering nothing, when its context ends.
func TestJoinCancelled(t *testing.T) {
	p := testPrefix(t)
	op := newClient(t, p)
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	if _, err := Join(ctx, JoinConfig{Coord: op, Name: "zone-a"}); err == nil {
		t.Fatal("Join with a cancelled context succeeded")
	}
	noZoneGoroutines(t)
	ms, err := op.Members(testCtx(t))
	if err != nil || len(ms) != 0 {
		t.Fatalf("members after a failed join: %+v, %v", ms, err)
	}
}

func TestCollectors(t *testing.T) {
	p := testPrefix(t)
	op := newClient(t, p)
	a := join(t, p, JoinConfig{Name: "zone-a"})
	b := join(t, p, JoinConfig{Name: "zone-b"})
	reg := prometheus.NewRegistry()
	for _, c := range a.Collectors() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	apply(t, op, uniform(t, 1, "zone-a", "zone-b"))
	waitVersion(t, a, 1)
	m := a.met
	if got := gauge(t, m.owned); got != 128 {
		t.Fatalf("owned regions gauge %v, want 128", got)
	}
	if got := gauge(t, m.version); got != 1 {
		t.Fatalf("table version gauge %v, want 1", got)
	}
	if got := gauge(t, m.fenced); got != 0 {
		t.Fatalf("fenced gauge %v, want 0", got)
	}
	_ = b
	_ = a.Close()
	if got, f := gauge(t, m.owned), gauge(t, m.fenced); got != 0 || f != 1 {
		t.Fatalf("after Close: owned %v fenced %v, want 0 and 1", got, f)
	}
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// A node cut off from etcd stops owning before etcd can expire its lease:
// coord gives up at nine tenths of the TTL after the last renewal it sent,
// and Owns answers from coord's fence with no lag of ours.
func TestPartitionFencesWithinTTL(t *testing.T) {
	p := testPrefix(t)
	op := newClient(t, p)
	proxy := testenv.StartTCPProxy(t, sharedEtcd.Endpoints()[0])
	cut, err := coord.Connect(testCtx(t), coord.ClientConfig{
		Endpoints:   []string{proxy.Endpoint()},
		Prefix:      p,
		Logger:      testLogger(t),
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cut.Close() })
	a := join(t, p, JoinConfig{Coord: cut, Name: "zone-a", TTL: time.Second})
	apply(t, op, uniform(t, 1, "zone-a"))
	waitVersion(t, a, 1)
	if !a.Owns(0) {
		t.Fatal("sole node does not own region 0")
	}

	ttl := a.reg.TTL()
	cutAt := time.Now()
	proxy.Cut()
	select {
	case <-a.Fenced():
	case <-time.After(ttl):
		t.Fatalf("still not fenced %v after the partition (TTL %v)", time.Since(cutAt), ttl)
	}
	t.Logf("fenced %v after the partition (TTL %v)", time.Since(cutAt), ttl)
	if a.Owns(0) || a.OwnedRegions() != nil {
		t.Fatal("a partitioned, fenced node still owns a region")
	}
	_, err = a.CheckWrite(0)
	wantCode(t, err, zone.CodeFenced)
	if !errors.Is(err, coord.ErrLeaseLost) {
		t.Fatalf("CheckWrite = %v, want it to carry coord.ErrLeaseLost", err)
	}
}

// Concurrent readers never see a permission the held table does not
// give: every Grant for the contested region names a version in which this
// node owns it, while an operator moves the region back and forth.
func TestGrantsNameAVersionThatGivesTheRegion(t *testing.T) {
	p := testPrefix(t)
	op := newClient(t, p)
	a := join(t, p, JoinConfig{Name: "zone-a"})
	b := join(t, p, JoinConfig{Name: "zone-b"})
	tb := uniform(t, 1, "zone-a", "zone-b")
	apply(t, op, tb)
	r := tb.RegionsOf("zone-a")[0]
	// Odd versions give r to a, even ones to b.
	ownerAt := func(v uint64) string {
		if v%2 == 1 {
			return "zone-a"
		}
		return "zone-b"
	}
	const last = 12
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad sync.Map
	for _, o := range []*Ownership{a, b} {
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						runtime.Gosched() // readers must not starve the follower
					}
					g, err := o.CheckWrite(r)
					if err == nil && ownerAt(g.TableVersion) != o.Name() {
						bad.Store(g, true)
					}
					var noe *zone.NotOwnerError
					if errors.As(err, &noe) && noe.Owner == o.Name() {
						bad.Store(*noe, true)
					}
				}
			})
		}
	}
	for v := uint64(2); v <= last; v++ {
		tb, _ = tb.WithOwners(v, map[cells.RegionID]string{r: ownerAt(v)})
		apply(t, op, tb)
	}
	waitVersion(t, a, last)
	waitVersion(t, b, last)
	close(stop)
	wg.Wait()
	bad.Range(func(k, _ any) bool {
		t.Errorf("inconsistent answer: %+v", k)
		return true
	})
	if !b.Owns(r) || a.Owns(r) {
		t.Fatalf("at version %d: a owns %v, b owns %v", last, a.Owns(r), b.Owns(r))
	}
}
