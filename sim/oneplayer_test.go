package sim_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonegate"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// The one-player rule (issue 30), with real gateways: at every tick every
// account has at most one master and one pet in the whole cluster, and a
// returning player's state is never older than its last acknowledged
// save. These tests watch the first after every step of the cluster.

// playerWatch counts, after every step of the cluster and on the stepping
// goroutine (the world goroutine of every node), the entities of client
// players (an owner with a session) simulated anywhere, per account, and
// keeps the first tick at which an account had more than its master and
// its pet.
type playerWatch struct {
	rts   []*zone.Runtime
	steps atomic.Uint64

	mu    sync.Mutex
	count map[account.ID]int
	bad   []string
}

func newPlayerWatch() *playerWatch {
	return &playerWatch{count: make(map[account.ID]int)}
}

// after runs after each step.
func (w *playerWatch) after() {
	w.steps.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.count)
	for _, rt := range w.rts {
		rt.Owners().Each(func(id ecs.ID, o *zone.Owner) {
			if o.Session != 0 && rt.Simulated(id) {
				w.count[o.Account]++
			}
		})
	}
	for a, n := range w.count {
		if n > 2 && len(w.bad) < 10 {
			w.bad = append(w.bad, fmt.Sprintf("step %d: account %d has %d entities in the world", w.steps.Load(), a, n))
		}
	}
}

// check fails the test if an account ever had more than a master and a
// pet.
func (w *playerWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.bad) > 0 {
		t.Fatalf("two players of one account in the world:\n%s", strings.Join(w.bad, "\n"))
	}
}

// waitSteps waits until the cluster has stepped n more times: the test's
// clock (a step every 5 ms of wall time), not a synchronisation.
func (w *playerWatch) waitSteps(t *testing.T, n uint64) {
	t.Helper()
	if n == 0 {
		return
	}
	until := w.steps.Load() + n
	if !zonetest.Poll(10*time.Second, func() bool { return w.steps.Load() >= until }) {
		t.Fatal("the cluster stopped stepping")
	}
}

// onePlayerCluster is a two-node cluster of the game with a gateway on
// each node, stepped every 5 ms and watched.
type onePlayerCluster struct {
	w     *world
	c     *zonetest.Cluster
	rts   []*zone.Runtime
	urls  []string
	gws   []*gateway.Gateway
	srvs  []*httptest.Server
	watch *playerWatch
}

// startOnePlayer starts the cluster; the world store's saves land
// saveLag steps after the runtime queued them (its loads are at once), so
// that a login can come in between.
func startOnePlayer(t *testing.T, seed, saveLag uint64) *onePlayerCluster {
	t.Helper()
	return startOnePlayerWith(t, 2, seed, saveLag, nil)
}

// startOnePlayerWith is startOnePlayer with wrap, if set, standing between
// each gateway and its world.
func startOnePlayerWith(t *testing.T, nodes int, seed, saveLag uint64, wrap func(gateway.World, *playerWatch) gateway.World) *onePlayerCluster {
	t.Helper()
	w := newWorld(t)
	watch := newPlayerWatch()
	slow := &slowSaves{Memory: w.store, steps: &watch.steps, lag: saveLag}
	c := w.cluster(nodes, game.Config{Seed: seed, NoBots: true}, func(zc *zonetest.Config) {
		zc.Runtime = func(_ int, rc *zone.Config) { rc.WorldStore = slow }
	})
	oc := &onePlayerCluster{w: w, c: c, watch: watch}
	for _, n := range c.Nodes {
		oc.rts = append(oc.rts, n.Runtime)
		g, srv := w.gatewayFor(n.Runtime, directory.NodeID(n.Number), func(gw gateway.World) gateway.World {
			if wrap == nil {
				return gw
			}
			return wrap(gw, watch)
		})
		oc.gws, oc.srvs = append(oc.gws, g), append(oc.srvs, srv)
		oc.urls = append(oc.urls, "ws"+strings.TrimPrefix(srv.URL, "http"))
	}
	oc.watch.rts = oc.rts
	runSteps(t, func() {
		c.Step()
		oc.watch.after()
	})
	return oc
}

// slowSaves is the world store with saves that land lag steps of the
// cluster after they are made: a store under load, on the test's clock.
type slowSaves struct {
	*worldstore.Memory
	steps *atomic.Uint64
	lag   uint64
}

