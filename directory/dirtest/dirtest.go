package dirtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/logintoken"
)

// Controls are the hooks the suite needs beyond the Directory port.
type Controls struct {
	// Expire makes account's session lease run out by the implementation's
	// own expiry mechanism (a fake clock moved past the TTL; a Redis key's
	// TTL cut short) and returns once the store no longer has it. It may
	// expire other accounts' sessions too; the suite does not rely on them.
	Expire func(t *testing.T, account account.ID)
	// ExpireResume makes account's armed resume credential (armed with a
	// window of one second) run out by the implementation's own expiry,
	// and returns once it has. It may expire other things too.
	ExpireResume func(t *testing.T, account account.ID)
	// Now is the time by the clock ClaimToken compares `until` with.
	Now func() time.Time
}

// The suite's accounts: each subtest uses its own, so a leak between
// subtests of one store shows.
const (
	alice account.ID = iota + 1
	bob
	carol
	dave
	erin
	frank
	gina
	hank
	ivy
	judy
	kim
	liz
	mia
	ned
	olga
)

// New returns a fresh, empty directory and its controls. The suite calls it
// once per subtest; cleanup belongs to t.
type New func(t *testing.T) (directory.Directory, Controls)

// Run runs the whole contract suite.
func Run(t *testing.T, newDir New) {
	tests := []struct {
		name string
		fn   func(t *testing.T, d directory.Directory, c Controls)
	}{
		{"ConnectThenLookup", testConnectThenLookup},
		{"ReconnectBumpsEpochAndDisplaces", testReconnect},
		{"StaleWritesRefused", testStaleWrites},
		{"RenewExtendsLease", testRenew},
		{"SetMasterRouteVersions", testRouteVersions},
		{"MasterKeptOnDisplacement", testMasterKept},
		{"RouteFloorSurvivesSession", testRouteFloor},
		{"ReleaseEndsSession", testRelease},
		{"LeaseExpiry", testLeaseExpiry},
		{"ConcurrentConnects", testConcurrentConnects},
		{"ConcurrentStaleAndFreshWrites", testConcurrentWrites},
		{"AccountsIndependent", testAccountsIndependent},
		{"InvalidArguments", testInvalidArguments},
		{"CanceledContext", testCanceled},
		{"TokenSingleUse", testTokenSingleUse},
		{"TokenConcurrentClaims", testTokenConcurrent},
		{"ResumeOnce", testResumeOnce},
		{"ResumeRefusals", testResumeRefusals},
		{"ResumeAfterReleaseAndExpiry", testResumeAfterReleaseAndExpiry},
		{"ResumeExpiry", testResumeExpiry},
		{"ResumeConcurrent", testResumeConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, c := newDir(t)
			tc.fn(t, d, c)
		})
	}
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustConnect(t *testing.T, d directory.Directory, account account.ID, gw directory.NodeID) (directory.Session, directory.Session) {
	t.Helper()
	s, prev, err := d.Connect(ctxOf(t), account, gw)
	if err != nil {
		t.Fatalf("Connect(%s, %d): %v", account, gw, err)
	}
	if s.Account != account || s.Gateway != gw || s.Epoch == 0 {
		t.Fatalf("Connect(%s, %d) = %+v", account, gw, s)
	}
	return s, prev
}

func mustLookup(t *testing.T, d directory.Directory, account account.ID) directory.Session {
	t.Helper()
	s, err := d.Lookup(ctxOf(t), account)
	if err != nil {
		t.Fatalf("Lookup(%s): %v", account, err)
	}
	return s
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, directory.ErrNotFound) || errcode.Of(err) != directory.CodeNotFound {
		t.Fatalf("%s: err = %v (code %q), want ErrNotFound", what, err, errcode.Of(err))
	}
}

