package sim_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonegate"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// Resume credentials (issue 30): a player whose gateway died comes back
// on another gateway with the credential its gateway handed it, with no
// login token, to the same master where it stood, and never twice in the
// world.

// dying is what a gateway that dies sees of the directory and the world:
// once dead, nothing it writes lands (no release, no renewal, no revoke:
// its process is gone) and the world hears no Leave from it.
type dying struct {
	dead atomic.Bool
}

type dyingDir struct {
	directory.Directory
	d *dying
}

func (d dyingDir) Renew(ctx context.Context, a account.ID, e directory.Epoch) (directory.Session, error) {
	if d.d.dead.Load() {
		return directory.Session{}, errors.New("dead")
	}
	return d.Directory.Renew(ctx, a, e)
}

func (d dyingDir) Release(ctx context.Context, a account.ID, e directory.Epoch) error {
	if d.d.dead.Load() {
		return nil
	}
	return d.Directory.Release(ctx, a, e)
}

func (d dyingDir) RevokeResume(ctx context.Context, a account.ID, e directory.Epoch) error {
	if d.d.dead.Load() {
		return nil
	}
	return d.Directory.RevokeResume(ctx, a, e)
}

type dyingWorld struct {
	gateway.World
	d *dying
}

func (w dyingWorld) Leave(s *gateway.Session) {
	if !w.d.dead.Load() {
		w.World.Leave(s)
	}
}

// resumeCluster is a cluster of the game with a gateway on each node,
// each of which can die (die), stepped every 5 ms and watched.
type resumeCluster struct {
	w     *world
	c     *zonetest.Cluster
	rts   []*zone.Runtime
	urls  []string
	gws   []*gateway.Gateway
	srvs  []*httptest.Server
	dying []*dying
	watch *playerWatch
}

func startResumeCluster(t *testing.T, nodes int, seed uint64) *resumeCluster {
	t.Helper()
	return startResumeClusterWith(t, nodes, seed, nil)
}

// startResumeClusterWith is startResumeCluster with mod applied to the
// cluster's configuration.
func startResumeClusterWith(t *testing.T, nodes int, seed uint64, mod func(*zonetest.Config)) *resumeCluster {
	t.Helper()
	w := newWorld(t)
	rc := &resumeCluster{w: w, watch: newPlayerWatch()}
	rc.c = w.cluster(nodes, game.Config{Seed: seed, NoBots: true}, mod)
	for _, n := range rc.c.Nodes {
		rt := n.Runtime
		d := &dying{}
		v, err := logintoken.NewVerifier(logintoken.VerifierConfig{
			Cluster: cluster, Audience: gateway.Audience, Keys: []ed25519.PublicKey{w.pub}, SingleUse: w.dir,
		})
		if err != nil {
			t.Fatal(err)
		}
		gw, err := zonegate.World(rt)
		if err != nil {
			t.Fatal(err)
		}
		g, err := gateway.New(gateway.Config{Name: rt.Name(), Node: directory.NodeID(n.Number),
			Directory: dyingDir{w.dir, d}, Verifier: v, World: dyingWorld{gw, d}, Geometry: rt.Geometry()})
		if err != nil {
			t.Fatal(err)
		}
		zonegate.SetGateway(rt, g)
		srv := httptest.NewServer(g)
		t.Cleanup(func() {
			_ = g.Close()
			srv.Close()
		})
		rc.rts, rc.gws, rc.srvs, rc.dying = append(rc.rts, rt), append(rc.gws, g), append(rc.srvs, srv), append(rc.dying, d)
		rc.urls = append(rc.urls, "ws"+strings.TrimPrefix(srv.URL, "http"))
	}
	rc.watch.rts = rc.rts
	runSteps(t, func() {
		rc.c.Step()
		rc.watch.after()
	})
	return rc
}

// killGateway kills node i's gateway without a word to the directory or
// the world (its sockets close under the clients); with node, the node's
// lease goes too, so it simulates nothing more.
func (rc *resumeCluster) killGateway(t *testing.T, ctx context.Context, i int, node bool) {
	t.Helper()
	rc.dying[i].dead.Store(true)
	if node {
		n := rc.c.Nodes[i]
		if err := n.Ownership.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-n.Ownership.Fenced():
		case <-ctx.Done():
			t.Fatalf("%s never noticed its lease was gone", n.Name)
		}
	}
	_ = rc.gws[i].Close()
	rc.srvs[i].Close()
}

func resumeOn(t *testing.T, ctx context.Context, url, credential string) (*sim.Client, error) {
	t.Helper()
	c, err := sim.Dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.Resume(ctx, credential)
	return c, err
}

