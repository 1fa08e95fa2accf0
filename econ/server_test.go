package econ

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/proto/econpb"
)

// served is one economy node served over gRPC on a loopback port.
type served struct {
	*Node
	addr string
}

// serveNode starts a node (startNode) whose published address is a fresh
// loopback listener, serves it there with the given server interceptors,
// and stops the server at cleanup (before the node closes).
func serveNode(t testing.TB, prefix, name string, store netting.SharedStore, cfg Config, opts []ServerOption, interceptors ...grpc.UnaryServerInterceptor) *served {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = lis.Addr().String()
	n := startNode(t, prefix, name, store, cfg)
	g := grpc.NewServer(append(ServerOptions(), grpc.ChainUnaryInterceptor(interceptors...))...)
	NewServer(n, append([]ServerOption{WithServerLogger(testLogger(t))}, opts...)...).Register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return &served{Node: n, addr: cfg.Addr}
}

// rawStub is a plain gRPC stub to addr, with no client-side checks: what a
// careless client in another language sends.
func rawStub(t testing.TB, addr string) econpb.EconomyClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return econpb.NewEconomyClient(cc)
}

// errorInfo returns the code and field a status carries.
func errorInfo(err error) (code, field string) {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == ErrorDomain {
			return info.Reason, info.Metadata["field"]
		}
	}
	return "", ""
}

// scopeOwnedBy returns a scope that owner(scope) places on want.
func scopeOwnedBy(t testing.TB, owner func(string) string, want string) string {
	t.Helper()
	for i := range 10000 {
		if s := fmt.Sprintf("scope-%d", i); owner(s) == want {
			return s
		}
	}
	t.Fatalf("no scope placed on %s", want)
	return ""
}