func wantStaleEpoch(t *testing.T, what string, err error, epoch, current directory.Epoch) {
	t.Helper()
	var se *directory.StaleEpochError
	if !errors.Is(err, directory.ErrStaleEpoch) || errcode.Of(err) != directory.CodeStaleEpoch || !errors.As(err, &se) {
		t.Fatalf("%s: err = %v (code %q), want *StaleEpochError", what, err, errcode.Of(err))
	}
	if se.Epoch != epoch || se.Current != current {
		t.Fatalf("%s: StaleEpochError epoch %d current %d, want %d and %d", what, se.Epoch, se.Current, epoch, current)
	}
}

func sameSession(t *testing.T, what string, got, want directory.Session) {
	t.Helper()
	if got.Account != want.Account || got.Epoch != want.Epoch || got.Gateway != want.Gateway ||
		got.HasMaster != want.HasMaster || got.Master != want.Master {
		t.Fatalf("%s: session = %+v, want %+v", what, got, want)
	}
}

func testConnectThenLookup(t *testing.T, d directory.Directory, _ Controls) {
	ctx := ctxOf(t)
	if _, err := d.Lookup(ctx, alice); err != nil {
		wantNotFound(t, "Lookup before Connect", err)
	} else {
		t.Fatal("Lookup before Connect succeeded")
	}
	s, prev := mustConnect(t, d, alice, 7)
	if prev.Epoch != 0 {
		t.Fatalf("first Connect displaced %+v", prev)
	}
	if s.HasMaster || s.Master.Version != 0 {
		t.Fatalf("first session has a master: %+v", s)
	}
	if s.LeaseExpiry.IsZero() {
		t.Fatal("no lease expiry")
	}
	got := mustLookup(t, d, alice)
	sameSession(t, "Lookup", got, s)
	if !got.LeaseExpiry.Equal(s.LeaseExpiry) {
		t.Fatalf("Lookup lease expiry %v, Connect said %v", got.LeaseExpiry, s.LeaseExpiry)
	}
}

func testReconnect(t *testing.T, d directory.Directory, _ Controls) {
	s1, _ := mustConnect(t, d, bob, 1)
	s2, prev := mustConnect(t, d, bob, 2)
	if s2.Epoch <= s1.Epoch {
		t.Fatalf("second epoch %d not above first %d", s2.Epoch, s1.Epoch)
	}
	if prev.Epoch != s1.Epoch || prev.Gateway != 1 {
		t.Fatalf("displaced = %+v, want epoch %d at gateway 1", prev, s1.Epoch)
	}
	// The same gateway reconnecting is a new connection too.
	s3, prev := mustConnect(t, d, bob, 2)
	if s3.Epoch <= s2.Epoch || prev.Epoch != s2.Epoch {
		t.Fatalf("third connect epoch %d (displaced %d), want above %d displacing it", s3.Epoch, prev.Epoch, s2.Epoch)
	}
	sameSession(t, "Lookup", mustLookup(t, d, bob), s3)
}

func testStaleWrites(t *testing.T, d directory.Directory, _ Controls) {
	ctx := ctxOf(t)
	old, _ := mustConnect(t, d, carol, 1)
	cur, _ := mustConnect(t, d, carol, 2)
	cur, err := d.SetMaster(ctx, carol, cur.Epoch, directory.Route{Node: 9, Version: 1})
	if err != nil {
		t.Fatalf("SetMaster with current epoch: %v", err)
	}

	_, err = d.Renew(ctx, carol, old.Epoch)
	wantStaleEpoch(t, "Renew(old)", err, old.Epoch, cur.Epoch)
	_, err = d.SetMaster(ctx, carol, old.Epoch, directory.Route{Node: 4, Version: 5})
	wantStaleEpoch(t, "SetMaster(old)", err, old.Epoch, cur.Epoch)
	err = d.Release(ctx, carol, old.Epoch)
	wantStaleEpoch(t, "Release(old)", err, old.Epoch, cur.Epoch)
	// An epoch from the future (never issued) is as wrong as an old one.
	_, err = d.Renew(ctx, carol, cur.Epoch+1000)
	wantStaleEpoch(t, "Renew(future)", err, cur.Epoch+1000, cur.Epoch)

	got := mustLookup(t, d, carol)
	sameSession(t, "after refused writes", got, cur)
	if got.Master != (directory.Route{Node: 9, Version: 1}) {
		t.Fatalf("master changed by a stale write: %+v", got.Master)
	}
}

