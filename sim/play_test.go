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
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/proto/clientpb"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/terrain"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonegate"
	"github.com/shardwise/shardwise/zone/zonetest"
)

const cluster = "sim-test"

// world is the shared part of a test cluster: a directory, a token issuer
// and a world store.
type world struct {
	t      testing.TB
	dir    directory.Directory
	pub    ed25519.PublicKey
	issuer *logintoken.Issuer
	store  *worldstore.Memory
}

func newWorld(t testing.TB) *world {
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
	return w.serveWith(rt, num, gateway.Limits{})
}

func (w *world) serveWith(rt *zone.Runtime, num directory.NodeID, limits gateway.Limits) string {
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
	g, err := gateway.New(gateway.Config{Name: rt.Name(), Node: num, Directory: w.dir, Verifier: v, World: gw, Geometry: rt.Geometry(), Limits: limits})
	if err != nil {
		w.t.Fatal(err)
	}
	zonegate.SetGateway(rt, g)
	srv := httptest.NewServer(g)
	w.t.Cleanup(func() {
		_ = g.Close()
		srv.Close()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// cluster starts nodes zone nodes of the reference game gc over an 8 km
// torus of 2 km regions — zone-0 owning the rows south of y = 4096 when
// there are two — keeping players in the world's store; mod adjusts the
// zonetest configuration.
func (w *world) cluster(nodes int, gc game.Config, mod func(*zonetest.Config)) *zonetest.Cluster {
	w.t.Helper()
	grid := cells.GridConfig{RegionEdge: 2048}
	grid.World.Width, grid.World.Height = 8192, 8192
	gc.Torus, gc.RegionEdge = grid.World, 2048
	cfg := zonetest.Config{
		Nodes: nodes, Grid: grid,
		Module:  func(int, string) (zone.Module, error) { return game.NewModule(gc) },
		Runtime: func(_ int, rc *zone.Config) { rc.WorldStore = w.store },
	}
	if mod != nil {
		mod(&cfg)
	}
	return zonetest.Start(w.t, cfg)
}

// save stores a player at pos, as an earlier session left it.
func (w *world) save(a account.ID, pos torus.Pos) {
	w.t.Helper()
	if err := w.store.SavePlayer(context.Background(), worldstore.Player{Account: a, Epoch: 1, Pos: pos}); err != nil {
		w.t.Fatal(err)
	}
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

// simulatedOwned counts the entities the runtimes simulate whose owner
// matches, each read on its world goroutine.
func simulatedOwned(rts []*zone.Runtime, match func(account.ID) bool) int {
	n := 0
	for _, rt := range rts {
		ch := make(chan int, 1)
		rt.Post(func() {
			k := 0
			rt.Owners().Each(func(id ecs.ID, o *zone.Owner) {
				if match(o.Account) && rt.Simulated(id) {
					k++
				}
			})
			ch <- k
		})
		n += <-ch
	}
	return n
}

// stats reads a runtime's player counters on its world goroutine.
func stats(rt *zone.Runtime) zone.PlayerStats {
	ch := make(chan zone.PlayerStats, 1)
	rt.Post(func() { ch <- rt.PlayerStats() })
	return <-ch
}

func near(geo torus.World, a, b torus.Pos, d float64) bool { return geo.Distance(a, b) <= d }

// walkTo moves master to dest and waits until c shows it there and, with
// credential, until c holds a resume credential.
func walkTo(t *testing.T, ctx context.Context, c *sim.Client, geo torus.World, master uint64, dest torus.Pos, credential bool) {
	t.Helper()
	if _, err := c.Move(ctx, master, dest.X, dest.Y); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx, func(v *sim.View) bool {
		p, ok := v.Position(master)
		return ok && near(geo, p, dest, 0.5) && (!credential || v.Credential() != "")
	}); err != nil {
		if credential {
			t.Fatalf("the walk never arrived, or no credential: %v", err)
		}
		t.Fatalf("the walk never arrived: %v", err)
	}
}

// On one node: a client logs in, sees its master and pet, walks, sees only
// its own experience, cannot command another player, logs out (saved)
// and comes back where it left.
func TestPlayOnOneNode(t *testing.T) {
	t.Parallel()
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
	runSteps(t, func() { rt.Step() })

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
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := newWorld(t)
	c := w.cluster(2, game.Config{Seed: 5, NoBots: true}, nil)
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
	runSteps(t, c.Step)

	cl := login(t, ctx, url0, w.token(3001))
	master, _ := you(cl)
	if s0, s1 := stats(zero), stats(one); s0.Joined != 1 || s0.Spawned != 0 || s1.Spawned != 1 {
		t.Fatalf("zone-0 %+v, zone-1 %+v: want the session on zone-0 and the player on zone-1", s0, s1)
	}
	// Experience is the owner's alone, from the node that simulates the
	// master: forwarded to the owner's gateway, not to another player
	// watching from the simulating node's own gateway.
	w.save(3002, geo.Translate(start, torus.Pos{X: 6}))
	watcher := login(t, ctx, url1, w.token(3002))
	if err := cl.Wait(ctx, func(v *sim.View) bool {
		e, ok := v.Entity(master)
		return ok && e.Components[game.WireExp] != nil
	}); err != nil {
		t.Fatalf("the owner never got its experience from the remote node: %v", err)
	}
	if err := watcher.Wait(ctx, func(v *sim.View) bool { _, ok := v.Position(master); return ok }); err != nil {
		t.Fatalf("the watcher never saw the master: %v", err)
	}
	watcher.Look(func(v *sim.View) {
		if e, _ := v.Entity(master); e.Components[game.WireExp] != nil {
			t.Error("another player was sent the master's experience")
		}
	})
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
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := newWorld(t)
	c := w.cluster(2, game.Config{Seed: 7, NoBots: true}, nil)
	zero, one := c.Node("zone-0").Runtime, c.Node("zone-1").Runtime
	geo := zero.Geometry()
	home := torus.Pos{X: 1000, Y: 1000}
	w.save(5001, home)
	urls := []string{
		w.serve(zero, directory.NodeID(c.Node("zone-0").Number)),
		w.serve(one, directory.NodeID(c.Node("zone-1").Number)),
	}
	runSteps(t, c.Step)

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

// The ground: a client gets base + edits for the columns of its view; a
// marker one player places reaches the client of another player on
// another gateway that holds the column, and a later login reads it from
// the store.
func TestTerrainAndMarkersAcrossGateways(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := newWorld(t)
	const seed = 77
	c := w.cluster(2, game.Config{Seed: 9, NoBots: true}, func(cfg *zonetest.Config) {
		cfg.Runtime = func(_ int, rc *zone.Config) { rc.WorldStore, rc.WorldSeed = w.store, seed }
	})
	zero, one := c.Node("zone-0").Runtime, c.Node("zone-1").Runtime
	geo := zero.Geometry()
	home := torus.Pos{X: 1000, Y: 1000} // zone-0's
	w.save(6001, home)
	w.save(6002, geo.Translate(home, torus.Pos{X: 5, Y: 5}))
	url0 := w.serve(zero, directory.NodeID(c.Node("zone-0").Number))
	url1 := w.serve(one, directory.NodeID(c.Node("zone-1").Number))
	runSteps(t, c.Step)

	gen, err := terrain.New(seed, geo)
	if err != nil {
		t.Fatal(err)
	}
	under := geo.ChunkOf(home)
	column := func(v *sim.View) (terrain.Chunk, bool) {
		b, ok := v.Terrain(under.X, under.Y)
		if !ok {
			return terrain.Chunk{}, false
		}
		ch, err := terrain.DecodeChunk(b)
		if err != nil {
			t.Errorf("undecodable terrain: %v", err)
		}
		return ch, err == nil
	}
	a := login(t, ctx, url0, w.token(6001))
	b := login(t, ctx, url1, w.token(6002))
	for _, cl := range []*sim.Client{a, b} {
		if err := cl.Wait(ctx, func(v *sim.View) bool { _, ok := column(v); return ok }); err != nil {
			t.Fatalf("no terrain for the column under the player: %v", err)
		}
		cl.Look(func(v *sim.View) {
			ch, _ := column(v)
			if ch.Heights != gen.Base(under) || ch.Revision != 0 || len(ch.Edits) != 0 {
				t.Errorf("column %v: revision %d, %d edits, base equal: %v", under, ch.Revision, len(ch.Edits), ch.Heights == gen.Base(under))
			}
			n := 0
			for x := range int32(geo.ChunksX()) {
				for y := range int32(geo.ChunksY()) {
					if _, ok := v.Terrain(x, y); ok {
						n++
					}
				}
			}
			if n < 9 {
				t.Errorf("terrain for %d columns, want the view's", n)
			}
		})
	}
	master, _ := you(a)
	if _, err := a.Input(ctx, &clientpb.Input{Entity: master, Kind: game.InputMark, Point: &clientpb.Point{X: home.X + 1, Y: home.Y + 1}, Target: 7}); err != nil {
		t.Fatal(err)
	}
	marked := func(v *sim.View) bool {
		ch, ok := column(v)
		if !ok || ch.Revision != 1 || len(ch.Edits) != 1 {
			return false
		}
		s, err := terrain.Apply(ch.Heights, ch.Edits)
		if err != nil {
			t.Error(err)
			return false
		}
		for _, m := range s.Markers {
			if m == 7 {
				return true
			}
		}
		return false
	}
	for i, cl := range []*sim.Client{a, b} {
		if err := cl.Wait(ctx, marked); err != nil {
			t.Fatalf("client %d never saw the marker: %v", i, err)
		}
	}
	w.save(6004, home)
	again := login(t, ctx, url1, w.token(6004))
	if err := again.Wait(ctx, marked); err != nil {
		t.Fatalf("a later login never got the stored marker: %v", err)
	}
}

// A player walks over three regions of three nodes (a corner where they
// meet) while its client keeps sending inputs: one socket, no blink, and
// every input applied exactly once, by whichever node simulated the
// master when it arrived.
func TestInputsAcrossThreeRegionsAreAppliedOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	w := newWorld(t)
	c := w.cluster(3, game.Config{Seed: 11, NoBots: true}, func(cfg *zonetest.Config) {
		// Around (2048, 2048): zone-0 south-west, zone-1 south-east and
		// north-west, zone-2 north-east.
		cfg.Table = func(g cells.Grid, names []string) (*cells.Table, error) {
			owners := make([]string, g.Cols()*g.Cols())
			for i := range owners {
				col, row := g.Coords(cells.RegionID(i))
				owners[i] = names[(col+row)%3]
			}
			return cells.NewTable(g, 1, owners)
		}
	})
	rts := []*zone.Runtime{c.Node("zone-0").Runtime, c.Node("zone-1").Runtime, c.Node("zone-2").Runtime}
	geo := rts[0].Geometry()
	table := rts[0].Table()
	route := []torus.Pos{{X: 2000, Y: 2000}, {X: 2110, Y: 2000}, {X: 2110, Y: 2110}}
	for i, want := range []string{"zone-0", "zone-1", "zone-2"} {
		if got := table.OwnerOf(route[i]); got != want {
			t.Fatalf("waypoint %d %v is %s's, want %s's", i, route[i], got, want)
		}
	}
	w.save(7001, route[0])
	// The world runs at 200 ticks a second here, and the client sends an
	// input every other batch: the rate limit is not the subject.
	url := w.serveWith(rts[0], directory.NodeID(c.Node("zone-0").Number), gateway.Limits{InputRate: 1000, InputBurst: 1000})
	runSteps(t, c.Step)

	cl := login(t, ctx, url, w.token(7001))
	master, _ := you(cl)
	sent := 0
	for _, wp := range route[1:] {
		for {
			var p torus.Pos
			cl.Look(func(v *sim.View) { p, _ = v.Position(master) })
			if near(geo, p, wp, 1) {
				break
			}
			if _, err := cl.Move(ctx, master, wp.X, wp.Y); err != nil {
				t.Fatal(err)
			}
			sent++
			// One input every other batch: the client paces itself on what
			// it is told.
			var batches int
			cl.Look(func(v *sim.View) { batches = v.Stats().Batches })
			if err := cl.Wait(ctx, func(v *sim.View) bool { return v.Stats().Batches >= batches+2 }); err != nil {
				t.Fatal(err)
			}
		}
	}
	applied := func() (n, stale int) {
		for _, rt := range rts {
			s := stats(rt)
			n += s.Inputs
			stale += s.StaleSession
		}
		return n, stale
	}
	zonetest.Poll(10*time.Second, func() bool { n, _ := applied(); return n >= sent })
	n, stale := applied()
	if n != sent || stale != 0 {
		for _, rt := range rts {
			ch := make(chan zone.ClusterStats, 1)
			rt.Post(func() { ch <- rt.ClusterStats() })
			cs := <-ch
			t.Logf("%s: %+v; %+v", rt.Name(), stats(rt), cs)
		}
		cl.Look(func(v *sim.View) {
			for _, e := range v.Errors() {
				t.Logf("error %v", e)
			}
		})
		t.Fatalf("%d inputs sent, %d applied, %d stale", sent, n, stale)
	}
	var hs zone.HandoffStats
	for _, rt := range rts {
		hs = hs.Plus(rt.HandoffStats())
	}
	if hs.Acked < 2 {
		t.Fatalf("handoffs %+v, want the master handed over twice at least", hs)
	}
	cl.Look(func(v *sim.View) {
		if s := v.Stats(); s.Blinks != 0 || s.OutOfOrder != 0 {
			t.Errorf("the client saw %+v", s)
		}
		for _, e := range v.Errors() {
			t.Errorf("error %v", e)
		}
	})
	select {
	case <-cl.Done():
		t.Fatal("the socket closed")
	default:
	}
	t.Logf("%d inputs over %d handoffs, each applied once", sent, hs.Acked)
}

// Two logins of one account race on two nodes, round after round: in the
// end exactly one socket is open, the one of the newer session, and the
// world holds exactly one player of the account, which that session
// commands.
func TestLoginsRacingOnTwoNodesLeaveOnePlayer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	w := newWorld(t)
	c := w.cluster(2, game.Config{Seed: 13, NoBots: true}, nil)
	rts := []*zone.Runtime{c.Node("zone-0").Runtime, c.Node("zone-1").Runtime}
	geo := rts[0].Geometry()
	home := torus.Pos{X: 1000, Y: 1000}
	w.save(8001, home)
	urls := []string{
		w.serve(rts[0], directory.NodeID(c.Node("zone-0").Number)),
		w.serve(rts[1], directory.NodeID(c.Node("zone-1").Number)),
	}
	runSteps(t, c.Step)
	owned := func() int { return simulatedOwned(rts, func(a account.ID) bool { return a == 8001 }) }
	for round := range 4 {
		var clients [2]*sim.Client
		var wg sync.WaitGroup
		tokens := [2]string{w.token(8001), w.token(8001)}
		for i := range 2 {
			cl, err := sim.Dial(ctx, urls[i])
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cl.Close() })
			clients[i] = cl
			wg.Go(func() { _, _ = cl.Login(ctx, tokens[i]) })
		}
		wg.Wait()
		sess, err := w.dir.Lookup(ctx, 8001)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		winner := clients[sess.Gateway-directory.NodeID(c.Node("zone-0").Number)]
		loser := clients[1-int(sess.Gateway-directory.NodeID(c.Node("zone-0").Number))]
		select {
		case <-loser.Done():
		case <-ctx.Done():
			t.Fatalf("round %d: the older login's socket stayed open", round)
		}
		if err := winner.Wait(ctx, func(v *sim.View) bool {
			m, _ := v.You()
			_, ok := v.Position(m)
			return ok
		}); err != nil {
			t.Fatalf("round %d: the newer session never saw its player: %v", round, err)
		}
		if !zonetest.Poll(20*time.Second, func() bool { return owned() == 2 }) {
			t.Fatalf("round %d: %d entities of the account simulated, want its master and pet", round, owned())
		}
		master, _ := you(winner)
		dest := geo.Translate(home, torus.Pos{X: float64(10 * (round + 1))})
		if _, err := winner.Move(ctx, master, dest.X, dest.Y); err != nil {
			t.Fatal(err)
		}
		if err := winner.Wait(ctx, func(v *sim.View) bool {
			p, ok := v.Position(master)
			return ok && near(geo, p, dest, 1)
		}); err != nil {
			t.Fatalf("round %d: the newer session cannot walk its player: %v", round, err)
		}
		if err := winner.Logout(ctx); err != nil {
			t.Fatal(err)
		}
		<-winner.Done()
		if !zonetest.Poll(20*time.Second, func() bool { return owned() == 0 }) {
			t.Fatalf("round %d: %d entities left after the logout", round, owned())
		}
		if !zonetest.Poll(20*time.Second, func() bool {
			p, err := w.store.LoadPlayer(ctx, 8001)
			return err == nil && near(geo, p.Pos, dest, 1)
		}) {
			t.Fatalf("round %d: the logout's save never landed", round)
		}
	}
}