func router(t testing.TB, names ...string) func(string) string {
	t.Helper()
	r, err := netting.ScopeRouter(names)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkNothingWritten: no key journaled, no session, no reservation, no
// balance.
func checkNothingWritten(t *testing.T, store netting.SharedStore, keys []string) {
	t.Helper()
	ctx := testCtx(t)
	for _, k := range keys {
		if rec, ok, err := store.LookupKey(ctx, k); err != nil || ok {
			t.Errorf("key %q: journaled %v (%+v), err %v", k, ok, rec, err)
		}
	}
	if us, err := store.ListUnsettled(ctx, 0); err != nil || len(us) != 0 {
		t.Errorf("unsettled sessions %v, err %v", us, err)
	}
	if p, err := store.PendingAll(ctx); err != nil || len(p) != 0 {
		t.Errorf("pending %v, err %v", p, err)
	}
	if b, err := store.Balances(ctx); err != nil || len(b) != 0 {
		t.Errorf("balances %v, err %v", b, err)
	}
}

// TestServerRefusesBadInputAndWritesNothing: malformed requests on the wire
// get InvalidArgument with the stable code and the field in the ErrorInfo;
// a movement the reservations refuse is Rejected; none of them writes
// anything.
func TestServerRefusesBadInputAndWritesNothing(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	a := serveNode(t, prefix, "econ-a", store, Config{}, nil)
	waitView(t, []string{"econ-a"}, a.Node)
	stub := rawStub(t, a.addr)
	ctx := testCtx(t)

	var keys []string
	for i, tc := range badRecordCases() {
		req := goodRecord(fmt.Sprintf("bad-%d", i))
		tc.mod(req)
		if req.Key != "" {
			keys = append(keys, req.Key)
		}
		_, err := stub.Record(ctx, req)
		code, field := errorInfo(err)
		if status.Code(err) != codes.InvalidArgument || code != tc.code || field != tc.field {
			t.Errorf("%s: got %v, code %q, field %q; want InvalidArgument %q %q", tc.name, err, code, field, tc.code, tc.field)
		}
	}
	// Other requests too.
	for _, call := range []struct {
		name  string
		err   error
		field string
	}{
		{"Balances", func() error { _, err := stub.Balances(ctx, &econpb.BalancesRequest{}); return err }(), "accounts"},
		{"Pending", func() error {
			_, err := stub.Pending(ctx, &econpb.PendingRequest{Limit: MaxPendingPage + 1})
			return err
		}(), "limit"},
		{"Recover", func() error {
			_, err := stub.Recover(ctx, &econpb.RecoverRequest{SessionId: "sess:x y"})
			return err
		}(), "session_id"},
	} {
		code, field := errorInfo(call.err)
		if status.Code(call.err) != codes.InvalidArgument || code != ledger.CodeMalformed || field != call.field {
			t.Errorf("%s: got %v, code %q, field %q", call.name, call.err, code, field)
		}
	}
	// Well formed, but a wallet with nothing in it cannot pay: Rejected,
	// and nothing reserved or journaled.
	resp, err := stub.Record(ctx, &econpb.RecordRequest{Scope: "market-01", Key: "broke-1", Legs: []*econpb.Leg{
		debitPB(ledger.Spendable("broke"), 5), creditPB(ledger.Earned("seller"), 5),
	}})
	if err != nil || resp.GetOutcome().GetStatus() != econpb.Status_STATUS_REJECTED || resp.GetOutcome().GetReason() != netting.ReasonInsufficientFunds {
		t.Fatalf("overdraft: %v, %v; want REJECTED %s", resp, err, netting.ReasonInsufficientFunds)
	}
	keys = append(keys, "broke-1")
	// The session the rejected movement opened has no journal row, so it
	// is not unsettled; settle it away anyway to leave nothing behind.
	if _, err := a.SettleAll(ctx); err != nil {
		t.Fatal(err)
	}
	checkNothingWritten(t, store, keys)
}

// TestServerAnswersMisrouteWithTheOwnersAddress: a scope sent to a node
// that does not own it is answered, not recorded: the owner's name and
// econ address travel in the reply.
func TestServerAnswersMisrouteWithTheOwnersAddress(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	a := serveNode(t, prefix, "econ-a", store, Config{}, nil)
	b := serveNode(t, prefix, "econ-b", store, Config{}, nil)
	waitView(t, []string{"econ-a", "econ-b"}, a.Node, b.Node)
	scope := scopeOwnedBy(t, router(t, "econ-a", "econ-b"), "econ-b")

	resp, err := rawStub(t, a.addr).Record(testCtx(t), &econpb.RecordRequest{Scope: scope, Key: "mis-1", Legs: goodRecord("").Legs})
	if err != nil {
		t.Fatal(err)
	}
	mis := resp.GetMisroute()
	if resp.GetNode() != "econ-a" || mis.GetScope() != scope || mis.GetOwner() != "econ-b" || mis.GetOwnerAddr() != b.addr {
		t.Fatalf("reply %v; want a misroute from econ-a to econ-b at %s", resp, b.addr)
	}
	checkNothingWritten(t, store, []string{"mis-1"})

	// Without a way to look the owner up, the name still travels.
	c := serveNode(t, prefix, "econ-c", store, Config{}, []ServerOption{WithServerMembers(StaticMembers{})})
	waitView(t, []string{"econ-a", "econ-b", "econ-c"}, a.Node, b.Node, c.Node)
	scope = scopeOwnedBy(t, router(t, "econ-a", "econ-b", "econ-c"), "econ-a")
	resp, err = rawStub(t, c.addr).Record(testCtx(t), &econpb.RecordRequest{Scope: scope, Key: "mis-2", Legs: goodRecord("").Legs})
	if err != nil || resp.GetMisroute().GetOwner() != "econ-a" || resp.GetMisroute().GetOwnerAddr() != "" {
		t.Fatalf("reply %v, %v; want a misroute to econ-a with no address", resp, err)
	}
}

// TestServerReadsAndOperatorCalls drives every other RPC through the Go
// client against real nodes: balances and pending before and after a
// settle, pending in pages, health, sweep, recover.
func TestServerReadsAndOperatorCalls(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	a := serveNode(t, prefix, "econ-a", store, Config{}, nil)
	b := serveNode(t, prefix, "econ-b", store, Config{}, nil)
	waitView(t, []string{"econ-a", "econ-b"}, a.Node, b.Node)
	cl := newEconClient(t, newCoord(t, prefix), nil)
	ctx := testCtx(t)

	users := []string{"u1", "u2", "u3"}
	var sessions []string
	for i, u := range users {
		out, err := cl.Record(ctx, fmt.Sprintf("market-%02d", i), grant("grant-"+u, u, int64(100*(i+1))))
		if err != nil || out.Status != netting.Accepted {
			t.Fatalf("record %s: %v, %v", u, out, err)
		}
		rec, ok, err := store.LookupKey(ctx, "grant-"+u)
		if err != nil || !ok {
			t.Fatalf("grant-%s not journaled: %v", u, err)
		}
		sessions = append(sessions, rec.SessionID)
	}
	accounts := []string{ledger.Spendable("u1"), ledger.Spendable("u2"), ledger.Spendable("u3"), ledger.Spendable("nobody")}
	bals, err := cl.Balances(ctx, accounts...)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []Balance{{accounts[0], 0, 100}, {accounts[1], 0, 200}, {accounts[2], 0, 300}, {accounts[3], 0, 0}} {
		if bals[i] != want {
			t.Errorf("before settle: %+v, want %+v", bals[i], want)
		}
	}
	pend, err := cl.Pending(ctx)
	if err != nil || len(pend) != 3 || pend[accounts[2]] != 300 {
		t.Errorf("Pending: %v, %v", pend, err)
	}
	// One account per page: the cursor walks them in order.
	stub := rawStub(t, a.addr)
	var walked []string
	for after := ""; ; {
		resp, err := stub.Pending(ctx, &econpb.PendingRequest{After: after, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range resp.GetPending() {
			walked = append(walked, p.GetAccount())
		}
		if after = resp.GetNextAfter(); after == "" {
			break
		}
	}
	if strings.Join(walked, ",") != strings.Join(accounts[:3], ",") {
		t.Errorf("paged Pending walked %v", walked)
	}

	h, err := cl.Health(ctx, "econ-b")
	if err != nil || h.Name != "econ-b" || !h.Ready || strings.Join(h.View, ",") != "econ-a,econ-b" || h.ViewID != b.Status().ViewID {
		t.Errorf("Health(econ-b) = %+v, %v", h, err)
	}

	netted := 0
	for _, m := range []string{"econ-a", "econ-b"} {
		reps, err := cl.SettleAll(ctx, m)
		if err != nil {
			t.Fatalf("SettleAll(%s): %v", m, err)
		}
		for _, r := range reps {
			netted += r.Netted
			if r.Mode != netting.ModeNetted || r.JournalHead == "" {
				t.Errorf("report %+v", r)
			}
		}
	}
	if netted != len(users) {
		t.Errorf("settles netted %d movements, want %d", netted, len(users))
	}
	bals, err = cl.Balances(ctx, accounts[:3]...)
	if err != nil {
		t.Fatal(err)
	}
	for i, bal := range bals {
		if bal.Balance != int64(100*(i+1)) || bal.Pending != 0 {
			t.Errorf("after settle: %+v", bal)
		}
	}

	sum, err := cl.Sweep(ctx, "econ-a")
	if err != nil || len(sum.Failed) != 0 || len(sum.Settled) != 0 {
		t.Errorf("Sweep: %+v, %v", sum, err)
	}
	rep, err := cl.Recover(ctx, "econ-b", sessions[0])
	if err != nil || !rep.AlreadySettled || rep.SessionID != sessions[0] || rep.Netted != 1 {
		t.Errorf("Recover(%s) = %+v, %v", sessions[0], rep, err)
	}
	_, err = cl.Recover(ctx, "econ-b", "sess:nowhere:0000-1")
	wantCode(t, err, netting.CodeSessionNotFound)
	if !errors.Is(err, netting.ErrSessionNotFound) {
		t.Errorf("Recover of an unknown session: %v does not match netting.ErrSessionNotFound", err)
	}
	once := newEconClient(t, newCoord(t, prefix), func(c *ClientConfig) { c.MaxAttempts = 1 })
	if _, err := once.Health(ctx, "econ-z"); !errors.Is(err, ErrNoOwner) {
		t.Errorf("Health of an unknown member: %v", err)
	}
}

// econMember is the coord member record a node publishes, for a
// StaticMembers view.
func econMember(id int, name, addr string) coord.Member {
	return coord.Member{ID: coord.NodeID(id), Name: name, Role: Role, Addrs: map[string]string{AddrKey: addr}}
}

// TestServerMembersListsLiveEconMembersWithAddresses: Members answers, from
// any node, every live econ member (not other roles) with its service
// address, sorted by name, and follows a member that leaves: what a caller
// without etcd places scopes over. The Go client's Members reads the same.
func TestServerMembersListsLiveEconMembersWithAddresses(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	ctx := testCtx(t)
	zone, err := newCoord(t, prefix).Register(ctx, coord.RegisterConfig{Name: "zone-a", Role: "zone", TTL: time.Second,
		Addrs: map[string]string{AddrKey: "127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zone.Close() })
	b := serveNode(t, prefix, "econ-b", store, Config{}, nil)
	a := serveNode(t, prefix, "econ-a", store, Config{}, nil)
	waitView(t, []string{"econ-a", "econ-b"}, a.Node, b.Node)

	members := func(addr string) string {
		t.Helper()
		resp, err := rawStub(t, addr).Members(ctx, &econpb.MembersRequest{})
		if err != nil {
			t.Fatalf("Members at %s: %v", addr, err)
		}
		var out []string
		for _, m := range resp.GetMembers() {
			out = append(out, m.GetName()+"@"+m.GetAddr())
		}
		return resp.GetNode() + ": " + strings.Join(out, " ")
	}
	if got, want := members(a.addr), "econ-a: econ-a@"+a.addr+" econ-b@"+b.addr; got != want {
		t.Fatalf("Members from a: %q, want %q", got, want)
	}
	if got, want := members(b.addr), "econ-b: econ-a@"+a.addr+" econ-b@"+b.addr; got != want {
		t.Fatalf("Members from b: %q, want %q", got, want)
	}
	cl := newEconClient(t, StaticMembers{{ID: 1, Name: "econ-a", Role: Role, Addrs: map[string]string{AddrKey: a.addr}}}, nil)
	got, err := cl.Members(ctx, "econ-a")
	if err != nil || fmt.Sprint(got) != fmt.Sprintf("[{econ-a %s} {econ-b %s}]", a.addr, b.addr) {
		t.Fatalf("Client.Members: %v, %v", got, err)
	}

	// A graceful close ends b's registration at once: the next read no
	// longer has it.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := members(a.addr), "econ-a: econ-a@"+a.addr; got != want {
		t.Fatalf("Members after b left: %q, want %q", got, want)
	}
}
