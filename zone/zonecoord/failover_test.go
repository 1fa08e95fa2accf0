package zonecoord

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/zone"
)

// The controller counts as gone only the nodes it has seen live.
func TestFailoverGoneOnlyWhatWasSeen(t *testing.T) {
	fc := &failoverController{live: map[coord.NodeID]string{}, seen: map[string]bool{}}
	fc.member(coord.MembershipEvent{Kind: coord.MemberJoined, Member: coord.Member{ID: 1, Name: "zone-1", Role: Role}})
	fc.member(coord.MembershipEvent{Kind: coord.MemberJoined, Member: coord.Member{ID: 2, Name: "zone-2", Role: Role}})
	fc.member(coord.MembershipEvent{Kind: coord.MemberJoined, Member: coord.Member{ID: 3, Name: "econ-1", Role: "econ"}})
	fc.member(coord.MembershipEvent{Kind: coord.MemberLeft, Member: coord.Member{ID: 2, Name: "zone-2", Role: Role}})
	live, gone := fc.gone()
	if !slices.Equal(live, []string{"zone-1"}) || !slices.Equal(gone, []string{"zone-2"}) {
		t.Fatalf("live %v gone %v", live, gone)
	}
	// Back under another id: live again, owed nothing.
	fc.member(coord.MembershipEvent{Kind: coord.MemberJoined, Member: coord.Member{ID: 7, Name: "zone-2", Role: Role}})
	if live, gone = fc.gone(); len(gone) != 0 || len(live) != 2 {
		t.Fatalf("after the return: live %v gone %v", live, gone)
	}
}

// foNode is a zone member with its failover controller, reaching etcd
// through a proxy the test can cut (the node then dies as etcd sees it:
// its lease and its candidacy expire).
type foNode struct {
	name  string
	cl    *coord.Client
	own   *Ownership
	proxy *testenv.TCPProxy
	stop  func()
}

func startFailoverNode(t *testing.T, p, name string, hook func(*cells.Table)) *foNode {
	t.Helper()
	proxy := testenv.StartTCPProxy(t, sharedEtcd.Endpoints()[0])
	cl, err := coord.Connect(testCtx(t), coord.ClientConfig{Endpoints: []string{proxy.Endpoint()}, Prefix: p, Logger: testLogger(t), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	n := &foNode{name: name, cl: cl, proxy: proxy}
	n.own = join(t, p, JoinConfig{Coord: cl, Name: name, TTL: time.Second})
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		done <- RunFailover(ctx, FailoverConfig{Coord: cl, Name: name, TTL: time.Second, Logger: testLogger(t), beforeApply: hook})
	}()
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !strings.Contains(err.Error(), "closed") {
				t.Errorf("RunFailover(%s) = %v", name, err)
			}
		})
	}
	t.Cleanup(n.stop)
	return n
}

// leaderOf waits for a controller to lead and returns its node.
func leaderOf(t *testing.T, op *coord.Client, nodes []*foNode) *foNode {
	t.Helper()
	var leader string
	testenv.PollUntil(t, 10*time.Second, "a controller leads", func() bool {
		v, err := op.Leader(testCtx(t), FailoverElection)
		leader = v
		return err == nil
	})
	for _, n := range nodes {
		if n.name == leader {
			return n
		}
	}
	t.Fatalf("leader %q is none of the nodes", leader)
	return nil
}

// waitTable polls etcd until the table reaches version v and returns it
// with its provenance.
func waitTable(t *testing.T, op *coord.Client, v uint64, within time.Duration) (*cells.Table, coord.Provenance) {
	t.Helper()
	var (
		tb   *cells.Table
		prov coord.Provenance
	)
	testenv.PollUntil(t, within, fmt.Sprintf("table version %d", v), func() bool {
		var err error
		tb, prov, err = op.RegionsProvenance(testCtx(t))
		return err == nil && tb.Version() >= v
	})
	if tb.Version() != v {
		t.Fatalf("table version %d, want exactly %d", tb.Version(), v)
	}
	return tb, prov
}

// settled waits until every node in nodes holds the stored version, then
// checks that it is still want: no second write followed the first.
func settled(t *testing.T, op *coord.Client, want uint64, nodes ...*foNode) {
	t.Helper()
	for _, n := range nodes {
		waitVersion(t, n.own, want)
	}
	if tb, err := op.Regions(testCtx(t)); err != nil || tb.Version() != want {
		t.Fatalf("stored table %v, %v; want version %d and no later one", tb, err, want)
	}
}

