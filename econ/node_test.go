package econ

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// grant is a movement from the platform to a user's wallet: it can never be
// refused for funds, so every accepted key must land exactly once.
func grant(key, user string, amount int64) netting.Movement {
	return netting.Movement{Key: key, Legs: []ledger.Leg{
		ledger.Debit(ledger.Revenue, amount),
		ledger.Credit(ledger.Spendable(user), amount),
	}}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	c := newCoord(t, testPrefix(t))
	store, _ := newSQLite(t)
	base := Config{Name: "econ-a", Coord: c, Store: store}
	for _, tc := range []struct {
		mod   func(*Config)
		field string
	}{
		{func(c *Config) { c.Name = "" }, "Name"},
		{func(c *Config) { c.Coord = nil }, "Coord"},
		{func(c *Config) { c.Store = nil }, "Store"},
		{func(c *Config) { c.TTL = -time.Second }, "TTL"},
		{func(c *Config) { c.MaxMovements = -1 }, "MaxMovements"},
		{func(c *Config) { c.EpochMaxAge = time.Second; c.SweepBound = time.Second }, "SweepBound"},
		{func(c *Config) { c.EpochMaxAge = time.Second; c.RotateEvery = 2 * time.Second }, "RotateEvery"},
		{func(c *Config) { c.EscrowBound = time.Millisecond }, "EscrowBound"},
		{func(c *Config) { c.EscrowBound = -time.Second }, "EscrowBound"},
		{func(c *Config) { c.EscrowBound = 5 * time.Second; c.EscrowEvery = 6 * time.Second }, "EscrowEvery"},
	} {
		cfg := base
		tc.mod(&cfg)
		err := cfg.Validate()
		wantCode(t, err, "CONFIG.INVALID")
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("error %q does not name %s", err, tc.field)
		}
		if _, err := Start(testCtx(t), cfg); err == nil {
			t.Errorf("Start accepted a config with a bad %s", tc.field)
		}
	}
	if err := base.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
}

func TestNodesFormOneViewAndRouteByScope(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	names := []string{"econ-a", "econ-b", "econ-c"}
	var nodes []*Node
	for _, name := range names {
		nodes = append(nodes, startNode(t, prefix, name, store, Config{}))
	}
	waitView(t, names, nodes...)
	owner, err := netting.ScopeRouter(names)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	owned := map[string]int{}
	for i := range 30 {
		scope := fmt.Sprintf("market-%02d", i)
		for _, n := range nodes {
			out, err := n.Record(ctx, scope, grant(fmt.Sprintf("k-%s-%s", scope, n.Name()), "u1", 1))
			var mis *netting.MisroutedError
			switch {
			case n.Name() == owner(scope):
				if err != nil || out.Status != netting.Accepted {
					t.Fatalf("%s owns %s but answered %+v, %v", n.Name(), scope, out, err)
				}
				owned[n.Name()]++
			case !errors.As(err, &mis) || mis.Owner != owner(scope) || mis.NodeID != n.Name():
				t.Fatalf("%s for %s (owner %s): %+v, %v; want a misroute naming the owner", n.Name(), scope, owner(scope), out, err)
			}
		}
	}
	if len(owned) != len(names) {
		t.Fatalf("30 scopes landed on %v only", owned)
	}
	for _, n := range nodes {
		if err := n.Close(); err != nil {
			t.Fatalf("Close(%s): %v", n.Name(), err)
		}
		if err := n.Close(); err != nil {
			t.Fatalf("second Close(%s): %v", n.Name(), err)
		}
		if _, err := n.Record(ctx, "market-00", grant("late", "u1", 1)); !errors.Is(err, ErrClosed) {
			t.Fatalf("Record after Close: %v, want ECON.CLOSED", err)
		}
	}
	rep := auditSettled(t, store, "audit after a graceful close")
	if got := rep.Wallets; got != 30 {
		t.Fatalf("wallets hold %d, want the 30 grants", got)
	}
}

