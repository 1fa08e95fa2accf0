package zonegate_test

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
	"github.com/shardwise/shardwise/proto/clientpb"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonegate"
	"github.com/shardwise/shardwise/zone/zonetest"
)

const clusterID = "zonegate-test"

// cluster is two zone nodes of the reference game on the in-memory
// network, each with a gateway served by zonegate, sharing a directory
// and a world store, stepped every few milliseconds until cleanup.
type cluster struct {
	t      *testing.T
	c      *zonetest.Cluster
	store  *worldstore.Memory
	issuer *logintoken.Issuer
	urls   []string
}

func start(t *testing.T) *cluster {
	t.Helper()
	dir, err := directory.NewMemory(directory.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: clusterID, Key: priv})
	if err != nil {
		t.Fatal(err)
	}
	cl := &cluster{t: t, store: worldstore.NewMemory(nil), issuer: iss}
	grid := cells.GridConfig{RegionEdge: 2048}
	grid.World.Width, grid.World.Height = 8192, 8192
	gc := game.Config{Seed: 5, NoBots: true, Torus: grid.World, RegionEdge: grid.RegionEdge}
	cl.c = zonetest.Start(t, zonetest.Config{
		Nodes: 2, Memory: true, Grid: grid,
		Module:  func(int, string) (zone.Module, error) { return game.NewModule(gc) },
		Runtime: func(_ int, rc *zone.Config) { rc.WorldStore = cl.store },
	})
	for _, n := range cl.c.Nodes {
		world, err := zonegate.World(n.Runtime)
		if err != nil {
			t.Fatal(err)
		}
		v, err := logintoken.NewVerifier(logintoken.VerifierConfig{
			Cluster: clusterID, Audience: gateway.Audience, Keys: []ed25519.PublicKey{pub}, SingleUse: dir,
		})
		if err != nil {
			t.Fatal(err)
		}
		// No lease renewal within a test: a displaced socket on another
		// node closes only because its runtime tells its gateway
		// (SetGateway), never at a renewal that finds a newer epoch.
		g, err := gateway.New(gateway.Config{
			Name: n.Name, Node: directory.NodeID(n.Number), Directory: dir, Verifier: v, World: world,
			Geometry: n.Runtime.Geometry(), RenewEvery: time.Hour, ResumeWindow: 2 * time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		zonegate.SetGateway(n.Runtime, g)
		srv := httptest.NewServer(g)
		t.Cleanup(func() {
			_ = g.Close()
			srv.Close()
		})
		cl.urls = append(cl.urls, "ws"+strings.TrimPrefix(srv.URL, "http"))
	}
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
				cl.c.Step()
			}
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
	return cl
}

// login logs a in on node i's gateway and waits for its master to show.
func (cl *cluster) login(ctx context.Context, i int, a account.ID) *sim.Client {
	cl.t.Helper()
	tok, _, err := cl.issuer.Issue(a, gateway.Audience)
	if err != nil {
		cl.t.Fatal(err)
	}
	c, err := sim.Dial(ctx, cl.urls[i])
	if err != nil {
		cl.t.Fatal(err)
	}
	cl.t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Login(ctx, tok); err != nil {
		cl.t.Fatal(err)
	}
	if err := c.Wait(ctx, func(v *sim.View) bool {
		m, _ := v.You()
		_, ok := v.Position(m)
		return ok
	}); err != nil {
		cl.t.Fatalf("the player's master never appeared: %v", err)
	}
	return c
}

func you(c *sim.Client) (master, pet uint64) {
	c.Look(func(v *sim.View) { master, pet = v.You() })
	return
}

// Through World: a login brings the stored player in (SetYou reaches the
// client), an input the game refuses is answered GATEWAY.BAD_INPUT, a walk
// is applied, and a logout saves the player where it stood under the
// session's epoch and takes it out. Each of the session's calls reaches
// the runtime as the same session: an adapter that differed between them
// would drop the walk and the logout.
func TestAPlayerPlaysThroughTheWorld(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := start(t)
	rt := cl.c.Node("zone-0").Runtime
	geo := rt.Geometry()
	home := torus.Pos{X: 1000, Y: 1000}
	if err := cl.store.SavePlayer(ctx, worldstore.Player{Account: 7001, Epoch: 1, Pos: home}); err != nil {
		t.Fatal(err)
	}
	c := cl.login(ctx, 0, 7001)
	master, pet := you(c)
	if master == 0 || pet == 0 {
		t.Fatalf("SetYou named master %d, pet %d", master, pet)
	}

	seq, err := c.Input(ctx, &clientpb.Input{Entity: master, Kind: 999})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx, func(v *sim.View) bool {
		for _, e := range v.Errors() {
			if e.InputSeq == seq && e.Code == gateway.CodeBadInput {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("an input of unknown kind was not refused as %s: %v", gateway.CodeBadInput, err)
	}

	dest := geo.Translate(home, torus.Pos{X: 25})
	if _, err := c.Move(ctx, master, dest.X, dest.Y); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx, func(v *sim.View) bool {
		p, ok := v.Position(master)
		return ok && geo.Distance(p, dest) <= 1
	}); err != nil {
		t.Fatalf("the walk never arrived: %v", err)
	}

	if err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	var saved worldstore.Player
	if !zonetest.Poll(20*time.Second, func() bool {
		p, err := cl.store.LoadPlayer(ctx, 7001)
		saved = p
		return err == nil && p.Epoch > 1
	}) {
		t.Fatalf("the logout was not saved: the store holds %+v", saved)
	}
	if geo.Distance(saved.Pos, dest) > 1 {
		t.Fatalf("saved at %v, left at %v", saved.Pos, dest)
	}
	if !zonetest.Poll(20*time.Second, func() bool { return removed(cl.c) == 1 }) {
		t.Fatalf("%d players taken out at logout, want 1", removed(cl.c))
	}
}

// Through SetGateway: a login on the other node takes the player over,
// and that node's takeover closes the older socket here at once
// (SESSION.DISPLACED). The gateways renew no lease within the test, so
// nothing else would close it as displaced (only the idle check, after
// 30 s, as GATEWAY.IDLE).
func TestALoginElsewhereClosesTheDisplacedSocket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := start(t)
	first := cl.login(ctx, 0, 7002)
	master, pet := you(first)
	next := cl.login(ctx, 1, 7002)
	if m, p := you(next); m != master || p != pet {
		t.Fatalf("the new session has %d/%d, want the player %d/%d taken over", m, p, master, pet)
	}
	select {
	case <-first.Done():
	case <-ctx.Done():
		t.Fatal("the displaced socket on the other node stayed open")
	}
	if code, reason, _ := first.Closed(); code != gateway.StatusDisplaced || reason != gateway.CodeDisplaced {
		t.Fatalf("the displaced socket closed %d %q, want %d %s", code, reason, gateway.StatusDisplaced, gateway.CodeDisplaced)
	}
}

// removed counts the players taken out at logout on every node, each read
// on its world goroutine.
func removed(c *zonetest.Cluster) int {
	n := 0
	for _, node := range c.Nodes {
		ch := make(chan int, 1)
		node.Runtime.Post(func() { ch <- node.Runtime.PlayerStats().Removed })
		n += <-ch
	}
	return n
}
