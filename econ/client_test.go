package econ

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/proto/econpb"
)

// newEconClient starts a plaintext (loopback) client over members, closed
// at cleanup; mod adjusts the config.
func newEconClient(t testing.TB, members MemberSource, mod func(*ClientConfig)) *Client {
	t.Helper()
	cfg := ClientConfig{Members: members, Insecure: true, Logger: testLogger(t)}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewClient(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// callLog is a client interceptor that records which address each call
// went to.
type callLog struct {
	mu    sync.Mutex
	calls []string // "method@addr"
}

func (l *callLog) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	l.mu.Lock()
	l.calls = append(l.calls, method[strings.LastIndexByte(method, '/')+1:]+"@"+strings.TrimPrefix(cc.Target(), "passthrough:///"))
	l.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (l *callLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.calls
	l.calls = nil
	return out
}

func TestClientConfigValidateNamesTheField(t *testing.T) {
	base := ClientConfig{Members: StaticMembers{}, Insecure: true}
	for _, tc := range []struct {
		mod   func(*ClientConfig)
		field string
	}{
		{func(c *ClientConfig) { c.Members = nil }, "Members"},
		{func(c *ClientConfig) { c.Insecure = false }, "TLS"},
		{func(c *ClientConfig) { c.TLS = &tls.Config{} }, "Insecure"},
		{func(c *ClientConfig) { c.AttemptTimeout = -time.Second }, "AttemptTimeout"},
		{func(c *ClientConfig) { c.MaxAttempts = -1 }, "MaxAttempts"},
		{func(c *ClientConfig) { c.MaxRedirects = -1 }, "MaxRedirects"},
		{func(c *ClientConfig) { c.BackoffMin = time.Second; c.BackoffMax = time.Millisecond }, "BackoffMax"},
	} {
		cfg := base
		tc.mod(&cfg)
		err := cfg.Validate()
		wantCode(t, err, errcode.ConfigInvalid)
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("error %v: want field %s", err, tc.field)
		}
		if _, err := NewClient(testCtx(t), cfg); err == nil {
			t.Errorf("NewClient accepted a bad %s", tc.field)
		}
	}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestClientRoutesByScopeOverLiveMembers: with the live membership, every
// movement goes straight to its owner (the nodes' own placement), with no
// redirect.
func TestClientRoutesByScopeOverLiveMembers(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	nodes := []*served{
		serveNode(t, prefix, "econ-a", store, Config{}, nil),
		serveNode(t, prefix, "econ-b", store, Config{}, nil),
		serveNode(t, prefix, "econ-c", store, Config{}, nil),
	}
	names := []string{"econ-a", "econ-b", "econ-c"}
	waitView(t, names, nodes[0].Node, nodes[1].Node, nodes[2].Node)
	addrOf := map[string]string{}
	for _, n := range nodes {
		addrOf[n.Name()] = n.addr
	}
	var log callLog
	cl := newEconClient(t, newCoord(t, prefix), func(c *ClientConfig) {
		c.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(log.intercept)}
	})
	if got := strings.Join(cl.View(), ","); got != strings.Join(names, ",") {
		t.Fatalf("client view %s, want %v", got, names)
	}
	owner := router(t, nodes[0].Status().View...)
	ctx := testCtx(t)
	for i := range 24 {
		scope := fmt.Sprintf("market-%02d", i)
		if o, _ := cl.OwnerOf(scope); o != owner(scope) {
			t.Fatalf("client places %s on %s, nodes on %s", scope, o, owner(scope))
		}
		out, err := cl.Record(ctx, scope, grant(fmt.Sprintf("route-%d", i), "u1", 1))
		if err != nil || out.Status != netting.Accepted {
			t.Fatalf("record %s: %v, %v", scope, out, err)
		}
		if calls := log.take(); len(calls) != 1 || calls[0] != "Record@"+addrOf[owner(scope)] {
			t.Fatalf("record %s went %v, want straight to %s at %s", scope, calls, owner(scope), addrOf[owner(scope)])
		}
	}
}

// TestClientFollowsAMisrouteToAnOwnerItDoesNotKnow: a client whose view
// lacks a member sends to the owner of its view, which redirects; the
// owner (and its address, which the client did not have) travels in the
// reply and the client follows it.
func TestClientFollowsAMisrouteToAnOwnerItDoesNotKnow(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	a := serveNode(t, prefix, "econ-a", store, Config{}, nil)
	b := serveNode(t, prefix, "econ-b", store, Config{}, nil)
	c := serveNode(t, prefix, "econ-c", store, Config{}, nil)
	waitView(t, []string{"econ-a", "econ-b", "econ-c"}, a.Node, b.Node, c.Node)

	stale := StaticMembers{econMember(1, "econ-a", a.addr), econMember(2, "econ-b", b.addr)}
	var log callLog
	cl := newEconClient(t, stale, func(cfg *ClientConfig) {
		cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(log.intercept)}
	})
	// A scope the stale view gives econ-a and the live one econ-c.
	old, live := router(t, "econ-a", "econ-b"), router(t, "econ-a", "econ-b", "econ-c")
	scope := ""
	for i := 0; scope == ""; i++ {
		if s := fmt.Sprintf("scope-%d", i); old(s) == "econ-a" && live(s) == "econ-c" {
			scope = s
		}
	}
	ctx := testCtx(t)
	out, err := cl.Record(ctx, scope, grant("follow-1", "u1", 7))
	if err != nil || out.Status != netting.Accepted {
		t.Fatalf("record: %v, %v", out, err)
	}
	if calls := log.take(); strings.Join(calls, " ") != "Record@"+a.addr+" Record@"+c.addr {
		t.Fatalf("calls %v; want econ-a, then econ-c", calls)
	}
	rec, ok, err := store.LookupKey(ctx, "follow-1")
	if err != nil || !ok {
		t.Fatalf("follow-1 not journaled: %v", err)
	}
	if meta, err := store.Session(ctx, rec.SessionID); err != nil || meta.NodeID != "econ-c" || meta.Scope != scope {
		t.Fatalf("journaled in %+v, %v; want a session of econ-c for %s", meta, err, scope)
	}
}