func testRenew(t *testing.T, d directory.Directory, _ Controls) {
	s, _ := mustConnect(t, d, dave, 3)
	r, err := d.Renew(ctxOf(t), dave, s.Epoch)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	sameSession(t, "Renew", r, s)
	if r.LeaseExpiry.Before(s.LeaseExpiry) {
		t.Fatalf("Renew moved the lease back: %v < %v", r.LeaseExpiry, s.LeaseExpiry)
	}
	if got := mustLookup(t, d, dave); !got.LeaseExpiry.Equal(r.LeaseExpiry) {
		t.Fatalf("Lookup lease %v, Renew said %v", got.LeaseExpiry, r.LeaseExpiry)
	}
}

func wantStaleRoute(t *testing.T, what string, err error, current directory.Route) {
	t.Helper()
	var se *directory.StaleRouteError
	if !errors.Is(err, directory.ErrStaleRoute) || errcode.Of(err) != directory.CodeStaleRoute || !errors.As(err, &se) {
		t.Fatalf("%s: err = %v, want *StaleRouteError", what, err)
	}
	if se.Current.Version != current.Version {
		t.Fatalf("%s: current version %d, want %d", what, se.Current.Version, current.Version)
	}
}

func testRouteVersions(t *testing.T, d directory.Directory, _ Controls) {
	ctx := ctxOf(t)
	s, _ := mustConnect(t, d, erin, 1)
	set := func(node directory.NodeID, v uint64) (directory.Session, error) {
		return d.SetMaster(ctx, erin, s.Epoch, directory.Route{Node: node, Version: v})
	}
	m, err := set(3, 1)
	if err != nil || !m.HasMaster || m.Master != (directory.Route{Node: 3, Version: 1}) || m.Epoch != s.Epoch {
		t.Fatalf("SetMaster(3, v1) = %+v, %v", m, err)
	}
	if m, err = set(3, 1); err != nil || m.Master.Node != 3 {
		t.Fatalf("repeating the current route: %+v, %v", m, err)
	}
	_, err = set(4, 1)
	wantStaleRoute(t, "same version, other node", err, directory.Route{Node: 3, Version: 1})
	// A crash-restore jumps the version by 2.
	if _, err = set(4, 3); err != nil {
		t.Fatalf("SetMaster(4, v3): %v", err)
	}
	_, err = set(5, 2) // the half-dead old owner's handoff arriving late
	wantStaleRoute(t, "lower version", err, directory.Route{Node: 4, Version: 3})
	got := mustLookup(t, d, erin)
	if !got.HasMaster || got.Master != (directory.Route{Node: 4, Version: 3}) {
		t.Fatalf("Lookup master = %+v (has %v), want node 4 v3", got.Master, got.HasMaster)
	}
}

func testMasterKept(t *testing.T, d directory.Directory, _ Controls) {
	s, _ := mustConnect(t, d, frank, 1)
	if _, err := d.SetMaster(ctxOf(t), frank, s.Epoch, directory.Route{Node: 8, Version: 2}); err != nil {
		t.Fatal(err)
	}
	s2, prev := mustConnect(t, d, frank, 2)
	if !s2.HasMaster || s2.Master != (directory.Route{Node: 8, Version: 2}) {
		t.Fatalf("master lost on displacement: %+v", s2)
	}
	if !prev.HasMaster || prev.Master.Node != 8 {
		t.Fatalf("displaced session lost its master: %+v", prev)
	}
}

