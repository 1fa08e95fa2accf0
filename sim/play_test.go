package sim_test

import (
	"context"
	"crypto/ed25519"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

const cluster = "sim-test"

// world is the shared part of a test cluster: a directory, a token issuer
// and a world store.
type world struct {
	t      *testing.T
	dir    directory.Directory
	pub    ed25519.PublicKey
	issuer *logintoken.Issuer
	store  *worldstore.Memory
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dir, err := directory.NewMemory(directory.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: cluster, Key: priv})
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, dir: dir, pub: pub, issuer: iss, store: worldstore.NewMemory(nil)}
}

func (w *world) token(a account.ID) string {
	w.t.Helper()
	tok, _, err := w.issuer.Issue(a, gateway.Audience)
	if err != nil {
		w.t.Fatal(err)
	}
	return tok
}

// serve runs a gateway for rt (node number num) and returns its URL.
func (w *world) serve(rt *zone.Runtime, num directory.NodeID) string {
	w.t.Helper()
	v, err := logintoken.NewVerifier(logintoken.VerifierConfig{
		Cluster: cluster, Audience: gateway.Audience, Keys: []ed25519.PublicKey{w.pub}, SingleUse: w.dir,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	gw, err := rt.GatewayWorld()
	if err != nil {
		w.t.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{Name: rt.Name(), Node: num, Directory: w.dir, Verifier: v, World: gw, Geometry: rt.Geometry()})
	if err != nil {
		w.t.Fatal(err)
	}
	rt.SetGateway(g)
	srv := httptest.NewServer(g)
	w.t.Cleanup(func() {
		_ = g.Close()
		srv.Close()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// save stores a player at pos, as an earlier session left it.
func (w *world) save(a account.ID, pos torus.Pos) {
	w.t.Helper()
	if err := w.store.SavePlayer(context.Background(), worldstore.Player{Account: a, Epoch: 1, Pos: pos}); err != nil {
		w.t.Fatal(err)
	}
}

// step runs step every few milliseconds on its own goroutine until the
// test ends: the world's clock, not a synchronisation (tests wait on what
// clients see).
func step(t *testing.T, step func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				step()
			}
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
}

func login(t *testing.T, ctx context.Context, url, token string) *sim.Client {
	t.Helper()
	c, err := sim.Dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Login(ctx, token); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx, func(v *sim.View) bool {
		m, _ := v.You()
		_, ok := v.Position(m)
		return ok
	}); err != nil {
		t.Fatalf("the player's master never appeared: %v", err)
	}
	return c
}

func you(c *sim.Client) (master, pet uint64) {
	c.Look(func(v *sim.View) { master, pet = v.You() })
	return
}

// stats reads a runtime's player counters on its world goroutine.
func stats(rt *zone.Runtime) zone.PlayerStats {
	ch := make(chan zone.PlayerStats, 1)
	rt.Post(func() { ch <- rt.PlayerStats() })
	return <-ch
}

func near(geo torus.World, a, b torus.Pos, d float64) bool { return geo.Distance(a, b) <= d }

// On one node: a client logs in, sees its master and pet, walks, sees only
// its own experience, cannot command another player, logs out (saved)
// and comes back where it left.
func TestPlayOnOneNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := newWorld(t)
	g, err := game.NewModule(game.Config{Seed: 3, NoBots: true})
	if err != nil {
		t.Fatal(err)
	}
	rc := g.Config().RuntimeConfig()
	rc.WorldStore = w.store
	rt, err := zone.New(rc, g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	geo := rt.Geometry()
	home := torus.Pos{X: 3000, Y: 3000}
	w.save(1001, home)
	w.save(1002, geo.Translate(home, torus.Pos{X: 8}))
	url := w.serve(rt, 0)
	step(t, func() { rt.Step() })

	one := login(t, ctx, url, w.token(1001))
	two := login(t, ctx, url, w.token(1002))
	m1, p1 := you(one)
	m2, _ := you(two)
	if m1 == 0 || p1 == 0 || m1 == m2 {
		t.Fatalf("masters %d and %d, pet %d", m1, m2, p1)
	}
	var start torus.Pos
	one.Look(func(v *sim.View) { start, _ = v.Position(m1) })
	if !near(geo, start, home, 1) {
		t.Fatalf("logged in at %v, saved at %v", start, home)
	}

	// Walk 30 m east; both clients see it.
	dest := geo.Translate(home, torus.Pos{X: 30})
	if _, err := one.Move(ctx, m1, dest.X, dest.Y); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*sim.Client{one, two} {
		if err := c.Wait(ctx, func(v *sim.View) bool {
			p, ok := v.Position(m1)
			return ok && near(geo, p, dest, 1)
		}); err != nil {
			t.Fatalf("the walk never arrived: %v", err)
		}
	}
	// Someone else's master: refused, nothing moves.
	seq, err := one.Move(ctx, m2, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := one.Wait(ctx, func(v *sim.View) bool {
		for _, e := range v.Errors() {
			if e.InputSeq == seq && e.Code == gateway.CodeNotYours {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	// Experience is owner only.
	one.Look(func(v *sim.View) {
		if e, ok := v.Entity(m1); !ok || e.Components[game.WireExp] == nil {
			t.Error("the owner was not sent its experience")
		}
	})
	two.Look(func(v *sim.View) {
		if e, ok := v.Entity(m1); !ok || e.Components[game.WireExp] != nil {
			t.Errorf("another player sees the master (%v) with its experience", ok)
		}
	})

	// Log out: saved where it stood; log back in there.
	var ws directory.Epoch
	if err := one.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	<-one.Done()
	zonetest.Poll(10*time.Second, func() bool {
		p, err := w.store.LoadPlayer(ctx, 1001)
		ws = directory.Epoch(p.Epoch)
		return err == nil && p.Epoch > 1 && near(geo, p.Pos, dest, 1)
	})
	if ws <= 1 {
		t.Fatal("the logout was not saved")
	}
	again := login(t, ctx, url, w.token(1001))
	m3, _ := you(again)
	again.Look(func(v *sim.View) {
		if p, _ := v.Position(m3); !near(geo, p, dest, 1) {
			t.Errorf("back at %v, left at %v", p, dest)
		}
	})
	for _, c := range []*sim.Client{one, two, again} {
		c.Look(func(v *sim.View) {
			if s := v.Stats(); s.Blinks != 0 || s.OutOfOrder != 0 {
				t.Errorf("client saw %+v", s)
			}
		})
	}
}

// Across two nodes: a client connects to zone-0 while its player stands in
// zone-1's region; the player is brought in there, seen through its ghost,
// walks over the border into zone-0's region (a handoff) with no blink and
// one socket, logs out (saved by whichever node simulates it), and logs in
// again on zone-1's gateway where it left.
func TestPlayAcrossTwoNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := newWorld(t)
	grid := cells.GridConfig{RegionEdge: 2048}
	grid.World.Width, grid.World.Height = 8192, 8192
	gc := game.Config{Seed: 5, NoBots: true, Torus: grid.World, RegionEdge: 2048}
	c := zonetest.Start(t, zonetest.Config{
		Nodes: 2, Grid: grid,
		Module:  func(int, string) (zone.Module, error) { return game.NewModule(gc) },
		Runtime: func(_ int, rc *zone.Config) { rc.WorldStore = w.store },
	})
	zero, one := c.Node("zone-0").Runtime, c.Node("zone-1").Runtime
	geo := zero.Geometry()
	table := zero.Table()
	// A point in zone-1's region 60 m from zone-0's, and one 250 m past
	// the border on zone-0's side.
	var start, dest torus.Pos
	for y := 0.0; y < geo.Height(); y += 10 {
		p, q := torus.Pos{X: 1000, Y: y}, torus.Pos{X: 1000, Y: y - 310}
		if table.OwnerOf(p) == "zone-1" && table.OwnerOf(q) == "zone-0" && table.OwnerOf(torus.Pos{X: 1000, Y: y - 60}) == "zone-0" {
			start, dest = torus.Pos{X: 1000, Y: y + 0}, geo.Normalise(q)
			break
		}
	}
	if table.OwnerOf(start) != "zone-1" {
		t.Fatalf("no border found in %v", table)
	}
	w.save(3001, start)
	url0 := w.serve(zero, directory.NodeID(c.Node("zone-0").Number))
	url1 := w.serve(one, directory.NodeID(c.Node("zone-1").Number))
	step(t, c.Step)

	cl := login(t, ctx, url0, w.token(3001))
	master, _ := you(cl)
	if s0, s1 := stats(zero), stats(one); s0.Joined != 1 || s0.Spawned != 0 || s1.Spawned != 1 {
		t.Fatalf("zone-0 %+v, zone-1 %+v: want the session on zone-0 and the player on zone-1", s0, s1)
	}
	if _, err := cl.Move(ctx, master, dest.X, dest.Y); err != nil {
		t.Fatal(err)
	}
	if err := cl.Wait(ctx, func(v *sim.View) bool {
		p, ok := v.Position(master)
		return ok && near(geo, p, dest, 1)
	}); err != nil {
		t.Fatalf("the walk over the border never arrived: %v", err)
	}
	if err := cl.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	<-cl.Done()
	if !zonetest.Poll(10*time.Second, func() bool {
		p, err := w.store.LoadPlayer(ctx, 3001)
		return err == nil && p.Epoch > 1 && near(geo, p.Pos, dest, 1)
	}) {
		p, err := w.store.LoadPlayer(ctx, 3001)
		t.Fatalf("saved %+v %v, want at %v", p, err, dest)
	}
	back := login(t, ctx, url1, w.token(3001))
	m2, _ := you(back)
	back.Look(func(v *sim.View) {
		if p, _ := v.Position(m2); !near(geo, p, dest, 1) {
			t.Errorf("back at %v, left at %v", p, dest)
		}
	})
	cl.Look(func(v *sim.View) {
		if s := v.Stats(); s.Blinks != 0 || s.OutOfOrder != 0 {
			t.Errorf("the walking client saw %+v", s)
		}
		for _, e := range v.Errors() {
			t.Errorf("error %v", e)
		}
	})
	st := zero.HandoffStats().Plus(one.HandoffStats())
	if st.Acked == 0 {
		t.Errorf("no handoff: %+v", st)
	}
}

// A second login of an account takes its player over, on the same gateway
// and on another: the older socket is told and closed, the player is the
// same entity (never a second one), the newer session commands it, and
// the older session's teardown changes nothing.
func TestASecondLoginTakesThePlayerOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := newWorld(t)
	grid := cells.GridConfig{RegionEdge: 2048}
	grid.World.Width, grid.World.Height = 8192, 8192
	gc := game.Config{Seed: 7, NoBots: true, Torus: grid.World, RegionEdge: 2048}
	c := zonetest.Start(t, zonetest.Config{
		Nodes: 2, Grid: grid,
		Module:  func(int, string) (zone.Module, error) { return game.NewModule(gc) },
		Runtime: func(_ int, rc *zone.Config) { rc.WorldStore = w.store },
	})
	zero, one := c.Node("zone-0").Runtime, c.Node("zone-1").Runtime
	geo := zero.Geometry()
	home := torus.Pos{X: 1000, Y: 1000}
	w.save(5001, home)
	urls := []string{
		w.serve(zero, directory.NodeID(c.Node("zone-0").Number)),
		w.serve(one, directory.NodeID(c.Node("zone-1").Number)),
	}
	step(t, c.Step)

	first := login(t, ctx, urls[0], w.token(5001))
	master, pet := you(first)
	for i, url := range []string{urls[0], urls[1]} { // the same gateway, then the other
		next := login(t, ctx, url, w.token(5001))
		if err := first.Wait(ctx, func(*sim.View) bool { return false }); err == nil {
			t.Fatal("the displaced socket stayed open")
		}
		if code, reason, _ := first.Closed(); code != gateway.StatusDisplaced || reason != gateway.CodeDisplaced {
			t.Fatalf("round %d: the older socket closed %d %q", i, code, reason)
		}
		if err := next.Wait(ctx, func(v *sim.View) bool {
			m, p := v.You()
			return m == master && p == pet
		}); err != nil {
			m, p := you(next)
			t.Fatalf("round %d: the new session has %d/%d, want the player %d/%d taken over: %v", i, m, p, master, pet, err)
		}
		dest := geo.Translate(home, torus.Pos{X: float64(20 * (i + 1))})
		if _, err := next.Move(ctx, master, dest.X, dest.Y); err != nil {
			t.Fatal(err)
		}
		if err := next.Wait(ctx, func(v *sim.View) bool {
			p, ok := v.Position(master)
			return ok && near(geo, p, dest, 1)
		}); err != nil {
			t.Fatalf("round %d: the new session cannot walk the player: %v", i, err)
		}
		first = next
	}
	s0, s1 := stats(zero), stats(one)
	if s0.Spawned+s1.Spawned != 1 || s0.TakenOver+s1.TakenOver != 2 || s0.Removed+s1.Removed != 0 {
		t.Fatalf("zone-0 %+v, zone-1 %+v: want one player, taken over twice, never removed", s0, s1)
	}
}
