package netting_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

var nodes3 = []string{"econ-1", "econ-2", "econ-3"}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// storeOnly hides the reservation methods of a store.
type storeOnly struct{ netting.Store }

func TestOpenClusterNodeRefuses(t *testing.T) {
	s := netting.NewMemStore()
	cases := []struct {
		name  string
		store netting.Store
		cfg   netting.ClusterConfig
		field string
	}{
		{"own id missing", s, netting.ClusterConfig{NodeID: "econ-4", Nodes: nodes3}, "NodeID"},
		{"empty id", s, netting.ClusterConfig{Nodes: nodes3}, "NodeID"},
		{"empty list", s, netting.ClusterConfig{NodeID: "econ-1"}, "Nodes"},
		{"duplicate", s, netting.ClusterConfig{NodeID: "econ-1", Nodes: []string{"econ-1", "econ-2", "econ-1"}}, "Nodes"},
		{"empty entry", s, netting.ClusterConfig{NodeID: "econ-1", Nodes: []string{"econ-1", ""}}, "Nodes"},
		{"no shared counter", storeOnly{s}, netting.ClusterConfig{NodeID: "econ-1", Nodes: nodes3}, "store"},
		{"sweep under the epoch-age law", s, netting.ClusterConfig{NodeID: "econ-1", Nodes: nodes3, EpochMaxAge: time.Minute,
			Sweep: &netting.SweepConfig{SettleOlderThan: 2*time.Minute - time.Millisecond}}, "Sweep.SettleOlderThan"},
		{"sweep under the default epoch age", s, netting.ClusterConfig{NodeID: "econ-1", Nodes: nodes3,
			Sweep: &netting.SweepConfig{SettleOlderThan: 119 * time.Second}}, "Sweep.SettleOlderThan"},
		{"negative epoch age", s, netting.ClusterConfig{NodeID: "econ-1", Nodes: nodes3, EpochMaxAge: -1}, "EpochMaxAge"},
		{"negative sweep limit", s, netting.ClusterConfig{NodeID: "econ-1", Nodes: nodes3,
			Sweep: &netting.SweepConfig{SettleOlderThan: time.Hour, Limit: -1}}, "Sweep.Limit"},
	}
	for _, c := range cases {
		_, err := netting.OpenClusterNode(c.store, c.cfg)
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, errcode.ErrConfigInvalid) || netting.Code(err) != "CONFIG.INVALID" || ce.Field != c.field {
			t.Errorf("%s: %v, want CONFIG.INVALID on %s", c.name, err, c.field)
		}
	}
	// Equality with the law is allowed.
	_, err := netting.OpenClusterNode(s, netting.ClusterConfig{NodeID: "econ-1", Nodes: nodes3, EpochMaxAge: time.Minute,
		Sweep: &netting.SweepConfig{SettleOlderThan: 2 * time.Minute}})
	must(t, err)
	_, err = netting.OpenClusterNode(s, netting.ClusterConfig{NodeID: "econ-1", Nodes: nodes3,
		Sweep: &netting.SweepConfig{SettleOlderThan: 2 * netting.DefaultEpochMaxAge}})
	must(t, err)
}

func TestScopeRouterCompatible(t *testing.T) {
	route, err := netting.ScopeRouter([]string{"node-a", "node-b"})
	must(t, err)
	for scope, want := range map[string]string{"wrld_own_0": "node-a", "wrld_ds_0": "node-b", "wrld_ds_2": "node-a"} {
		if got := route(scope); got != want {
			t.Errorf("route(%s) = %s, want %s (economy-lab's scopeRouter)", scope, got, want)
		}
	}
	for _, bad := range [][]string{nil, {}, {"a", "a"}} {
		if _, err := netting.ScopeRouter(bad); netting.Code(err) != "CONFIG.INVALID" {
			t.Errorf("ScopeRouter(%q): %v, want CONFIG.INVALID", bad, err)
		}
	}
}