func testRouteFloor(t *testing.T, d directory.Directory, _ Controls) {
	ctx := ctxOf(t)
	s, _ := mustConnect(t, d, gina, 1)
	if _, err := d.SetMaster(ctx, gina, s.Epoch, directory.Route{Node: 8, Version: 3}); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, gina, s.Epoch); err != nil {
		t.Fatal(err)
	}
	s2, prev := mustConnect(t, d, gina, 2)
	if prev.Epoch != 0 {
		t.Fatalf("released session displaced: %+v", prev)
	}
	if s2.HasMaster || s2.Master.Version != 3 {
		t.Fatalf("new session after release = %+v, want no master and version floor 3", s2)
	}
	_, err := d.SetMaster(ctx, gina, s2.Epoch, directory.Route{Node: 1, Version: 3})
	wantStaleRoute(t, "version at the floor", err, directory.Route{Version: 3})
	if _, err := d.SetMaster(ctx, gina, s2.Epoch, directory.Route{Node: 1, Version: 4}); err != nil {
		t.Fatalf("version above the floor: %v", err)
	}
}

func testRelease(t *testing.T, d directory.Directory, _ Controls) {
	ctx := ctxOf(t)
	s, _ := mustConnect(t, d, hank, 1)
	if err := d.Release(ctx, hank, s.Epoch); err != nil {
		t.Fatalf("Release: %v", err)
	}
	_, err := d.Lookup(ctx, hank)
	wantNotFound(t, "Lookup after Release", err)
	wantNotFound(t, "second Release", d.Release(ctx, hank, s.Epoch))
	_, err = d.Renew(ctx, hank, s.Epoch)
	wantNotFound(t, "Renew after Release", err)
	s2, _ := mustConnect(t, d, hank, 1)
	if s2.Epoch <= s.Epoch {
		t.Fatalf("epoch after release %d not above %d", s2.Epoch, s.Epoch)
	}
}

func testLeaseExpiry(t *testing.T, d directory.Directory, c Controls) {
	ctx := ctxOf(t)
	s, _ := mustConnect(t, d, ivy, 1)
	if _, err := d.SetMaster(ctx, ivy, s.Epoch, directory.Route{Node: 2, Version: 1}); err != nil {
		t.Fatal(err)
	}
	c.Expire(t, ivy)
	_, err := d.Lookup(ctx, ivy)
	wantNotFound(t, "Lookup after expiry", err)
	_, err = d.Renew(ctx, ivy, s.Epoch)
	wantNotFound(t, "Renew after expiry", err)
	_, err = d.SetMaster(ctx, ivy, s.Epoch, directory.Route{Node: 2, Version: 2})
	wantNotFound(t, "SetMaster after expiry", err)
	wantNotFound(t, "Release after expiry", d.Release(ctx, ivy, s.Epoch))
	s2, prev := mustConnect(t, d, ivy, 3)
	if prev.Epoch != 0 {
		t.Fatalf("expired session displaced: %+v", prev)
	}
	if s2.Epoch <= s.Epoch {
		t.Fatalf("epoch after expiry %d not above %d", s2.Epoch, s.Epoch)
	}
	if s2.HasMaster || s2.Master.Version != 1 {
		t.Fatalf("session after expiry = %+v, want no master, version floor 1", s2)
	}
}

func testConcurrentConnects(t *testing.T, d directory.Directory, _ Controls) {
	const n = 16
	type result struct {
		s, prev directory.Session
		err     error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	ctx := ctxOf(t)
	for i := range n {
		wg.Go(func() {
			<-start
			s, prev, err := d.Connect(ctx, judy, directory.NodeID(i))
			results[i] = result{s, prev, err}
		})
	}
	close(start)
	wg.Wait()
	epochs := make([]directory.Epoch, 0, n)
	displaced := make([]directory.Epoch, 0, n)
	var newest result
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("Connect %d: %v", i, r.err)
		}
		epochs = append(epochs, r.s.Epoch)
		if r.prev.Epoch != 0 {
			displaced = append(displaced, r.prev.Epoch)
			if r.prev.Epoch >= r.s.Epoch {
				t.Fatalf("connect with epoch %d displaced a newer epoch %d", r.s.Epoch, r.prev.Epoch)
			}
		}
		if r.s.Epoch > newest.s.Epoch {
			newest = r
		}
	}
	slices.Sort(epochs)
	slices.Sort(displaced)
	for i := 1; i < n; i++ {
		if epochs[i] == epochs[i-1] {
			t.Fatalf("two connects got epoch %d", epochs[i])
		}
	}
	// Connects are serialised: each displaced exactly its predecessor, so the
	// displaced epochs are all epochs but the newest, each once.
	if !slices.Equal(displaced, epochs[:n-1]) {
		t.Fatalf("displaced epochs %v, want every epoch but the newest %v", displaced, epochs)
	}
	sameSession(t, "Lookup after concurrent connects", mustLookup(t, d, judy), newest.s)
}

