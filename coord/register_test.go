package coord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
)

func TestRegisterConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   RegisterConfig
		field string
	}{
		{"no role", RegisterConfig{}, "RegisterConfig.Role"},
		{"ttl under a second", RegisterConfig{Role: "zone", TTL: 500 * time.Millisecond}, "RegisterConfig.TTL"},
		{"ttl not whole seconds", RegisterConfig{Role: "zone", TTL: 1500 * time.Millisecond}, "RegisterConfig.TTL"},
		{"name with space", RegisterConfig{Role: "zone", Name: "zone a"}, "RegisterConfig.Name"},
		{"name in capitals", RegisterConfig{Role: "zone", Name: "Zone-A"}, "RegisterConfig.Name"},
		{"name is dot dot", RegisterConfig{Role: "zone", Name: ".."}, "RegisterConfig.Name"},
		{"name too long for a certificate", RegisterConfig{Role: "zone", Name: strings.Repeat("z", 65)}, "RegisterConfig.Name"},
		{"name not ascii", RegisterConfig{Role: "zone", Name: "zoné"}, "RegisterConfig.Name"},
		{"ok", RegisterConfig{Role: "zone", Name: "zone-a"}, ""},
		{"ok defaults", RegisterConfig{Role: "econ"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, errcode.ErrConfigInvalid) {
				t.Fatalf("Validate() = %v, want a config error", err)
			}
			ce := asType[*errcode.ConfigError](t, err)
			if ce.Field != tc.field {
				t.Fatalf("field %q, want %q", ce.Field, tc.field)
			}
			if tc.field == "RegisterConfig.Name" && ce.Value != tc.cfg.Name {
				t.Fatalf("value %#v, want the name %q as given", ce.Value, tc.cfg.Name)
			}
		})
	}
}

func TestRegisterPublishesMemberRecord(t *testing.T) {
	onEachEtcd(t, func(t *testing.T, eps []string) {
		ctx := testCtx(t)
		c := connect(t, eps, nil)
		a := register(t, c, RegisterConfig{Name: "zone-a", Role: "zone", Addrs: map[string]string{"link": "10.0.0.1:7100"}, Meta: map[string]string{"build": "x"}})
		b := register(t, c, RegisterConfig{Role: "econ"})

		if a.ID() != 0 || b.ID() != 1 {
			t.Fatalf("ids %d, %d; want the lowest free ids 0, 1", a.ID(), b.ID())
		}
		if b.Member().Name != "node-1" {
			t.Fatalf("default name %q, want node-1", b.Member().Name)
		}
		if a.Incarnation() >= b.Incarnation() {
			t.Fatalf("incarnations %d, %d: a later claim must have a larger one", a.Incarnation(), b.Incarnation())
		}
		ms, err := c.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 2 {
			t.Fatalf("Members() = %+v, want 2", ms)
		}
		got := ms[0]
		if got.ID != 0 || got.Name != "zone-a" || got.Role != "zone" || got.Addrs["link"] != "10.0.0.1:7100" ||
			got.Meta["build"] != "x" || got.Lease != a.LeaseID() || got.Incarnation != a.Incarnation() {
			t.Fatalf("member 0 = %+v", got)
		}
		if ms[1].Role != "econ" || ms[1].Name != "node-1" {
			t.Fatalf("member 1 = %+v", ms[1])
		}

		if err := a.Update(ctx, map[string]string{"link": "10.0.0.2:7100"}, nil); err != nil {
			t.Fatal(err)
		}
		ms, err = c.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ms[0].Addrs["link"] != "10.0.0.2:7100" || ms[0].Meta != nil || ms[0].Incarnation != a.Incarnation() {
			t.Fatalf("after Update, member 0 = %+v", ms[0])
		}
	})
}