func (s *slowSaves) SavePlayer(ctx context.Context, p worldstore.Player) error {
	until := s.steps.Load() + s.lag
	if !zonetest.Poll(5*time.Second, func() bool { return s.steps.Load() >= until || ctx.Err() != nil }) {
		return errors.New("slowSaves: the cluster stopped stepping")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Memory.SavePlayer(ctx, p)
}

// gatewayFor is serve, returning the gateway and its server (closed at
// cleanup; closing them earlier is fine).
func (w *world) gatewayFor(rt *zone.Runtime, num directory.NodeID, wrap func(gateway.World) gateway.World) (*gateway.Gateway, *httptest.Server) {
	w.t.Helper()
	v, err := logintoken.NewVerifier(logintoken.VerifierConfig{
		Cluster: cluster, Audience: gateway.Audience, Keys: []ed25519.PublicKey{w.pub}, SingleUse: w.dir,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	gw, err := zonegate.World(rt)
	if err != nil {
		w.t.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{Name: rt.Name(), Node: num, Directory: w.dir, Verifier: v, World: wrap(gw), Geometry: rt.Geometry()})
	if err != nil {
		w.t.Fatal(err)
	}
	zonegate.SetGateway(rt, g)
	srv := httptest.NewServer(g)
	w.t.Cleanup(func() {
		_ = g.Close()
		srv.Close()
	})
	return g, srv
}

// A client logs out and logs in again at once, or 1, 5 or 50 ms later,
// on the gateway it left or on the other node's: the player comes back
// where the logout left it (never from an older record), taken over or
// loaded after the logout's save landed, and never twice in the world.
func TestAReloginRightAfterALogoutLosesNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	oc := startOnePlayer(t, 31, 4)
	geo := oc.rts[0].Geometry()
	const a = account.ID(3101)
	home := torus.Pos{X: 1000, Y: 1000}
	oc.w.save(a, home)
	// The delays at the test's clock of 5 ms a step: 0 ms (at once), 1 ms
	// (within the step), 5 ms (one step), 50 ms (ten steps).
	delays := []struct {
		name  string
		steps uint64
	}{{"0ms", 0}, {"1ms", 0}, {"5ms", 1}, {"50ms", 10}}
	// The player stands in zone-0's region. From each gateway to each: the
	// same gateway, the master's node or not, and the other one.
	moves := [][2]int{{0, 0}, {0, 1}, {1, 1}, {1, 0}}
	on := 0
	cl := login(t, ctx, oc.urls[on], oc.w.token(a))
	round := 0
	for _, d := range delays {
		for _, mv := range moves {
			round++
			other := mv[0] != mv[1]
			master, _ := you(cl)
			dest := geo.Translate(home, torus.Pos{X: float64(7 * round), Y: float64(3 * round)})
			if _, err := cl.Move(ctx, master, dest.X, dest.Y); err != nil {
				t.Fatal(err)
			}
			if err := cl.Wait(ctx, func(v *sim.View) bool {
				p, ok := v.Position(master)
				return ok && near(geo, p, dest, 0.5)
			}); err != nil {
				t.Fatalf("round %d: the walk never arrived: %v", round, err)
			}
			if err := cl.Logout(ctx); err != nil {
				t.Fatal(err)
			}
			<-cl.Done()
			oc.watch.waitSteps(t, d.steps)
			on = mv[1]
			next, err := sim.Dial(ctx, oc.urls[on])
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = next.Close() })
			if _, err := next.Login(ctx, oc.w.token(a)); err != nil {
				t.Fatal(err)
			}
			var at torus.Pos
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			defer wcancel()
			if err := next.Wait(wctx, func(v *sim.View) bool {
				m, _ := v.You()
				p, ok := v.Position(m)
				at = p
				return ok
			}); err != nil {
				t.Fatalf("round %d (%s, other gateway %v): the player never appeared: %v", round, d.name, other, err)
			}
			if !near(geo, at, dest, 0.5) {
				t.Fatalf("round %d (%s, other gateway %v): the player came back at %v, the logout left it at %v", round, d.name, other, at, dest)
			}
			cl = next
		}
	}
	oc.watch.check(t)
	var s zone.PlayerStats
	for _, rt := range oc.rts {
		st := stats(rt)
		s.TakenOver += st.TakenOver
		s.Spawned += st.Spawned
		s.AwaitedSaves += st.AwaitedSaves
	}
	t.Logf("%d relogins: %d taken over, %d brought in from the store (%d after waiting for the logout's save)", round, s.TakenOver, s.Spawned-1, s.AwaitedSaves)
}

// lateLeaves passes a displaced session's Leave to the world only 40
// steps late: a gateway that is slow to notice the close, so that the
// world must not rely on the Leave to stop the displaced session.
type lateLeaves struct {
	gateway.World
	watch *playerWatch
	wg    *sync.WaitGroup
}

func (l lateLeaves) Leave(s *gateway.Session) {
	if !s.Superseded() {
		l.World.Leave(s)
		return
	}
	until := l.watch.steps.Load() + 40
	l.wg.Go(func() {
		zonetest.Poll(10*time.Second, func() bool { return l.watch.steps.Load() >= until })
		l.World.Leave(s)
	})
}