// replyFault is a server interceptor that runs the handler and then loses
// the reply of a Record, a given number of times per key: with late unset
// the caller gets Unavailable (the connection dropped after the request
// was served), with late set the reply is held past the caller's attempt
// deadline.
type replyFault struct {
	late bool

	mu      sync.Mutex
	drops   map[string]int // key → replies still to lose
	handled map[string]int // key → times the node was asked
}

func newReplyFault(late bool, drops map[string]int) *replyFault {
	return &replyFault{late: late, drops: drops, handled: map[string]int{}}
}

func (f *replyFault) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	r, ok := req.(*econpb.RecordRequest)
	if !ok {
		return resp, err
	}
	f.mu.Lock()
	f.handled[r.GetKey()]++
	drop := f.drops[r.GetKey()] > 0
	if drop {
		f.drops[r.GetKey()]--
	}
	f.mu.Unlock()
	if !drop {
		return resp, err
	}
	if f.late {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return nil, status.Error(codes.Unavailable, "test: connection lost before the reply")
}

func (f *replyFault) asked(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.handled[key]
}

// journalCount is how many journal rows carry key, read from the SQLite
// file itself.
func journalCount(t *testing.T, path, key string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM netting_journal WHERE key = ?`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestClientRetriesALostReplyWithTheSameKey: the node records the movement
// but the caller never hears: the client retries with the same key, the
// node answers the first outcome, and the journal holds one entry. The
// wait between attempts is on a fake clock the test moves.
func TestClientRetriesALostReplyWithTheSameKey(t *testing.T) {
	for _, late := range []bool{false, true} {
		name := map[bool]string{false: "lost", true: "late"}[late]
		t.Run(name, func(t *testing.T) {
			prefix := testPrefix(t)
			store, path := newSQLite(t)
			fault := newReplyFault(late, map[string]int{"pay-1": 1, "pay-2": 100})
			a := serveNode(t, prefix, "econ-a", store, Config{}, nil, fault.intercept)
			waitView(t, []string{"econ-a"}, a.Node)
			fc := clock.NewFake(time.Unix(1_700_000_000, 0))
			cl := newEconClient(t, newCoord(t, prefix), func(c *ClientConfig) {
				c.Clock = fc
				c.AttemptTimeout = 500 * time.Millisecond
				c.MaxAttempts = 3
			})
			ctx := testCtx(t)

			type result struct {
				out netting.Outcome
				err error
			}
			record := func(key string, waits int) result {
				done := make(chan result, 1)
				go func() {
					out, err := cl.Record(ctx, "market-01", grant(key, "u1", 40))
					done <- result{out, err}
				}()
				for range waits {
					// The client arms its backoff timer only after an
					// attempt failed: then move past it.
					if err := fc.BlockUntil(ctx, 1); err != nil {
						t.Fatal(err)
					}
					fc.Advance(time.Second)
				}
				return <-done
			}

			// One reply lost: the retry gets the outcome.
			r := record("pay-1", 1)
			if r.err != nil || r.out.Status != netting.Accepted {
				t.Fatalf("pay-1: %v, %v", r.out, r.err)
			}
			rec, ok, err := store.LookupKey(ctx, "pay-1")
			if err != nil || !ok || rec.Seq != r.out.Seq {
				t.Fatalf("pay-1 journaled %v at %+v, %v; the retry answered seq %d", ok, rec, err, r.out.Seq)
			}
			if n := fault.asked("pay-1"); n != 2 {
				t.Errorf("the node was asked %d times, want 2", n)
			}
			if n := journalCount(t, path, "pay-1"); n != 1 {
				t.Errorf("pay-1 is in the journal %d times, want once", n)
			}

			// Every reply lost: the client gives up saying the outcome is
			// unknown; the movement is in the journal once all the same,
			// and a later retry by the caller learns it.
			r = record("pay-2", 2)
			var unknown *OutcomeUnknownError
			if !errors.As(r.err, &unknown) || !errors.Is(r.err, ErrOutcomeUnknown) || unknown.Attempts != 3 || unknown.Key != "pay-2" {
				t.Fatalf("pay-2: %v; want an OutcomeUnknownError after 3 attempts", r.err)
			}
			wantCode(t, r.err, CodeOutcomeUnknown)
			if n := journalCount(t, path, "pay-2"); n != 1 {
				t.Errorf("pay-2 is in the journal %d times, want once", n)
			}
			fault.mu.Lock()
			fault.drops["pay-2"] = 0
			fault.mu.Unlock()
			r = record("pay-2", 0)
			if r.err != nil || r.out.Status != netting.Accepted {
				t.Fatalf("pay-2 again: %v, %v", r.out, r.err)
			}
			if n := journalCount(t, path, "pay-2"); n != 1 {
				t.Errorf("pay-2 is in the journal %d times after the caller's retry, want once", n)
			}
			bal, err := cl.Balances(ctx, ledger.Spendable("u1"))
			if err != nil || bal[0].Pending != 80 {
				t.Errorf("u1 pending %+v, %v; want 80 (two movements of 40)", bal, err)
			}
		})
	}
}

// TestClientRecordsThroughMembershipChanges: callers keep recording while a
// node joins and another leaves. Every Record answers Accepted (the client
// retries ECON.NOT_READY and closed nodes and follows misroutes with the
// same key), and every key is in the journal exactly once.
func TestClientRecordsThroughMembershipChanges(t *testing.T) {
	prefix := testPrefix(t)
	store, path := newSQLite(t)
	a := serveNode(t, prefix, "econ-a", store, Config{}, nil)
	b := serveNode(t, prefix, "econ-b", store, Config{}, nil)
	waitView(t, []string{"econ-a", "econ-b"}, a.Node, b.Node)
	var log callLog
	cl := newEconClient(t, newCoord(t, prefix), func(c *ClientConfig) {
		c.BackoffMin = 5 * time.Millisecond
		c.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(log.intercept)}
	})
	ctx := testCtx(t)

	var mu sync.Mutex
	accepted := map[string]bool{}
	// progress gets a token per accepted movement (dropped when full): the
	// test waits on it so that each phase has movements in flight.
	progress := make(chan struct{}, 1024)
	record := func(key, scope string) error {
		out, err := cl.Record(ctx, scope, grant(key, "u-"+scope, 1))
		if err != nil {
			return fmt.Errorf("%s on %s: %w", key, scope, err)
		}
		if out.Status != netting.Accepted {
			return fmt.Errorf("%s on %s: %v", key, scope, out)
		}
		mu.Lock()
		accepted[key] = true
		mu.Unlock()
		select {
		case progress <- struct{}{}:
		default:
		}
		return nil
	}
	stop := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if err := record(fmt.Sprintf("w%d-%d", w, i), fmt.Sprintf("market-%d", (w*7+i)%8)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	failed := make(chan struct{})
	waitProgress := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-progress:
			case <-failed:
				return
			case <-ctx.Done():
				t.Fatal("no progress")
			}
		}
	}
	go func() {
		// A worker that fails stops the phases from waiting on it.
		wg.Wait()
		close(failed)
	}()
	// Drain what was accepted before each phase starts, then wait for
	// fresh movements, so every phase has some.
	drainProgress := func() {
		for {
			select {
			case <-progress:
			default:
				return
			}
		}
	}
	waitProgress(20)
	c := serveNode(t, prefix, "econ-c", store, Config{}, nil)
	waitView(t, []string{"econ-a", "econ-b", "econ-c"}, a.Node, b.Node, c.Node)
	drainProgress()
	waitProgress(20)
	if err := a.Close(); err != nil {
		t.Errorf("close econ-a: %v", err)
	}
	waitView(t, []string{"econ-b", "econ-c"}, b.Node, c.Node)
	drainProgress()
	waitProgress(20)
	close(stop)
	wg.Wait()
	<-failed
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// And after the changes, every scope still records.
	for i := range 8 {
		if err := record(fmt.Sprintf("after-%d", i), fmt.Sprintf("market-%d", i)); err != nil {
			t.Error(err)
		}
	}

	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT key, count(*) FROM netting_journal GROUP BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	journaled := 0
	for rows.Next() {
		var key string
		var n int
		if err := rows.Scan(&key, &n); err != nil {
			t.Fatal(err)
		}
		journaled++
		if n != 1 || !accepted[key] {
			t.Errorf("key %s: %d journal rows, accepted %v", key, n, accepted[key])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if journaled != len(accepted) {
		t.Errorf("%d keys journaled, %d accepted", journaled, len(accepted))
	}
	t.Logf("%d movements accepted through a join and a leave, in %d calls", len(accepted), len(log.take()))
}

// TestClientErrorsAreTyped: what a caller gets when the client cannot do
// the job, each with a code and a type or sentinel to match.
func TestClientErrorsAreTyped(t *testing.T) {
	ctx := testCtx(t)
	m := grant("typed-1", "u1", 1)

	// No member at all.
	cl := newEconClient(t, StaticMembers{}, func(c *ClientConfig) { c.MaxAttempts = 1 })
	_, err := cl.Record(ctx, "market-01", m)
	wantCode(t, err, CodeNoOwner)
	if !errors.Is(err, ErrNoOwner) {
		t.Errorf("%v does not match ErrNoOwner", err)
	}

	// Plaintext to a non-loopback address is refused before dialling.
	cl = newEconClient(t, StaticMembers{econMember(1, "econ-a", "192.0.2.1:7000")}, func(c *ClientConfig) { c.MaxAttempts = 1 })
	_, err = cl.Record(ctx, "market-01", m)
	var ce *errcode.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Insecure" {
		t.Errorf("plaintext to 192.0.2.1: %v; want a ConfigError naming Insecure", err)
	}

	// A movement the service would refuse never leaves the client.
	bad := netting.Movement{Key: "typed-2", Legs: []ledger.Leg{ledger.Debit("a", 1)}}
	_, err = cl.Record(ctx, "market-01", bad)
	wantCode(t, err, ledger.CodeUnbalanced)

	// A misroute whose owner the client cannot reach: the typed misroute.
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	a := serveNode(t, prefix, "econ-a", store, Config{}, []ServerOption{WithServerMembers(StaticMembers{})})
	b := startNode(t, prefix, "econ-b", store, Config{}) // not served, no address
	waitView(t, []string{"econ-a", "econ-b"}, a.Node, b)
	scope := scopeOwnedBy(t, router(t, "econ-a", "econ-b"), "econ-b")
	cl = newEconClient(t, StaticMembers{econMember(1, "econ-a", a.addr)}, func(c *ClientConfig) { c.MaxAttempts = 1 })
	_, err = cl.Record(ctx, scope, m)
	var mis *netting.MisroutedError
	if !errors.As(err, &mis) || mis.Owner != "econ-b" || mis.NodeID != "econ-a" || mis.Scope != scope {
		t.Errorf("unreachable owner: %v; want a MisroutedError from econ-a naming econ-b", err)
	}

	// Closed: idempotent, and every later call refused.
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = cl.Record(ctx, "scope-x", m)
	if !errors.Is(err, ErrClientClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestClientViewFollowsMembership: the client's view follows coord as
// members join and leave.
func TestClientViewFollowsMembership(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	cl := newEconClient(t, newCoord(t, prefix), nil)
	if v := cl.View(); len(v) != 0 {
		t.Fatalf("view %v before any node", v)
	}
	// A member of another role is not an economy node.
	zone, err := newCoord(t, prefix).Register(testCtx(t), coord.RegisterConfig{Name: "zone-a", Role: "zone", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zone.Close() })
	a := serveNode(t, prefix, "econ-a", store, Config{}, nil)
	b := serveNode(t, prefix, "econ-b", store, Config{}, nil)
	testenv.PollUntil(t, 10*time.Second, "client view econ-a,econ-b", func() bool {
		return strings.Join(cl.View(), ",") == "econ-a,econ-b"
	})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	testenv.PollUntil(t, 10*time.Second, "client view econ-b", func() bool {
		return strings.Join(cl.View(), ",") == "econ-b"
	})
	_ = b
}