func TestRegisterNameIsExclusive(t *testing.T) {
	onEachEtcd(t, func(t *testing.T, eps []string) {
		ctx := testCtx(t)
		c := connect(t, eps, nil)
		a := register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})

		_, err := c.Register(ctx, RegisterConfig{Name: "zone-a", Role: "zone"})
		wantCode(t, err, CodeNameTaken)
		if nt := asType[*NameTakenError](t, err); nt.Name != "zone-a" || nt.HeldBy != a.ID().String() {
			t.Fatalf("NameTakenError = %+v", nt)
		}
		// The failed attempt must not leak an id: its lease is revoked.
		ms, err := c.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 {
			t.Fatalf("after a refused registration, members = %+v, want only zone-a", ms)
		}

		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		b := register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})
		if b.ID() != a.ID() {
			t.Fatalf("re-registered zone-a got id %d, want the freed %d", b.ID(), a.ID())
		}
	})
}

// Many nodes booting at once: every claimer wins a distinct id, and when
// the ids run out the next one gets a clear, coded error. Ids 16–255 are
// held by a placeholder lease written straight into etcd (registering 240
// real nodes first would only make the test slow under -race); 17 real
// registrations then race for the last 16 (all of them for id 0 first).
// Their TTL is long so that a loaded machine slowing the claims down cannot
// turn the test into a lease-expiry test.
func TestConcurrentClaimsNeverClash(t *testing.T) {
	onEachEtcd(t, func(t *testing.T, eps []string) {
		ctx := testCtx(t)
		clients := make([]*Client, 4)
		for i := range clients {
			clients[i] = connect(t, eps, nil)
		}
		const free = 16
		holder, err := clients[0].cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = clients[0].cli.Revoke(context.Background(), holder.ID) })
		// In batches below etcd's 128 operations per transaction.
		var puts []clientv3.Op
		for id := free; id < NodeIDCount; id++ {
			val, err := encodeMember(Member{ID: NodeID(id), Name: fmt.Sprintf("held-%d", id), Role: "zone", Lease: int64(holder.ID)})
			if err != nil {
				t.Fatal(err)
			}
			puts = append(puts, clientv3.OpPut(clients[0].memberKey(NodeID(id)), string(val), clientv3.WithLease(holder.ID)))
		}
		for batch := range slices.Chunk(puts, 100) {
			if _, err := clients[0].cli.Txn(ctx).Then(batch...).Commit(); err != nil {
				t.Fatal(err)
			}
		}

		var (
			mu        sync.Mutex
			regs      []*Registration
			exhausted []error
			other     []error
			wg        sync.WaitGroup
		)
		for i := range free + 1 {
			wg.Go(func() {
				r, err := clients[i%len(clients)].Register(ctx, RegisterConfig{Role: "zone", Name: fmt.Sprintf("z%d", i), TTL: 60 * time.Second})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					regs = append(regs, r)
				case errors.Is(err, ErrNodeIDsExhausted):
					exhausted = append(exhausted, err)
				default:
					other = append(other, err)
				}
			})
		}
		wg.Wait()
		t.Cleanup(func() {
			for _, r := range regs {
				_ = r.Close()
			}
		})
		if len(other) > 0 {
			t.Fatalf("%d registrations failed unexpectedly, first: %v", len(other), other[0])
		}
		if len(regs) != free || len(exhausted) != 1 {
			t.Fatalf("%d registered and %d refused, want %d and 1", len(regs), len(exhausted), free)
		}
		seen := make(map[NodeID]bool)
		for _, r := range regs {
			if seen[r.ID()] {
				t.Fatalf("node id %d handed out twice", r.ID())
			}
			if r.ID() >= free {
				t.Fatalf("node id %d was already held", r.ID())
			}
			seen[r.ID()] = true
		}
		err = exhausted[0]
		wantCode(t, err, CodeNodeIDsExhausted)
		if ex := asType[*NodeIDsExhaustedError](t, err); ex.Taken != NodeIDCount || ex.Role != "zone" {
			t.Fatalf("NodeIDsExhaustedError = %+v", ex)
		}
		ms, err := clients[0].Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != NodeIDCount {
			t.Fatalf("%d members listed, want %d", len(ms), NodeIDCount)
		}

		// Freeing one id makes exactly that id available.
		freed := regs[free/2]
		if err := freed.Close(); err != nil {
			t.Fatal(err)
		}
		late := register(t, clients[2], RegisterConfig{Role: "econ", Name: "late"})
		if late.ID() != freed.ID() {
			t.Fatalf("late node got id %d, want the freed %d", late.ID(), freed.ID())
		}
	})
}