func TestScopeRouterStability(t *testing.T) {
	all := []string{"econ-1", "econ-2", "econ-3", "econ-4"}
	full, err := netting.ScopeRouter(all)
	must(t, err)
	shuffled, err := netting.ScopeRouter([]string{"econ-3", "econ-1", "econ-4", "econ-2"})
	must(t, err)
	without, err := netting.ScopeRouter([]string{"econ-1", "econ-2", "econ-4"})
	must(t, err)
	counts := map[string]int{}
	for i := range 2000 {
		scope := fmt.Sprintf("scope-%d", i)
		owner := full(scope)
		counts[owner]++
		if shuffled(scope) != owner {
			t.Fatalf("order of the node list changed the owner of %s", scope)
		}
		if owner != "econ-3" && without(scope) != owner {
			t.Fatalf("removing econ-3 moved %s from %s to %s", scope, owner, without(scope))
		}
		if owner == "econ-3" && without(scope) == "econ-3" {
			t.Fatalf("removed node still owns %s", scope)
		}
	}
	for _, n := range all {
		if counts[n] < 350 {
			t.Errorf("%s owns %d of 2000 scopes: placement badly skewed %v", n, counts[n], counts)
		}
	}
}

// Ours #5. The original measured orphan ages with the sweeping node's own
// clock against rows stamped by the recording node's clock; a node whose
// clock runs ahead settled live epochs. Here the rows and the ages both
// come from the store's clock.
func TestOursOneClock(t *testing.T) {
	// The store's clock is decades behind every node's wall clock: a sweep
	// that measured ages on its own clock (the original) would find the
	// live epoch decades old and settle it at once.
	storeClock := clock.NewFake(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	s := netting.NewMemStoreWithClock(storeClock)
	cfg := func(id string) netting.ClusterConfig {
		return netting.ClusterConfig{NodeID: id, Nodes: nodes3, EpochMaxAge: time.Minute,
			Sweep: &netting.SweepConfig{SettleOlderThan: 2 * time.Minute}}
	}
	live, err := netting.OpenClusterNode(s, cfg("econ-1"))
	must(t, err)
	// The sweeping node's own clock is not consulted (Clock nil).
	sweeper, err := netting.OpenClusterNode(s, cfg("econ-2"))
	must(t, err)
	fund(t, s, "alice", 100)
	scope := scopeOwnedBy(t, live, 0)
	if _, err := live.Record(ctxT(t), scope, netting.Movement{Key: "k", Legs: buy("alice", "bob", 5)}); err != nil {
		t.Fatal(err)
	}
	storeClock.Advance(90 * time.Second)
	sum, err := sweeper.SweepOrphans(ctxT(t), netting.SweepOptions{})
	must(t, err)
	if len(sum.Orphans) != 1 || sum.Orphans[0].Age != 90*time.Second || len(sum.Settled) != 0 {
		t.Fatalf("sweep 90s after the last row: %+v", sum)
	}
	storeClock.Advance(31 * time.Second)
	sum, err = sweeper.SweepOrphans(ctxT(t), netting.SweepOptions{})
	must(t, err)
	if len(sum.Settled) != 1 || sum.Orphans[0].Age != 121*time.Second {
		t.Fatalf("sweep 121s after the last row: %+v", sum)
	}
}

// An explicit ClusterConfig.Clock (here the store's own fake clock, as the
// field's doc requires) drives epoch rotation by age.
func TestExplicitClockIsUsedForAges(t *testing.T) {
	fake := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := netting.NewMemStoreWithClock(fake)
	n, err := netting.OpenClusterNode(s, netting.ClusterConfig{NodeID: "econ-1", Nodes: nodes3, Clock: fake, EpochMaxAge: time.Minute})
	must(t, err)
	fund(t, s, "alice", 100)
	scope := scopeOwnedBy(t, n, 0)
	out, err := n.Record(ctxT(t), scope, netting.Movement{Key: "a", Legs: buy("alice", "bob", 1)})
	must(t, err)
	first := out.Seq
	fake.Advance(59 * time.Second)
	out, err = n.Record(ctxT(t), scope, netting.Movement{Key: "b", Legs: buy("alice", "bob", 1)})
	must(t, err)
	if out.Seq != first+1 {
		t.Errorf("rotated before EpochMaxAge: seq %d", out.Seq)
	}
	fake.Advance(time.Second)
	out, err = n.Record(ctxT(t), scope, netting.Movement{Key: "c", Legs: buy("alice", "bob", 1)})
	must(t, err)
	if out.Seq != 0 {
		t.Errorf("no rotation at EpochMaxAge: seq %d, want 0 in a fresh epoch", out.Seq)
	}
	u, err := s.ListUnsettled(ctxT(t), 0)
	must(t, err)
	if len(u) != 1 {
		t.Errorf("the rotated epoch was not settled: %d unsettled", len(u))
	}
	// An idle epoch rotates through RotateDue.
	fake.Advance(time.Minute)
	reps, err := n.RotateDue(ctxT(t))
	must(t, err)
	if len(reps) != 1 || reps[0].Netted != 1 {
		t.Errorf("RotateDue = %+v", reps)
	}
	if bal, _ := s.Balance(ctxT(t), ledger.Earned("bob")); bal != 3 {
		t.Errorf("bob = %d, want 3", bal)
	}
}

func TestSessionIDs(t *testing.T) {
	s := netting.NewMemStore()
	a, err := netting.OpenClusterNode(s, netting.ClusterConfig{NodeID: "econ-1", Nodes: nodes3})
	must(t, err)
	restarted, err := netting.OpenClusterNode(s, netting.ClusterConfig{NodeID: "econ-1", Nodes: nodes3})
	must(t, err)
	scope := scopeOwnedBy(t, a, 0)
	prefix := "sess:" + scope + ":"
	seen := map[string]bool{}
	for _, n := range []*netting.ClusterNode{a, a, restarted} {
		sess, err := n.OpenSession(ctxT(t), scope)
		must(t, err)
		if !strings.HasPrefix(sess.ID(), prefix) || !strings.Contains(sess.ID()[len(prefix):], "-") {
			t.Errorf("id %s is not sess:<scope>:<nonce>-<n>", sess.ID())
		}
		if seen[sess.ID()] {
			t.Errorf("session id %s repeats across epochs or restarts", sess.ID())
		}
		seen[sess.ID()] = true
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	s := netting.NewMemStore()
	n, err := netting.OpenClusterNode(s, netting.ClusterConfig{NodeID: "econ-1", Nodes: nodes3})
	must(t, err)
	must(t, n.Close())
	must(t, n.Close())
	if _, err := n.OpenSession(ctxT(t), scopeOwnedBy(t, n, 0)); !errors.Is(err, netting.ErrClosed) {
		t.Errorf("OpenSession after Close: %v", err)
	}
}

func scopeOwnedBy(t *testing.T, n *netting.ClusterNode, i int) string {
	t.Helper()
	for k := 0; k < 10000; k++ {
		s := fmt.Sprintf("wrld_%d", k)
		if n.Owns(s) {
			if i == 0 {
				return s
			}
			i--
		}
	}
	t.Fatal("no owned scope")
	return ""
}

func fund(t *testing.T, s netting.Store, user string, amount int64) {
	t.Helper()
	must(t, s.Post(ctxT(t), ledger.Posting{ID: "fund-" + user + fmt.Sprint(amount), Legs: []ledger.Leg{
		ledger.Credit(ledger.Spendable(user), amount), ledger.Debit(ledger.Revenue, amount)}}))
}

func buy(buyer, seller string, amount int64) []ledger.Leg {
	return []ledger.Leg{ledger.Debit(ledger.Spendable(buyer), amount), ledger.Credit(ledger.Earned(seller), amount)}
}