func startThree(t *testing.T, p string, hook func(*cells.Table)) (*coord.Client, []*foNode, *cells.Table) {
	op := newClient(t, p)
	var nodes []*foNode
	for _, name := range []string{"zone-1", "zone-2", "zone-3"} {
		nodes = append(nodes, startFailoverNode(t, p, name, hook))
	}
	v1 := uniform(t, 1, "zone-1", "zone-2", "zone-3")
	if err := op.ApplyRegions(testCtx(t), v1, coord.ApplyOptions{Writer: "operator test"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitVersion(t, n.own, 1)
	}
	return op, nodes, v1
}

func others(nodes []*foNode, not ...*foNode) (out []*foNode, names []string) {
	for _, n := range nodes {
		if !slices.Contains(not, n) {
			out = append(out, n)
			names = append(names, n.name)
		}
	}
	return out, names
}

// A member whose lease expires (cut off from etcd, as if dead) or is
// revoked (its client closed: the node stopped) has its regions given to
// their standbys in exactly one new version, written by the controller,
// which says so; the same when the member was the controller itself.
func TestFailoverReownsALeftNodesRegions(t *testing.T) {
	for _, tc := range []struct {
		name               string
		killLeader, revoke bool
	}{{"cut", false, false}, {"cut-leader", true, false}, {"closed", false, true}, {"closed-leader", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			killLeader := tc.killLeader
			p := testPrefix(t)
			op, nodes, v1 := startThree(t, p, nil)
			leader := leaderOf(t, op, nodes)
			dead := leader
			if !killLeader {
				dead = nodes[(slices.Index(nodes, leader)+1)%len(nodes)]
			}
			alive, liveNames := others(nodes, dead)
			cut := time.Now()
			if tc.revoke {
				dead.stop()
				_ = dead.cl.Close() // revokes its lease: the name is free at once
			} else {
				dead.proxy.Cut()
			}
			v2, prov := waitTable(t, op, 2, 15*time.Second)
			t.Logf("%s %s (leader: %v): version 2 stored %v later (TTL 1s)", tc.name, dead.name, killLeader, time.Since(cut))
			want, _, err := zone.PlanFailover(v1, liveNames, []string{dead.name})
			if err != nil {
				t.Fatal(err)
			}
			if !v2.Equal(want) {
				t.Fatalf("version 2 owners %v, want %v", v2.Owners(), want.Owners())
			}
			if !strings.HasPrefix(prov.Writer, "controller ") || prov.Writer == "controller "+dead.name ||
				!strings.Contains(prov.Reason, dead.name+" left") {
				t.Fatalf("provenance %+v", prov)
			}
			settled(t, op, 2, alive...)
		})
	}
}