func TestCloseEndsRegistrationAndFreesClaims(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, sharedEtcd.Endpoints(), nil)
	r := register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})
	if r.Err() != nil || isClosed(r.Lost()) || r.Context().Err() != nil {
		t.Fatalf("fresh registration already ended: %v", r.Err())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if !isClosed(r.Lost()) {
		t.Fatal("Lost not closed after Close")
	}
	wantCode(t, r.Err(), CodeMemberClosed)
	if !errors.Is(context.Cause(r.Context()), ErrMemberClosed) {
		t.Fatalf("context cause %v, want ErrMemberClosed", context.Cause(r.Context()))
	}
	// Revoked, not left to expire: the claims are gone at once.
	ms, err := c.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 0 {
		t.Fatalf("members after Close = %+v", ms)
	}
	err = r.Update(ctx, nil, nil)
	wantCode(t, err, CodeMemberClosed)
}

// An operator (or etcd) revoking the lease tells the node at its next
// renewal, a third of the TTL later at most.
func TestRevokedLeaseTellsNode(t *testing.T) {
	onEachEtcd(t, func(t *testing.T, eps []string) {
		ctx := testCtx(t)
		c := connect(t, eps, nil)
		other := connect(t, eps, nil)
		r := register(t, c, RegisterConfig{Name: "zone-a", Role: "zone", TTL: 3 * time.Second})

		if _, err := other.cli.Revoke(ctx, clientv3.LeaseID(r.LeaseID())); err != nil {
			t.Fatal(err)
		}
		select {
		case <-r.Lost():
		case <-ctx.Done():
			t.Fatal("registration not told that its lease was revoked")
		}
		wantCode(t, r.Err(), CodeLeaseLost)
		if !errors.Is(context.Cause(r.Context()), ErrLeaseLost) {
			t.Fatalf("context cause %v, want ErrLeaseLost", context.Cause(r.Context()))
		}
		// A write as the lost member is refused by the fence.
		wantCode(t, r.Update(ctx, nil, nil), CodeLeaseLost)
	})
}

// A revoke is noticed through the watch on the member key, not only at the
// next renewal: on a fake clock that never moves no renewal is ever sent,
// and the node is still told.
func TestRevokeToldWithoutRenewal(t *testing.T) {
	ctx := testCtx(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	c := connect(t, sharedEtcd.Endpoints(), fake)
	r := register(t, c, RegisterConfig{Name: "zone-a", Role: "zone", TTL: 30 * time.Second})
	// An update under our own lease is not a loss.
	if err := r.Update(ctx, map[string]string{"link": "a:1"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cli.Revoke(ctx, clientv3.LeaseID(r.LeaseID())); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Lost():
	case <-ctx.Done():
		t.Fatal("revoke not noticed without a renewal")
	}
	wantCode(t, r.Err(), CodeLeaseLost)
	if !fake.Now().Equal(start) {
		t.Fatal("the fake clock moved: the test would not show the watch")
	}
}

// Update is fenced in etcd, not only by the local flag: a write made after
// another node took over the id is refused.
func TestUpdateIsFencedByLease(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, sharedEtcd.Endpoints(), nil)
	r := register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})
	// Replace the holder behind the registration's back, as if its lease
	// expired and another node claimed the id before it noticed.
	if _, err := c.cli.Revoke(ctx, clientv3.LeaseID(r.LeaseID())); err != nil {
		t.Fatal(err)
	}
	thief := register(t, c, RegisterConfig{Name: "zone-b", Role: "zone"})
	if thief.ID() != r.ID() {
		t.Fatalf("thief got id %d, want %d", thief.ID(), r.ID())
	}
	// The member-key watch may already have told r (then Update refuses
	// locally); the write itself must be refused by etcd regardless, so
	// go past the local flag to the fenced write.
	m := r.Member()
	m.Addrs = map[string]string{"link": "evil"}
	wantCode(t, r.putFenced(ctx, m), CodeLeaseLost)
	wantCode(t, r.Update(ctx, map[string]string{"link": "evil"}, nil), CodeLeaseLost)
	ms, err := c.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Name != "zone-b" || ms[0].Addrs != nil {
		t.Fatalf("members = %+v, want zone-b untouched", ms)
	}
}