// A player logged in at zone-0's gateway whose master lives on zone-1:
// zone-0 dies (its gateway silent, or its lease gone too), and the client
// resumes with its credential on another gateway — the master's node or a
// third one: the same master and pet, where they stood, never a second
// master; the spent credential is refused after.
func TestAPlayerOfADeadGatewayResumesOnAnother(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		nodes int
		on    int
		node  bool // the node dies with its gateway
	}{
		{"gateway dies, resume on the master's node", 2, 1, false},
		{"node dies, resume on the master's node", 2, 1, true},
		{"node dies, resume on a third node", 3, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) { resumeAfterADeadGateway(t, tc.nodes, tc.on, tc.node) })
	}
}

func resumeAfterADeadGateway(t *testing.T, nodes, on int, node bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rc := startResumeCluster(t, nodes, 35)
	geo := rc.rts[0].Geometry()
	var at torus.Pos
	for y := 0.0; ; y += 256 {
		if at = (torus.Pos{X: 1000, Y: y}); rc.rts[0].Table().OwnerOf(at) == "zone-1" {
			break
		}
	}
	const a = account.ID(3501)
	rc.w.save(a, at)
	first := login(t, ctx, rc.urls[0], rc.w.token(a))
	master, pet := you(first)
	dest := geo.Translate(at, torus.Pos{X: 12})
	walkTo(t, ctx, first, geo, master, dest, true)
	cred := first.Credential()
	rc.killGateway(t, ctx, 0, node)
	<-first.Done()

	next, err := resumeOn(t, ctx, rc.urls[on], cred)
	if err != nil {
		t.Fatalf("resume on %s: %v", rc.urls[on], err)
	}
	if err := next.Wait(ctx, func(v *sim.View) bool {
		m, p := v.You()
		pos, ok := v.Position(m)
		return m == master && p == pet && ok && near(geo, pos, dest, 0.5)
	}); err != nil {
		m, p := you(next)
		t.Fatalf("the resumed session has %d/%d, want %d/%d standing at %v: %v", m, p, master, pet, dest, err)
	}
	rc.watch.waitSteps(t, 20)
	rc.watch.check(t)
	back := geo.Translate(dest, torus.Pos{X: -6})
	if _, err := next.Move(ctx, master, back.X, back.Y); err != nil {
		t.Fatal(err)
	}
	if err := next.Wait(ctx, func(v *sim.View) bool {
		p, ok := v.Position(master)
		return ok && near(geo, p, back, 0.5)
	}); err != nil {
		t.Fatalf("the resumed session cannot walk the player: %v", err)
	}
	// Single use: the spent credential is refused, and the refusal
	// changes nothing for the session that spent it.
	if _, err := resumeOn(t, ctx, rc.urls[on], cred); !errors.Is(err, sim.ErrResumeRefused) {
		t.Fatalf("the spent credential: %v, want refused", err)
	}
	if err := next.Ping(ctx, 1); err != nil {
		t.Fatal(err)
	}
	rc.watch.waitSteps(t, 20)
	rc.watch.check(t)
	select {
	case <-next.Done():
		code, reason, _ := next.Closed()
		t.Fatalf("the resumed session closed (%d %s)", code, reason)
	default:
	}
	live := rc.rts
	if node {
		live = rc.rts[1:] // a dead node's world runs nothing posted to it
	}
	if n := simulatedOwned(live, func(o account.ID) bool { return o == a }); n != 2 {
		t.Fatalf("%d entities of the account simulated, want its master and pet", n)
	}
}

// A bot whose gateway dies resumes on the next gateway of its list with
// its credential (no new token), and plays on.
func TestABotOfADeadGatewayResumesOnAnother(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rc := startResumeCluster(t, 2, 36)
	var tokens atomic.Int32
	bots, err := sim.StartBots(ctx, sim.BotsConfig{
		Gateways: rc.urls, Count: 1, FirstAccount: 3601, Seed: 36, Legs: 3, Reach: 60, RelogChance: -1,
		LegTimeout: 30 * time.Second,
		Token: func(a account.ID) (string, error) {
			tokens.Add(1)
			tok, _, err := rc.w.issuer.Issue(a, gateway.Audience)
			return tok, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !zonetest.Poll(30*time.Second, func() bool { return bots.Stats().Logins == 1 }) {
		t.Fatal("the bot never logged in")
	}
	// Give the bot its credential's round trip before the gateway dies.
	rc.watch.waitSteps(t, 40)
	rc.killGateway(t, ctx, 0, false)
	st, err := bots.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", st)
	if st.SessionResumes != 1 || st.ResumesRefused != 0 || st.Logins != 2 || tokens.Load() != 1 {
		t.Fatalf("resumes %d, refused %d, logins %d, tokens %d: want the one reconnect resumed with no new token",
			st.SessionResumes, st.ResumesRefused, st.Logins, tokens.Load())
	}
	if st.Legs != 3 || st.Done != 1 {
		t.Fatalf("legs %d, done %d: the bot did not play on", st.Legs, st.Done)
	}
	rc.watch.check(t)
}