// testConcurrentWrites races writes from a displaced epoch against writes
// from the current one: no stale write may land.
func testConcurrentWrites(t *testing.T, d directory.Directory, _ Controls) {
	ctx := ctxOf(t)
	old, _ := mustConnect(t, d, kim, 1)
	cur, _ := mustConnect(t, d, kim, 2)
	const rounds = 20
	var wg sync.WaitGroup
	errs := make(chan error, 4*rounds)
	for i := range rounds {
		v := uint64(i + 1)
		wg.Go(func() {
			_, err := d.SetMaster(ctx, kim, old.Epoch, directory.Route{Node: 66, Version: 1000 + v})
			if !errors.Is(err, directory.ErrStaleEpoch) {
				errs <- fmt.Errorf("stale SetMaster: %v", err)
			}
		})
		wg.Go(func() {
			if _, err := d.Renew(ctx, kim, old.Epoch); !errors.Is(err, directory.ErrStaleEpoch) {
				errs <- fmt.Errorf("stale Renew: %v", err)
			}
		})
		wg.Go(func() {
			_, err := d.SetMaster(ctx, kim, cur.Epoch, directory.Route{Node: 5, Version: v})
			if err != nil && !errors.Is(err, directory.ErrStaleRoute) {
				errs <- fmt.Errorf("current SetMaster: %v", err)
			}
		})
		wg.Go(func() {
			if _, err := d.Renew(ctx, kim, cur.Epoch); err != nil {
				errs <- fmt.Errorf("current Renew: %v", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := mustLookup(t, d, kim)
	if got.Epoch != cur.Epoch || got.Master != (directory.Route{Node: 5, Version: rounds}) {
		t.Fatalf("after the race: %+v, want epoch %d, master node 5 v%d", got, cur.Epoch, rounds)
	}
}

func testAccountsIndependent(t *testing.T, d directory.Directory, _ Controls) {
	ctx := ctxOf(t)
	a, _ := mustConnect(t, d, liz, 1)
	b, _ := mustConnect(t, d, mia, 2)
	if _, err := d.SetMaster(ctx, mia, b.Epoch, directory.Route{Node: 9, Version: 4}); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, liz, a.Epoch); err != nil {
		t.Fatal(err)
	}
	got := mustLookup(t, d, mia)
	if got.Epoch != b.Epoch || got.Master.Node != 9 {
		t.Fatalf("mia changed by liz's writes: %+v", got)
	}
	// Accounts whose texts extend mia's (130, 1300) are their own accounts,
	// and so is the largest account.
	for _, other := range []account.ID{mia * 10, mia * 100, math.MaxUint64} {
		c, prev := mustConnect(t, d, other, 3)
		if prev.Epoch != 0 || c.HasMaster || c.Master.Version != 0 {
			t.Fatalf("account %s shares state with %s: %+v displaced %+v", other, mia, c, prev)
		}
		sameSession(t, "Lookup of "+other.String(), mustLookup(t, d, other), c)
	}
}

func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, directory.ErrInvalidArgument) || errcode.Of(err) != directory.CodeInvalidArgument {
		t.Fatalf("%s: err = %v, want ErrInvalidArgument", what, err)
	}
}

func testInvalidArguments(t *testing.T, d directory.Directory, c Controls) {
	ctx := ctxOf(t)
	_, _, err := d.Connect(ctx, account.None, 1)
	wantInvalid(t, "Connect account.None", err)
	_, err = d.Lookup(ctx, account.None)
	wantInvalid(t, "Lookup account.None", err)
	s, _ := mustConnect(t, d, ned, 1)
	_, err = d.Renew(ctx, account.None, s.Epoch)
	wantInvalid(t, "Renew account.None", err)
	_, err = d.SetMaster(ctx, account.None, s.Epoch, directory.Route{Node: 1, Version: 1})
	wantInvalid(t, "SetMaster account.None", err)
	wantInvalid(t, "Release account.None", d.Release(ctx, account.None, s.Epoch))
	_, err = d.Renew(ctx, ned, 0)
	wantInvalid(t, "Renew epoch 0", err)
	_, err = d.SetMaster(ctx, ned, s.Epoch, directory.Route{Node: 1, Version: 0})
	wantInvalid(t, "SetMaster version 0", err)
	wantInvalid(t, "Release epoch 0", d.Release(ctx, ned, 0))
	wantInvalid(t, "ClaimToken in the past", d.ClaimToken(ctx, logintoken.ID{1}, c.Now().Add(-time.Second)))
	sameSession(t, "after invalid calls", mustLookup(t, d, ned), s)
}

func testCanceled(t *testing.T, d directory.Directory, c Controls) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := d.Connect(ctx, olga, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Connect with a canceled context: %v", err)
	}
	_, err := d.Lookup(ctxOf(t), olga)
	wantNotFound(t, "Lookup after canceled Connect", err)
	if _, err := d.Lookup(ctx, olga); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lookup with a canceled context: %v", err)
	}
	if err := d.ClaimToken(ctx, logintoken.ID{2}, c.Now().Add(time.Minute)); !errors.Is(err, context.Canceled) {
		t.Fatalf("ClaimToken with a canceled context: %v", err)
	}
	if err := d.ClaimToken(ctxOf(t), logintoken.ID{2}, c.Now().Add(time.Minute)); err != nil {
		t.Fatalf("ClaimToken after a canceled claim of the same id: %v", err)
	}
}