// The central fence: a node cut off from etcd is told within its TTL, before
// etcd frees its id and name, and then another node can take them.
func TestPartitionedNodeFencesBeforeClaimsExpire(t *testing.T) {
	onEachEtcd(t, func(t *testing.T, eps []string) {
		ctx := testCtx(t)
		proxy := testenv.StartTCPProxy(t, eps[0])
		cut := connect(t, []string{proxy.Endpoint()}, nil)
		observer := connect(t, eps, nil)

		// 2s, not etcd's 1s minimum: on a loaded machine a 1s lease can
		// starve before the cut, and the test would prove nothing.
		a := register(t, cut, RegisterConfig{Name: "zone-a", Role: "zone", TTL: 2 * time.Second})
		ttl := a.TTL()
		events, err := observer.WatchMembers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev := <-events; ev.Kind != MemberJoined || ev.Member.Name != "zone-a" {
			t.Fatalf("first event %+v, want zone-a joined", ev)
		}
		// Let at least one renewal succeed, so the test covers a deadline moved
		// by renewals and not only the grant's.
		granted := a.Deadline()
		eventually(t, 30*time.Second, "a lease renewal", func() bool { return a.Deadline().After(granted) })

		cutAt := time.Now()
		proxy.Cut()

		var (
			leftAt time.Time
			left   *MembershipEvent
		)
		select {
		case ev := <-events:
			// Both may be ready when this goroutine was descheduled past
			// both moments (a loaded machine); only a record freed while
			// the node has not been told is the bug.
			if !isClosed(a.Lost()) {
				t.Fatalf("etcd freed the id (%+v) before the node was told", ev)
			}
			leftAt, left = time.Now(), &ev
		case <-a.Lost():
		case <-ctx.Done():
			t.Fatal("partitioned node never told")
		}
		lostAt := time.Now()
		t.Logf("ttl %v: told %v after the cut", ttl, lostAt.Sub(cutAt))

		// Told within the TTL: the fence deadline was set by a renewal sent
		// before the cut, so it is at most one TTL after it.
		if d := a.Deadline(); d.After(cutAt.Add(ttl)) {
			t.Fatalf("fence deadline %v after cut+TTL %v", d, cutAt.Add(ttl))
		}
		wantCode(t, a.Err(), CodeLeaseLost)
		if !errors.Is(context.Cause(a.Context()), ErrLeaseLost) {
			t.Fatalf("context cause %v", context.Cause(a.Context()))
		}

		// etcd expires the lease: the member record and the name go.
		if left == nil {
			select {
			case ev := <-events:
				leftAt, left = time.Now(), &ev
			case <-ctx.Done():
				t.Fatal("lease of the partitioned node never expired")
			}
		}
		if left.Kind != MemberLeft || left.Member.ID != a.ID() {
			t.Fatalf("event %+v, want zone-a left", *left)
		}
		if leftAt.Before(a.Deadline()) {
			t.Fatalf("etcd freed the claims at %v, before the node's fence deadline %v", leftAt, a.Deadline())
		}

		// A second node now claims the same id and name.
		b := register(t, observer, RegisterConfig{Name: "zone-a", Role: "zone"})
		if b.ID() != a.ID() {
			t.Fatalf("second node got id %d, want the expired %d", b.ID(), a.ID())
		}
		if b.Incarnation() <= a.Incarnation() {
			t.Fatalf("incarnation %d not above the old holder's %d", b.Incarnation(), a.Incarnation())
		}
	})
}