// revokeCandidacy ends a controller's leadership without touching its
// member lease: the node lives on, deposed, as after a long pause.
func revokeCandidacy(t *testing.T, p, name string) {
	t.Helper()
	raw, err := clientv3.New(clientv3.Config{Endpoints: sharedEtcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	resp, err := raw.Get(testCtx(t), p+"elections/"+FailoverElection+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if string(kv.Value) == name {
			if _, err := raw.Revoke(testCtx(t), clientv3.LeaseID(kv.Lease)); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no candidacy of %s", name)
}

// The controller dies between planning and writing: the next one, elected
// when its candidacy expires, writes the table, which re-owns the regions
// of both dead nodes; and a deposed controller that resumes its write
// after the new one wrote cannot write a second version.
func TestFailoverControllerDiesMidway(t *testing.T) {
	for _, how := range []string{"dies", "deposed"} {
		t.Run(how, func(t *testing.T) {
			p := testPrefix(t)
			planned := make(chan string, 3)
			release := make(chan struct{})
			var first sync.Once
			hook := func(*cells.Table) {
				stall := false
				first.Do(func() { stall = true })
				if stall {
					planned <- "stalled"
					<-release
				}
			}
			op, nodes, v1 := startThree(t, p, hook)
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})
			leader := leaderOf(t, op, nodes)
			victim := nodes[(slices.Index(nodes, leader)+1)%len(nodes)]
			victim.proxy.Cut()
			<-planned // the leader planned victim's failover and stalls
			gone := []string{victim.name}
			switch how {
			case "dies":
				leader.proxy.Cut()
				gone = append(gone, leader.name)
			case "deposed":
				revokeCandidacy(t, p, leader.name)
			}
			alive, liveNames := others(nodes, victim, leader)
			if how == "deposed" {
				alive = append(alive, leader)
				liveNames = append(liveNames, leader.name)
			}
			var (
				final *cells.Table
				prov  coord.Provenance
			)
			// The dead controller's candidacy and its member lease are two
			// leases: the next controller may see it die after it took over,
			// and re-own its regions in a second version.
			testenv.PollUntil(t, 15*time.Second, "the dead nodes' regions re-owned", func() bool {
				var err error
				final, prov, err = op.RegionsProvenance(testCtx(t))
				if err != nil || prov.Writer == "controller "+leader.name {
					return err == nil
				}
				for _, g := range gone {
					if slices.Contains(final.Nodes(), g) {
						return false
					}
				}
				return true
			})
			if prov.Writer == "controller "+leader.name {
				t.Fatalf("version %d written by the stalled controller: %+v", final.Version(), prov)
			}
			want, _, err := zone.PlanFailover(v1, liveNames, gone)
			if err != nil {
				t.Fatal(err)
			}
			if how == "deposed" && (final.Version() != 2 || !final.Equal(want)) {
				t.Fatalf("version %d owners %v, want version 2 %v (gone %v)", final.Version(), final.Owners(), want.Owners(), gone)
			}
			if how == "dies" && (final.Version() > 3 || !slices.Equal(final.Nodes(), liveNames)) {
				t.Fatalf("version %d names %v, want at most version 3 naming only %v", final.Version(), final.Nodes(), liveNames)
			}
			close(release) // the old controller resumes its write
			if how == "deposed" {
				// It is back as a candidate; wait until it has had its say.
				testenv.PollUntil(t, 10*time.Second, "the deposed controller's candidacy", func() bool {
					resp, err := op.Leader(testCtx(t), FailoverElection)
					return err == nil && resp != ""
				})
			}
			leader.stop()
			settled(t, op, final.Version(), alive...)
		})
	}
}

// An operator's apply lands between the controller's plan and its write:
// the controller's write is refused by the version compare, and it plans
// again from the operator's table, keeping the operator's change.
func TestFailoverReplansAfterAnOperatorApply(t *testing.T) {
	p := testPrefix(t)
	var (
		once   sync.Once
		opTb   *cells.Table
		opErr  error
		opDone = make(chan struct{})
		// set by the test before the victim is cut, read by the hook
		mu        sync.Mutex
		op        *coord.Client
		liveNames []string
	)
	hook := func(planned *cells.Table) {
		once.Do(func() {
			defer close(opDone)
			mu.Lock()
			op, liveNames := op, liveNames
			mu.Unlock()
			// The operator moves a region between two live nodes, as
			// version 2, over the table the controller planned from.
			cur, err := op.Regions(testCtx(t))
			if err != nil {
				opErr = err
				return
			}
			var r cells.RegionID
			for _, x := range cur.RegionsOf(liveNames[0]) {
				r = x
				break
			}
			opTb, opErr = cur.WithOwners(cur.Version()+1, map[cells.RegionID]string{r: liveNames[1]})
			if opErr == nil {
				// Forced: the table still names the node that just died.
				opErr = op.ApplyRegions(testCtx(t), opTb, coord.ApplyOptions{Force: true, Writer: "operator test", Reason: "move"})
			}
		})
	}
	op2, nodes, _ := startThree(t, p, hook)
	leader := leaderOf(t, op2, nodes)
	victim := nodes[(slices.Index(nodes, leader)+1)%len(nodes)]
	dead := victim.name
	alive, names := others(nodes, victim)
	mu.Lock()
	op, liveNames = op2, names
	mu.Unlock()
	victim.proxy.Cut()
	<-opDone
	if opErr != nil {
		t.Fatalf("operator apply: %v", opErr)
	}
	v3, prov := waitTable(t, op2, 3, 15*time.Second)
	want, _, err := zone.PlanFailover(opTb, names, []string{dead})
	if err != nil {
		t.Fatal(err)
	}
	if !v3.Equal(want) {
		t.Fatalf("version 3 owners %v, want the operator's table with %s's regions re-owned %v", v3.Owners(), dead, want.Owners())
	}
	if prov.Writer != "controller "+leader.name {
		t.Fatalf("version 3 provenance %+v", prov)
	}
	settled(t, op2, 3, alive...)
}