func testTokenSingleUse(t *testing.T, d directory.Directory, c Controls) {
	ctx := ctxOf(t)
	until := c.Now().Add(time.Minute)
	id := logintoken.ID{0xde, 0xad}
	if err := d.ClaimToken(ctx, id, until); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	err := d.ClaimToken(ctx, id, until)
	if !errors.Is(err, logintoken.ErrReplayed) || errcode.Of(err) != logintoken.CodeReplayed {
		t.Fatalf("second claim: %v (code %q), want TOKEN.REPLAYED", err, errcode.Of(err))
	}
	if err := d.ClaimToken(ctx, logintoken.ID{0xde, 0xae}, until); err != nil {
		t.Fatalf("claim of another id: %v", err)
	}
	// The token's id space is not the accounts' space: an account whose
	// bytes are the id's first eight is another thing.
	if _, _, err := d.Connect(ctx, account.ID(binary.BigEndian.Uint64(id[:8])), 1); err != nil {
		t.Fatalf("Connect of an account with the token id's bytes: %v", err)
	}
	if err := d.ClaimToken(ctx, id, until); !errors.Is(err, logintoken.ErrReplayed) {
		t.Fatalf("claim after an account with the same bytes connected: %v", err)
	}
}

func testTokenConcurrent(t *testing.T, d directory.Directory, c Controls) {
	ctx := ctxOf(t)
	until := c.Now().Add(time.Minute)
	const n = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, replays := 0, 0
	for range n {
		wg.Go(func() {
			err := d.ClaimToken(ctx, logintoken.ID{7}, until)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, logintoken.ErrReplayed):
				replays++
			default:
				t.Errorf("claim: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || replays != n-1 {
		t.Fatalf("%d claims won and %d were replays, want 1 and %d", wins, replays, n-1)
	}
}