// The fence deadline is measured on the injected clock: with etcd out of
// reach the node gives up exactly at the send time of its grant plus the TTL
// less the guard (a tenth), and not a moment before.
func TestFenceDeadlineOnInjectedClock(t *testing.T) {
	ctx := testCtx(t)
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	proxy := testenv.StartTCPProxy(t, sharedEtcd.Endpoints()[0])
	c := connect(t, []string{proxy.Endpoint()}, fake)
	r := register(t, c, RegisterConfig{Name: "zone-a", Role: "zone", TTL: 2 * time.Second})
	ttl := r.TTL()
	start := fake.Now()
	giveUp := start.Add(ttl - ttl/10)
	if !r.Deadline().Equal(giveUp) {
		t.Fatalf("deadline %v, want grant time + 9/10 TTL %v", r.Deadline(), giveUp)
	}
	// The renew timer and the fence timer.
	if err := fake.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	proxy.Cut()

	fake.Advance(giveUp.Sub(start) - time.Millisecond)
	// Renewals fail (etcd is out of reach); the deadline does not move.
	if isClosed(r.Lost()) {
		t.Fatalf("gave up before the deadline: %v", r.Err())
	}
	if !r.Deadline().Equal(giveUp) {
		t.Fatalf("deadline moved to %v without a successful renewal", r.Deadline())
	}
	fake.Advance(time.Millisecond)
	select {
	case <-r.Lost():
	case <-ctx.Done():
		t.Fatal("not told at the fence deadline")
	}
	wantCode(t, r.Err(), CodeLeaseLost)
}

// Closing the client (the node's only path to etcd) ends its registrations
// first: the node is told, and its claims are freed at once.
func TestClientCloseEndsRegistrations(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, sharedEtcd.Endpoints(), nil)
	observer := connect(t, sharedEtcd.Endpoints(), nil)
	r := register(t, c, RegisterConfig{Name: "zone-a", Role: "zone", TTL: 10 * time.Second})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !isClosed(r.Lost()) {
		t.Fatal("registration not told when its client closed")
	}
	wantCode(t, r.Err(), CodeMemberClosed)
	ms, err := observer.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 0 {
		t.Fatalf("members after the client closed = %+v, want none (lease revoked, not left to expire)", ms)
	}
	_, err = c.Register(ctx, RegisterConfig{Role: "zone"})
	wantCode(t, err, CodeUnavailable)
	b := register(t, observer, RegisterConfig{Name: "zone-a", Role: "zone"})
	if b.ID() != r.ID() {
		t.Fatalf("second node got id %d, want %d", b.ID(), r.ID())
	}
}

// A restarting node waits for its old incarnation's name to be freed.
func TestWaitNameFree(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, sharedEtcd.Endpoints(), nil)
	if err := c.WaitNameFree(ctx, "zone-a"); err != nil {
		t.Fatalf("free name: %v", err)
	}
	// A name no node can register with is refused, not waited for.
	if ce := asType[*errcode.ConfigError](t, c.WaitNameFree(ctx, "Zone-A")); ce.Field != "name" || ce.Value != "Zone-A" {
		t.Fatalf("WaitNameFree(Zone-A) = %v, want a config error naming name", ce)
	}
	old := register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})

	short, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.WaitNameFree(short, "zone-a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitNameFree with a cancelled context = %v", err)
	}

	done := make(chan error, 1)
	go func() { done <- c.WaitNameFree(ctx, "zone-a") }()
	select {
	case err := <-done:
		t.Fatalf("returned while the name is held: %v", err)
	default:
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})
}