// A client that logs out the moment its player is named, before its
// gateway has seen the player it had brought in on another node, leaves no
// player behind.
func TestALogoutAtOnceLeavesNoPlayerBehind(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := newWorld(t)
	c := w.cluster(2, game.Config{Seed: 15, NoBots: true}, nil)
	rts := []*zone.Runtime{c.Node("zone-0").Runtime, c.Node("zone-1").Runtime}
	// Standing in zone-1's region, logging in at zone-0's gateway.
	var at torus.Pos
	for y := 0.0; ; y += 256 {
		if at = (torus.Pos{X: 1000, Y: y}); rts[0].Table().OwnerOf(at) == "zone-1" {
			break
		}
	}
	url := w.serve(rts[0], directory.NodeID(c.Node("zone-0").Number))
	runSteps(t, c.Step)
	for i := range 5 {
		a := account.ID(9001 + i)
		w.save(a, at)
		cl, err := sim.Dial(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Login(ctx, w.token(a)); err != nil {
			t.Fatal(err)
		}
		// At once once the gateway names the player (it has asked zone-1
		// to bring it in; nothing of it has come back yet).
		if err := cl.Wait(ctx, func(v *sim.View) bool { m, _ := v.You(); return m != 0 }); err != nil {
			t.Fatal(err)
		}
		if err := cl.Logout(ctx); err != nil {
			t.Fatal(err)
		}
		<-cl.Done()
		_ = cl.Close()
	}
	owned := func() int { return simulatedOwned(rts, func(a account.ID) bool { return a > 9000 }) }
	spawned := func() int { return stats(rts[0]).Spawned + stats(rts[1]).Spawned }
	if !zonetest.Poll(20*time.Second, func() bool { return spawned() == 5 && owned() == 0 }) {
		t.Fatalf("%d players brought in, %d of their entities still simulated after their logouts", spawned(), owned())
	}
}