// TestBarrierHoldsUntilEveryMemberAdopts: a member that joins but never
// adopts the new view (here a bare registration, as a node stuck before
// publishing would be) keeps every other node from recording under it;
// scopes it owns are redirected to it at once.
func TestBarrierHoldsUntilEveryMemberAdopts(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	a := startNode(t, prefix, "econ-a", store, Config{ReadyWait: 200 * time.Millisecond})
	b := startNode(t, prefix, "econ-b", store, Config{ReadyWait: 200 * time.Millisecond})
	waitView(t, []string{"econ-a", "econ-b"}, a, b)
	ctx := testCtx(t)

	stuck, err := newCoord(t, prefix).Register(ctx, coord.RegisterConfig{Name: "econ-stuck", Role: Role, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	three := []string{"econ-a", "econ-b", "econ-stuck"}
	testenv.PollUntil(t, 20*time.Second, "a and b re-formed for three members, not ready", func() bool {
		for _, n := range []*Node{a, b} {
			st := n.Status()
			if st.Ready || strings.Join(st.View, ",") != strings.Join(three, ",") {
				return false
			}
		}
		return true
	})
	owner, _ := netting.ScopeRouter(three)
	var ownA, ownStuck string
	for i := 0; ownA == "" || ownStuck == ""; i++ {
		s := fmt.Sprintf("scope-%d", i)
		switch owner(s) {
		case "econ-a":
			ownA = s
		case "econ-stuck":
			ownStuck = s
		}
	}
	_, err = a.Record(ctx, ownA, grant("barrier-1", "u1", 1))
	wantCode(t, err, CodeNotReady)
	var mis *netting.MisroutedError
	if _, err := a.Record(ctx, ownStuck, grant("barrier-2", "u1", 1)); !errors.As(err, &mis) || mis.Owner != "econ-stuck" {
		t.Fatalf("scope of the stuck member: %v, want a misroute to it", err)
	}

	// The stuck member leaves: a and b re-form without it and record.
	if err := stuck.Close(); err != nil {
		t.Fatal(err)
	}
	waitView(t, []string{"econ-a", "econ-b"}, a, b)
	out, err := recordRouted(ctx, pickFrom(a, b), "econ-a", ownA, grant("barrier-1", "u1", 1))
	if err != nil || out.Status != netting.Accepted {
		t.Fatalf("after the stuck member left: %+v, %v", out, err)
	}
	unsettled, err := store.ListUnsettled(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range unsettled {
		if u.Records > 0 && u.Scope != ownA {
			t.Errorf("session %s of %s has %d rows; only %s was recorded", u.ID, u.Scope, u.Records, ownA)
		}
	}
}

// pickFrom returns the node named name among nodes if it is still open,
// else any open one.
func pickFrom(nodes ...*Node) func(string) *Node {
	return func(name string) *Node {
		var any *Node
		for _, n := range nodes {
			if n.Status().Closed {
				continue
			}
			if n.Name() == name {
				return n
			}
			if any == nil {
				any = n
			}
		}
		return any
	}
}

// TestChurnKeepsOneWriterPerScope runs callers against nodes that join and
// leave, and checks what the store holds afterwards: every accepted key
// journaled exactly once, the money sound, and for each scope the journal
// rows of different generations (a node's ClusterNode for one view) never
// interleave in time: one writer at a time.
func TestChurnKeepsOneWriterPerScope(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	prefix := testPrefix(t)
	store, path := newSQLite(t)
	cfg := Config{EpochMaxAge: 500 * time.Millisecond, MaxMovements: 40, SettleLease: time.Second}

	var mu sync.Mutex
	live := []*Node{}
	pick := func(name string) *Node {
		mu.Lock()
		defer mu.Unlock()
		return pickFrom(live...)(name)
	}
	start := func(name string) {
		n := startNode(t, prefix, name, store, cfg)
		mu.Lock()
		live = append(live, n)
		mu.Unlock()
	}
	for _, name := range []string{"econ-a", "econ-b", "econ-c"} {
		start(name)
	}
	waitView(t, []string{"econ-a", "econ-b", "econ-c"}, live...)

	ctx := testCtx(t)
	callCtx, stop := context.WithCancel(ctx)
	var accepted sync.Map
	var wg sync.WaitGroup
	var failures sync.Map
	for w := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w+1)))
			for i := 0; callCtx.Err() == nil; i++ {
				key := fmt.Sprintf("w%d-%d", w, i)
				scope := fmt.Sprintf("market-%d", r.IntN(12))
				names := []string{"econ-a", "econ-b", "econ-c", "econ-d", "econ-e"}
				out, err := recordRouted(ctx, pick, names[r.IntN(len(names))], scope, grant(key, fmt.Sprintf("u%d", r.IntN(50)), 1+r.Int64N(9)))
				switch {
				case err == nil && out.Status == netting.Accepted:
					accepted.Store(key, scope)
				case err != nil:
					failures.Store(key, err)
				}
			}
		})
	}
	// Churn: a node joins, a node leaves, and so on, each step once the
	// cluster has re-formed and taken some movements.
	steps := []func(){
		func() { start("econ-d") },
		func() { closeNode(t, &mu, &live, "econ-b") },
		func() { start("econ-e") },
		func() { closeNode(t, &mu, &live, "econ-a") },
		func() { start("econ-b") },
	}
	for i, step := range steps {
		before := countAccepted(&accepted)
		testenv.PollUntil(t, 20*time.Second, fmt.Sprintf("movements accepted before churn step %d", i), func() bool {
			return countAccepted(&accepted) >= before+30
		})
		step()
		if rng.IntN(2) == 0 {
			mu.Lock()
			nodes := slices.Clone(live)
			mu.Unlock()
			var names []string
			for _, n := range nodes {
				names = append(names, n.Name())
			}
			sort.Strings(names)
			waitView(t, names, nodes...)
		}
	}
	before := countAccepted(&accepted)
	testenv.PollUntil(t, 20*time.Second, "movements accepted after the churn", func() bool { return countAccepted(&accepted) >= before+30 })
	stop()
	wg.Wait()
	failures.Range(func(k, v any) bool {
		t.Errorf("movement %v: %v", k, v)
		return true
	})
	mu.Lock()
	nodes := slices.Clone(live)
	mu.Unlock()
	for _, n := range nodes {
		if err := n.Close(); err != nil {
			t.Errorf("Close(%s): %v", n.Name(), err)
		}
	}

	auditSettled(t, store, "audit after the churn")
	checkJournal(t, path, &accepted)
}

