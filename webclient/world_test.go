package webclient_test

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/internal/browsertest"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/webclient"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonegate"
)

// realWorld is a zone node running the reference game, with its gateway
// and the client's files on one test server (the page at /, the socket
// at /ws), stepped every 10 ms until the test ends.
type realWorld struct {
	url string
	rt  *zone.Runtime
	iss *logintoken.Issuer
}

// newRealWorld starts a realWorld of cfg whose store holds a player at
// each position of homes (by account).
func newRealWorld(t *testing.T, cfg game.Config, homes map[account.ID]torus.Pos) *realWorld {
	t.Helper()
	store := worldstore.NewMemory(nil)
	for a, p := range homes {
		if err := store.SavePlayer(context.Background(), worldstore.Player{Account: a, Epoch: 1, Pos: p}); err != nil {
			t.Fatal(err)
		}
	}
	g, err := game.NewModule(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := g.Config().RuntimeConfig()
	rc.WorldStore, rc.WorldSeed = store, cfg.Seed
	rt, err := zone.New(rc, g)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := directory.NewMemory(directory.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	const cluster = "webclient-world"
	iss, err := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: cluster, Key: priv})
	if err != nil {
		t.Fatal(err)
	}
	v, err := logintoken.NewVerifier(logintoken.VerifierConfig{Cluster: cluster, Audience: gateway.Audience, Keys: []ed25519.PublicKey{pub}, SingleUse: dir})
	if err != nil {
		t.Fatal(err)
	}
	world, err := zonegate.World(rt)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Name: rt.Name(), Directory: dir, Verifier: v, World: world, Geometry: rt.Geometry()})
	if err != nil {
		t.Fatal(err)
	}
	zonegate.SetGateway(rt, gw)
	mux := http.NewServeMux()
	mux.Handle("/ws", gw)
	mux.Handle("/", webclient.Handler())
	srv := httptest.NewServer(mux)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the world's clock (20 Hz would do; faster keeps the test short)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				rt.Step()
			}
		}
	})
	t.Cleanup(func() {
		_ = gw.Close()
		srv.Close()
		close(stop)
		wg.Wait()
		_ = rt.Close()
	})
	return &realWorld{url: srv.URL, rt: rt, iss: iss}
}

func (w *realWorld) token(t *testing.T, a account.ID) string {
	t.Helper()
	tok, _, err := w.iss.Issue(a, gateway.Audience)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// dialSim logs a sim client in as account a and returns it with its
// master's id.
func (w *realWorld) dialSim(t *testing.T, ctx context.Context, a account.ID) (*sim.Client, uint64) {
	t.Helper()
	c, err := sim.Dial(ctx, "ws"+strings.TrimPrefix(w.url, "http")+"/ws")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Login(ctx, w.token(t, a)); err != nil {
		t.Fatal(err)
	}
	var master uint64
	if err := c.Wait(ctx, func(v *sim.View) bool { master, _ = v.You(); return master != 0 }); err != nil {
		t.Fatal(err)
	}
	return c, master
}

// The page against a real zone node running the reference game: it logs
// in, sees its own master and pet appear and another player (a sim client
// on the same gateway) walk, and gets the ground of its view.
func TestPageAgainstARealZoneNode(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := browser(t)
	home := torus.Pos{X: 4000, Y: 4000}
	rw := newRealWorld(t, game.Config{Seed: 21, NoBots: true}, map[account.ID]torus.Pos{501: home, 502: {X: home.X + 6, Y: home.Y}})
	rt := rw.rt

	// The other player, walking back and forth 20 m east of the page's.
	cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	other, otherMaster := rw.dialSim(t, cctx, 502)
	if _, err := other.Move(cctx, otherMaster, home.X+26, home.Y); err != nil {
		t.Fatal(err)
	}

	if err := chromedp.Do(ctx,
		chromedp.Navigate(rw.url+"/"),
		chromedp.WaitVisible(chromedp.ID("connect")),
		chromedp.SetValue(chromedp.CSS(`input[name=token]`), rw.token(t, 501)),
		chromedp.Click(chromedp.ID("connect")),
	); err != nil {
		t.Fatal(err)
	}
	var page pageState
	read := func() *pageState {
		page = pageState{}
		browsertest.EvalJSON(t, ctx, readPage, &page)
		return &page
	}
	position := func(p *pageState, id string) (torus.Pos, bool) {
		for _, e := range p.World.Entities {
			if e.ID == id && e.Position != nil {
				return torus.Pos{X: e.Position.X, Y: e.Position.Y}, true
			}
		}
		return torus.Pos{}, false
	}
	testenv.PollUntil(t, 30*time.Second, "the page's own master and pet, and the other player", func() bool {
		p := read()
		_, m := position(p, p.World.Master)
		_, q := position(p, p.World.Pet)
		_, o := position(p, fmtID(otherMaster))
		return p.World.Master != "" && p.World.Master != "0" && m && q && o
	})
	if at, _ := position(&page, page.World.Master); rt.Geometry().Distance(at, home) > 1 {
		t.Errorf("the page's master stands at %v, saved at %v", at, home)
	}
	first, _ := position(&page, fmtID(otherMaster))
	testenv.PollUntil(t, 30*time.Second, "the other player to move", func() bool {
		p, ok := position(read(), fmtID(otherMaster))
		return ok && p != first
	})
	if len(page.World.Terrain) == 0 {
		t.Error("no terrain for the page's view")
	}
	for _, e := range page.Seen.Errors {
		t.Errorf("page error %s", e)
	}
	browsertest.Screenshot(t, ctx, "real-world")
}