// Nodes that boot together without a name all get an id. Their names are
// derived from the id they lease ("node-<id>"), so the losers of a race for
// an id also find "their" name taken: that must send them to another id,
// not fail them with *NameTakenError.
func TestConcurrentUnnamedRegistrationsAllGetAnID(t *testing.T) {
	onEachEtcd(t, func(t *testing.T, eps []string) {
		ctx := testCtx(t)
		clients := make([]*Client, 4)
		for i := range clients {
			clients[i] = connect(t, eps, nil)
		}
		const n = 8
		var (
			mu   sync.Mutex
			regs []*Registration
			errs []error
			wg   sync.WaitGroup
		)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start // all at once, as nodes booting together do
				r, err := clients[i%len(clients)].Register(ctx, RegisterConfig{Role: "zone", TTL: 60 * time.Second})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				regs = append(regs, r)
			})
		}
		close(start)
		wg.Wait()
		t.Cleanup(func() {
			for _, r := range regs {
				_ = r.Close()
			}
		})
		if len(errs) > 0 {
			t.Fatalf("%d of %d unnamed registrations failed, first: %v", len(errs), n, errs[0])
		}
		seen := make(map[NodeID]bool)
		for _, r := range regs {
			if seen[r.ID()] {
				t.Fatalf("node id %d handed out twice", r.ID())
			}
			seen[r.ID()] = true
			if want := "node-" + r.ID().String(); r.Member().Name != want {
				t.Fatalf("node %d is named %q, want %q", r.ID(), r.Member().Name, want)
			}
		}
		ms, err := clients[0].Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != n {
			t.Fatalf("%d members listed, want %d", len(ms), n)
		}
	})
}

// The retries of an unnamed registration are bounded, and the error says
// why it got no id. A member that chose the name "node-<k>" while id k is
// free makes id k unusable for unnamed nodes: they skip it rather than
// fail with *NameTakenError, and when nothing else is left they get
// *NodeIDsExhaustedError saying so. With every derived name held, an
// unnamed registration gives up after maxClaimAttempts lost claims.
func TestUnnamedRegistrationRetriesAreBounded(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, sharedEtcd.Endpoints(), nil)
	holder, err := c.cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.cli.Revoke(context.Background(), holder.ID) })
	put := func(ops []clientv3.Op) {
		t.Helper()
		for batch := range slices.Chunk(ops, 100) { // below etcd's 128 operations per transaction
			if _, err := c.cli.Txn(ctx).Then(batch...).Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Every derived name is held (by named members whose ids are elsewhere
	// or gone): each claim an unnamed node makes loses.
	var names []clientv3.Op
	for id := range NodeIDCount {
		names = append(names, clientv3.OpPut(c.nameKey(defaultName(NodeID(id))), "300", clientv3.WithLease(holder.ID)))
	}
	put(names)
	_, err = c.Register(ctx, RegisterConfig{Role: "zone"})
	wantCode(t, err, CodeNodeIDsExhausted)
	if ex := asType[*NodeIDsExhaustedError](t, err); ex.Attempts != maxClaimAttempts || ex.Free != NodeIDCount || ex.Taken != 0 {
		t.Fatalf("NodeIDsExhaustedError = %+v, want %d lost claims with every id free", ex, maxClaimAttempts)
	}
	if !strings.Contains(err.Error(), "gave up after losing 32 claims") {
		t.Fatalf("error %q does not say it gave up after its retries", err)
	}

	// Now ids 1–255 are held too: the one free id's derived name is
	// held, so an unnamed node is told no id is left for it, after one
	// lost claim; a named node still gets id 0.
	var members []clientv3.Op
	for id := 1; id < NodeIDCount; id++ {
		val, err := encodeMember(Member{ID: NodeID(id), Name: fmt.Sprintf("held-%d", id), Role: "zone", Lease: int64(holder.ID)})
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, clientv3.OpPut(c.memberKey(NodeID(id)), string(val), clientv3.WithLease(holder.ID)))
	}
	put(members)
	_, err = c.Register(ctx, RegisterConfig{Role: "zone"})
	wantCode(t, err, CodeNodeIDsExhausted)
	if ex := asType[*NodeIDsExhaustedError](t, err); ex.Attempts != 1 || ex.Free != 1 || ex.Taken != NodeIDCount-1 {
		t.Fatalf("NodeIDsExhaustedError = %+v, want 1 lost claim and 1 free id", ex)
	}
	if !strings.Contains(err.Error(), "derived name") {
		t.Fatalf("error %q does not say the free id's derived name is held", err)
	}
	if r := register(t, c, RegisterConfig{Role: "zone", Name: "zone-a"}); r.ID() != 0 {
		t.Fatalf("named node got id %d, want the free 0", r.ID())
	}
}