func closeNode(t *testing.T, mu *sync.Mutex, live *[]*Node, name string) {
	t.Helper()
	mu.Lock()
	var n *Node
	for i, m := range *live {
		if m.Name() == name {
			n = m
			*live = slices.Delete(*live, i, i+1)
			break
		}
	}
	mu.Unlock()
	if err := n.Close(); err != nil {
		t.Errorf("Close(%s): %v", name, err)
	}
}

func countAccepted(m *sync.Map) int {
	n := 0
	m.Range(func(any, any) bool { n++; return true })
	return n
}

// checkJournal reads the SQLite file directly: each accepted key is
// journaled once under its scope, and per scope the rows of different
// generations do not interleave in commit time. A generation is one node's
// ClusterNode for one view: the session ids it opens share its nonce
// ("sess:<scope>:<nonce>-<n>"). The database clock has millisecond
// resolution, so rows within one millisecond count as ordered.
func checkJournal(t *testing.T, path string, accepted *sync.Map) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT j.key, s.scope, s.id, j.recorded_at FROM netting_journal j JOIN netting_sessions s ON s.id = j.session_id ORDER BY j.recorded_at`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type span struct{ first, last int64 }
	spans := map[string]map[string]*span{} // scope → generation → span
	seen := map[string]bool{}
	for rows.Next() {
		var key, scope, id string
		var at int64
		if err := rows.Scan(&key, &scope, &id, &at); err != nil {
			t.Fatal(err)
		}
		if seen[key] {
			t.Errorf("key %s journaled twice", key)
		}
		seen[key] = true
		want, ok := accepted.Load(key)
		if !ok {
			// Journaled but not seen accepted: a caller's last attempt
			// failed after an earlier one landed. None fail here.
			t.Errorf("key %s journaled but its caller never saw it accepted", key)
		} else if want != scope {
			t.Errorf("key %s journaled under %s, recorded under %s", key, scope, want)
		}
		gen := strings.TrimPrefix(id, "sess:"+scope+":")
		gen = gen[:strings.LastIndexByte(gen, '-')]
		if spans[scope] == nil {
			spans[scope] = map[string]*span{}
		}
		if s := spans[scope][gen]; s != nil {
			s.last = at
		} else {
			spans[scope][gen] = &span{at, at}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	accepted.Range(func(k, _ any) bool {
		if !seen[k.(string)] {
			t.Errorf("key %s accepted but not in the journal", k)
		}
		return true
	})
	for scope, gens := range spans {
		var list []*span
		for _, s := range gens {
			list = append(list, s)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].first < list[j].first })
		for i := 1; i < len(list); i++ {
			if list[i].first < list[i-1].last {
				t.Errorf("scope %s: two generations wrote at once: rows %d–%d and %d–%d (µs)", scope, list[i-1].first, list[i-1].last, list[i].first, list[i].last)
			}
		}
		if len(gens) < 2 {
			t.Logf("scope %s had one writer only", scope)
		}
	}
}

// TestHaltedNodesOrphansAreSwept: a node that stops without settling leaves
// its open epochs behind; the survivors re-form at once, take its scopes,
// and their sweep settles the orphans once they are older than the bound.
func TestHaltedNodesOrphansAreSwept(t *testing.T) {
	prefix := testPrefix(t)
	store, path := newSQLite(t)
	cfg := Config{EpochMaxAge: 300 * time.Millisecond, SweepEvery: 100 * time.Millisecond, SettleLease: time.Second}
	a := startNode(t, prefix, "econ-a", store, cfg)
	b := startNode(t, prefix, "econ-b", store, cfg)
	c := startNode(t, prefix, "econ-c", store, cfg)
	waitView(t, []string{"econ-a", "econ-b", "econ-c"}, a, b, c)
	ctx := testCtx(t)
	pick := pickFrom(a, b, c)
	var accepted sync.Map
	record := func(i int) {
		key := fmt.Sprintf("k%d", i)
		scope := fmt.Sprintf("market-%d", i%9)
		out, err := recordRouted(ctx, pick, "econ-a", scope, grant(key, "u1", 1))
		if err != nil || out.Status != netting.Accepted {
			t.Fatalf("record %s: %+v, %v", key, out, err)
		}
		accepted.Store(key, scope)
	}
	for i := range 90 {
		record(i)
	}
	open, err := store.ListUnsettled(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	orphans := map[string]bool{}
	for _, u := range open {
		if u.NodeID == "econ-b" && u.Records > 0 {
			orphans[u.ID] = true
		}
	}
	if len(orphans) == 0 {
		t.Fatal("econ-b has no open epoch with rows to leave behind")
	}
	b.Halt()
	b.Halt()
	if err := b.Close(); err != nil {
		t.Fatalf("Close after Halt: %v", err)
	}
	waitView(t, []string{"econ-a", "econ-c"}, a, c)
	for i := 90; i < 180; i++ {
		record(i)
	}
	testenv.PollUntil(t, 20*time.Second, "the survivors' sweep settles econ-b's orphans", func() bool {
		list, err := store.ListUnsettled(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range list {
			if orphans[u.ID] {
				return false
			}
		}
		return true
	})
	for _, n := range []*Node{a, c} {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	rep := auditSettled(t, store, "audit")
	if rep.Wallets != 180 {
		t.Fatalf("wallets hold %d, want 180", rep.Wallets)
	}
	checkJournal(t, path, &accepted)
}

// TestLostLeaseFencesTheNode: a node whose lease is revoked behind its back
// (as etcd does when renewals stop getting through) stops recording at
// once, answers ECON.LEASE_LOST, and the others re-form without it.
func TestLostLeaseFencesTheNode(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	a := startNode(t, prefix, "econ-a", store, Config{})
	b := startNode(t, prefix, "econ-b", store, Config{})
	waitView(t, []string{"econ-a", "econ-b"}, a, b)
	ctx := testCtx(t)
	owner, _ := netting.ScopeRouter([]string{"econ-a", "econ-b"})
	scope := ""
	for i := 0; scope == ""; i++ {
		if s := fmt.Sprintf("scope-%d", i); owner(s) == "econ-b" {
			scope = s
		}
	}
	if out, err := b.Record(ctx, scope, grant("before", "u1", 1)); err != nil || out.Status != netting.Accepted {
		t.Fatalf("before the revoke: %+v, %v", out, err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: sharedEtcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(b.Registration().LeaseID())); err != nil {
		t.Fatal(err)
	}
	testenv.PollUntil(t, 20*time.Second, "econ-b fenced", func() bool { return b.Status().Fenced })
	_, err = b.Record(ctx, scope, grant("after", "u1", 1))
	wantCode(t, err, CodeLeaseLost)
	waitView(t, []string{"econ-a"}, a)
	out, err := a.Record(ctx, scope, grant("after", "u1", 1))
	if err != nil || out.Status != netting.Accepted {
		t.Fatalf("econ-a after econ-b's lease ended: %+v, %v", out, err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close of a fenced node: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	auditSettled(t, store, "audit")
}

// auditSettled reads the money audit of a quiesced store and fails the
// test, saying when, unless it finds nothing wrong.
func auditSettled(t *testing.T, store AuditStore, when string) AuditReport {
	t.Helper()
	rep, err := Audit(testCtx(t), store)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.Problems(true); len(p) > 0 {
		t.Fatalf("%s: %v", when, p)
	}
	return rep
}

// TestNodeJudgesAMovementBeforeRoutingIt: Node.Record refuses a movement
// with no key or unbalanced legs at the node called, owner or not, as the
// service does; a valid one for a scope another node owns is misrouted.
func TestNodeJudgesAMovementBeforeRoutingIt(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	a := startNode(t, prefix, "econ-a", store, Config{})
	b := startNode(t, prefix, "econ-b", store, Config{})
	waitView(t, []string{"econ-a", "econ-b"}, a, b)
	scope := scopeOwnedBy(t, router(t, "econ-a", "econ-b"), "econ-b")
	ctx := testCtx(t)
	good := []ledger.Leg{ledger.Debit("platform:mint", 5), ledger.Credit(ledger.Spendable("u1"), 5)}
	for _, tc := range []struct {
		name string
		m    netting.Movement
		want error
	}{
		{"no key", netting.Movement{Legs: good}, ledger.ErrMalformed},
		{"unbalanced", netting.Movement{Key: "judge-1", Legs: []ledger.Leg{ledger.Debit("platform:mint", 5), ledger.Credit(ledger.Spendable("u1"), 4)}}, ledger.ErrUnbalanced},
		{"valid", netting.Movement{Key: "judge-2", Legs: good}, netting.ErrMisrouted},
	} {
		if _, err := a.Record(ctx, scope, tc.m); !errors.Is(err, tc.want) {
			t.Errorf("%s at the non-owner: %v, want %v", tc.name, err, tc.want)
		}
	}
	checkNothingWritten(t, store, []string{"judge-1", "judge-2"})
}