// Two logins of one account at the same moment on two nodes, round after
// round: at no tick are there two players of the account in the world.
// The displaced session's Leave comes late, so the world stops it by the
// takeover alone.
func TestRacingLoginsNeverMakeTwoPlayers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	oc := startOnePlayerWith(t, 2, 32, 0, func(gw gateway.World, w *playerWatch) gateway.World {
		return lateLeaves{World: gw, watch: w, wg: &wg}
	})
	t.Cleanup(wg.Wait) // before the cluster stops stepping
	const a = account.ID(3201)
	oc.w.save(a, torus.Pos{X: 1000, Y: 1000})
	owned := func() int { return simulatedOwned(oc.rts, func(x account.ID) bool { return x == a }) }
	for round := range 20 {
		var clients [2]*sim.Client
		var wg sync.WaitGroup
		tokens := [2]string{oc.w.token(a), oc.w.token(a)}
		for i := range 2 {
			cl, err := sim.Dial(ctx, oc.urls[i])
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cl.Close() })
			clients[i] = cl
		}
		for i := range 2 {
			wg.Go(func() { _, _ = clients[i].Login(ctx, tokens[i]) })
		}
		wg.Wait()
		sess, err := oc.w.dir.Lookup(ctx, a)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		first := directory.NodeID(oc.c.Node("zone-0").Number)
		winner, loser := clients[sess.Gateway-first], clients[1-int(sess.Gateway-first)]
		<-loser.Done()
		if err := winner.Wait(ctx, func(v *sim.View) bool {
			m, _ := v.You()
			_, ok := v.Position(m)
			return ok
		}); err != nil {
			t.Fatalf("round %d: the newer session never saw its player: %v", round, err)
		}
		// Long enough for a second player to show: the older session's
		// node brings it in within a few steps of its login.
		oc.watch.waitSteps(t, 20)
		oc.watch.check(t)
		if n := owned(); n != 2 {
			t.Fatalf("round %d: %d entities of the account simulated, want its master and pet", round, n)
		}
		if err := winner.Logout(ctx); err != nil {
			t.Fatal(err)
		}
		<-winner.Done()
		if !zonetest.Poll(20*time.Second, func() bool { return owned() == 0 }) {
			t.Fatalf("round %d: %d entities left after the logout", round, owned())
		}
	}
	oc.watch.check(t)
}

// A player whose gateway's node died (its lease revoked, its gateway
// gone without telling the world) while its master lives on another
// node: a new login on that node, or on a third one, takes the orphaned
// master over rather than bringing in a second one.
func TestALoginTakesOverThePlayerOfADeadGateway(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		nodes int
		on    int // the new login's gateway
	}{{"on the master's node", 2, 1}, {"on a third node", 3, 2}} {
		t.Run(tc.name, func(t *testing.T) { loginAfterADeadGateway(t, tc.nodes, tc.on) })
	}
}

func loginAfterADeadGateway(t *testing.T, nodes, on int) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	oc := startOnePlayerWith(t, nodes, 33, 0, nil)
	geo := oc.rts[0].Geometry()
	// Standing in zone-1's region, logging in at zone-0's gateway.
	var at torus.Pos
	for y := 0.0; ; y += 256 {
		if at = (torus.Pos{X: 1000, Y: y}); oc.rts[0].Table().OwnerOf(at) == "zone-1" {
			break
		}
	}
	const a = account.ID(3301)
	oc.w.save(a, at)
	first := login(t, ctx, oc.urls[0], oc.w.token(a))
	master, pet := you(first)
	dest := geo.Translate(at, torus.Pos{X: 12})
	walkTo(t, ctx, first, geo, master, dest, false)
	// zone-0 dies: its lease is gone, so it simulates and sends nothing
	// more (what its gateway posts is never run), and its gateway's
	// sockets close (releasing the session in the directory: the new
	// login finds no session to displace).
	if err := oc.c.Node("zone-0").Ownership.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-oc.c.Node("zone-0").Ownership.Fenced():
	case <-ctx.Done():
		t.Fatal("zone-0 never noticed its lease was gone")
	}
	_ = oc.gws[0].Close()
	oc.srvs[0].Close()
	<-first.Done()

	next := login(t, ctx, oc.urls[on], oc.w.token(a))
	oc.watch.waitSteps(t, 20)
	oc.watch.check(t)
	if err := next.Wait(ctx, func(v *sim.View) bool {
		m, p := v.You()
		return m == master && p == pet
	}); err != nil {
		m, p := you(next)
		t.Fatalf("the new session has %d/%d, want the orphaned player %d/%d taken over: %v", m, p, master, pet, err)
	}
	back := geo.Translate(dest, torus.Pos{X: -6})
	if _, err := next.Move(ctx, master, back.X, back.Y); err != nil {
		t.Fatal(err)
	}
	if err := next.Wait(ctx, func(v *sim.View) bool {
		p, ok := v.Position(master)
		return ok && near(geo, p, back, 0.5)
	}); err != nil {
		t.Fatalf("the new session cannot walk the player: %v", err)
	}
	oc.watch.waitSteps(t, 20)
	oc.watch.check(t)
}
