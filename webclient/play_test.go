package webclient_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/internal/browsertest"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/terrain"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/webclient"
)

// Entity ids of the scripted world: above 2^53 (and the master above
// 2^63), as snowflakes are, so a client that rounded ids to Numbers would
// fail.
const (
	masterID uint64 = 0x8000_0000_0000_0101
	petID    uint64 = 0x8000_0000_0000_0102
	otherID  uint64 = 0x0123_4567_89ab_cdef
	passerID uint64 = 0x0020_0000_0000_0001 // appears, then dies at passerDiesAt
)

const passerDiesAt = 5

// otherAt is where the other entity stands at tick: it walks east at
// half a metre a tick from (30, 40).
func otherAt(tick uint64) (x, y float64) { return 30 + 0.5*float64(tick), 40 }

var (
	terrainColumn = torus.ChunkPos{X: 3, Y: 5}
	terrainMarker = terrain.Marker{X: 2, Y: 7, Type: 4}
)

// scriptWorld is the World of the browser test: on Join it names the
// player's master and pet, sends one terrain chunk, and starts a goroutine
// that delivers a batch every tickEvery: at tick 1 the appear bursts of
// the master, the pet, the other entity and a passer, then the other
// entity's position each tick, and the passer's death. It records inputs.
type scriptWorld struct {
	chunk     []byte
	tickEvery time.Duration
	script    func(tick uint64) [][]byte // the frames of tick (none: no batch)
	ticks     uint64                     // the script's last tick; 0 for none

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	inputs []gateway.Input
	leaves int
	stops  map[*gateway.Session]context.CancelFunc
}

func newScriptWorld(chunk []byte, script func(tick uint64) [][]byte, ticks uint64) *scriptWorld {
	ctx, cancel := context.WithCancel(context.Background())
	return &scriptWorld{chunk: chunk, tickEvery: 50 * time.Millisecond, script: script, ticks: ticks,
		ctx: ctx, cancel: cancel, stops: make(map[*gateway.Session]context.CancelFunc)}
}

func (w *scriptWorld) Join(s *gateway.Session) error {
	s.SetYou(masterID, petID)
	s.SendTerrain(w.chunk)
	ctx, stop := context.WithCancel(w.ctx)
	w.mu.Lock()
	w.stops[s] = stop
	w.mu.Unlock()
	w.wg.Add(1)
	go w.play(ctx, s)
	return nil
}

func (w *scriptWorld) play(ctx context.Context, s *gateway.Session) {
	defer w.wg.Done()
	t := time.NewTicker(w.tickEvery)
	defer t.Stop()
	for tick := uint64(1); w.ticks == 0 || tick <= w.ticks; tick++ {
		select {
		case <-ctx.Done():
			return
		case <-s.Done():
			return
		case <-t.C:
		}
		s.Deliver(tick, w.script(tick))
	}
}

// scriptBatch is the scripted world's batch of tick: several frame slices,
// as a zone node delivers them (the gateway concatenates them).
func scriptBatch(tick uint64) [][]byte {
	ox, oy := otherAt(tick)
	if tick > 1 {
		frames := [][]byte{outbox.AppendComponentFrame(nil, otherID, game.WirePosition, positionPayload(ox, oy, 0))}
		if tick == passerDiesAt {
			frames = append(frames, outbox.AppendVanishFrame(nil, passerID, interest.Death))
		}
		return frames
	}
	burst := func(id uint64, comps ...[]byte) []byte {
		b := outbox.AppendAppearFrame(nil, id, len(comps)/2)
		for i := 0; i < len(comps); i += 2 {
			b = outbox.AppendComponentFrame(b, id, outbox.ComponentType(comps[i][0]), comps[i+1])
		}
		return b
	}
	wt := func(t outbox.ComponentType) []byte { return []byte{byte(t)} }
	return [][]byte{
		burst(masterID,
			wt(game.WireVisual), visualPayload(byte(game.KindPlayer)),
			wt(game.WirePosition), positionPayload(10, 20, 1.5),
			wt(game.WirePath), pathPayload(false, 0, 0),
			wt(game.WireSpeed), speedPayload(4.5),
			wt(game.WireHealth), healthPayload(90, 100),
			wt(game.WireExp), expPayload(1234)),
		burst(petID,
			wt(game.WireVisual), visualPayload(byte(game.KindPet)),
			wt(game.WirePosition), positionPayload(12, 19, 0),
			wt(game.WireHealth), healthPayload(50, 60)),
		burst(otherID,
			wt(game.WireVisual), visualPayload(byte(game.KindMob)),
			wt(game.WirePosition), positionPayload(ox, oy, 0),
			wt(game.WirePath), pathPayload(true, 1000, 40),
			wt(game.WireSpeed), speedPayload(10)),
		burst(passerID,
			wt(game.WireVisual), visualPayload(byte(game.KindMob)),
			wt(game.WirePosition), positionPayload(-5, -5, 0)),
	}
}

func (w *scriptWorld) Input(s *gateway.Session, in gateway.Input) error {
	if in.Kind < 1 || in.Kind > 3 {
		return gateway.ErrBadInput
	}
	w.mu.Lock()
	w.inputs = append(w.inputs, in)
	w.mu.Unlock()
	return nil
}

func (w *scriptWorld) Leave(s *gateway.Session) {
	w.mu.Lock()
	if stop := w.stops[s]; stop != nil {
		stop()
		delete(w.stops, s)
	}
	w.leaves++
	w.mu.Unlock()
}

func (w *scriptWorld) recorded() ([]gateway.Input, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.inputs), w.leaves
}

// Close stops every session's goroutine and waits for them.
func (w *scriptWorld) Close() {
	w.cancel()
	w.wg.Wait()
}

// testChunk is the terrain chunk the scripted world sends: a real base
// heightmap with a marker and a game's own edit on top.
func testChunk(t *testing.T) (terrain.Chunk, []byte) {
	t.Helper()
	gen, err := terrain.New(42, torus.Default())
	if err != nil {
		t.Fatal(err)
	}
	marker, err := terrainMarker.Edit(7)
	if err != nil {
		t.Fatal(err)
	}
	c := terrain.Chunk{
		X: terrainColumn.X, Y: terrainColumn.Y, Revision: 2, Heights: gen.Base(terrainColumn),
		Edits: []terrain.Edit{marker, {Kind: terrain.FirstGameKind, Account: 9, Data: []byte("game")}},
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	return c, terrain.AppendChunk(nil, &c)
}

// stack is a gateway with the scripted world and the client's files on
// one test server: the page at /, the socket at /ws.
type stack struct {
	url    string
	world  *scriptWorld
	issuer *logintoken.Issuer
	gw     *gateway.Gateway
}

func newStack(t *testing.T, chunk []byte) *stack {
	t.Helper()
	return newScriptStack(t, newScriptWorld(chunk, scriptBatch, 0))
}

// newScriptStack is newStack with world's script.
func newScriptStack(t *testing.T, world *scriptWorld) *stack {
	t.Helper()
	dir, err := directory.NewMemory(directory.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	const cluster = "webclient-test"
	iss, err := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: cluster, Key: priv})
	if err != nil {
		t.Fatal(err)
	}
	v, err := logintoken.NewVerifier(logintoken.VerifierConfig{
		Cluster: cluster, Audience: gateway.Audience, Keys: []ed25519.PublicKey{pub}, SingleUse: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Name: "web-1", Node: 1, Directory: dir, Verifier: v, World: world, Geometry: torus.Default(),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", gw)
	mux.Handle("/", webclient.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		if err := gw.Close(); err != nil { // closes every socket; Leave stops the world's goroutines
			t.Error(err)
		}
		world.Close()
		srv.Close()
	})
	return &stack{url: srv.URL, world: world, issuer: iss, gw: gw}
}

func (s *stack) token(t *testing.T, a account.ID) string {
	t.Helper()
	tok, _, err := s.issuer.Issue(a, gateway.Audience)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// pageState is what the test reads back from the page.
type pageState struct {
	Welcome *struct {
		Account, SessionEpoch, Gateway string
		TickHz                         int
		World                          struct{ SizeX, SizeY, ChunkEdge float64 }
	}
	Seen struct {
		Batches  int
		Vanished []string
		Errors   []string
	}
	World struct {
		Tick, Master, Pet string
		Entities          []struct {
			ID       string
			Position *struct{ X, Y, Z float64 }
			Path     *struct {
				Active bool
				Target *struct{ X, Y float64 }
			}
			Speed  *struct{ Mps float64 }
			Visual *struct{ Kind int }
			Health *struct{ Hp, Max int }
			Exp    *struct{ Points int64 }
		}
		Terrain []struct {
			X, Y     int32
			Revision string
			Heights  []int16
			Markers  []uint8
			Edits    int
		}
	}
	Closed *struct {
		Code   int
		Reason string
	}
}

const readPage = `(() => {
	const c = window.shardwise.client;
	const w = c && c.welcome;
	return JSON.stringify({
		welcome: w && {account: w.account.toString(), sessionEpoch: w.sessionEpoch.toString(), gateway: w.gateway,
			tickHz: w.tickHz, world: w.world},
		seen: window.seen,
		world: c && c.world.snapshot(),
		closed: c && c.closed,
	});
})()`

func (p *pageState) entity(id uint64) (int, bool) {
	for i, e := range p.World.Entities {
		if e.ID == fmtID(id) {
			return i, true
		}
	}
	return -1, false
}

// The page logs in with a real token through a real gateway, sees its own
// master and pet appear with every component decoded, sees the other
// entity move between two samples and the passer die, decodes the terrain
// chunk as Go does, and sends move (by a click), attack and stop, which
// reach the world as the inputs they are.
func TestPageLogsInAndSeesTheWorld(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := browser(t)
	chunk, chunkBytes := testChunk(t)
	st := newStack(t, chunkBytes)
	const acct account.ID = 77

	start := time.Now()
	err := chromedp.Do(ctx,
		chromedp.Navigate(st.url+"/"),
		chromedp.WaitVisible(chromedp.ID("connect")),
		// Listen for the client the page makes, before it connects.
		chromedp.Evaluate[chromedp.Void](`window.seen = {batches: 0, vanished: [], errors: []};
			window.addEventListener("shardwise-client", (ev) => {
				const c = ev.detail;
				c.on("batch", (b) => { seen.batches++; b.vanished.forEach((id) => seen.vanished.push(id.toString())); });
				c.on("error", (e) => seen.errors.push(e.code));
				c.on("protocolerror", (e) => seen.errors.push("protocol: " + e.message));
			}); true`),
		chromedp.SetValue(chromedp.CSS(`input[name=token]`), st.token(t, acct)),
		chromedp.Click(chromedp.ID("connect")),
	)
	if err != nil {
		t.Fatal(err)
	}

	var page pageState
	read := func() *pageState {
		t.Helper()
		page = pageState{}
		browsertest.EvalJSON(t, ctx, readPage, &page)
		return &page
	}
	poll := func(what string, cond func(p *pageState) bool) *pageState {
		t.Helper()
		testenv.PollUntil(t, 20*time.Second, what, func() bool { return cond(read()) })
		return &page
	}

	p := poll("Welcome", func(p *pageState) bool { return p.Welcome != nil })
	t.Logf("welcome after %v", time.Since(start).Round(time.Millisecond))
	geo := torus.Default()
	if w := p.Welcome; w.Account != "77" || w.Gateway != "web-1" || w.TickHz != 20 || w.SessionEpoch == "0" ||
		w.World.SizeX != geo.Width() || w.World.SizeY != geo.Height() || w.World.ChunkEdge != geo.ChunkEdge() {
		t.Errorf("welcome %+v", *w)
	}

	p = poll("the master, pet and other entity", func(p *pageState) bool {
		_, m := p.entity(masterID)
		_, o := p.entity(otherID)
		_, q := p.entity(petID)
		return m && o && q
	})
	if p.World.Master != fmtID(masterID) || p.World.Pet != fmtID(petID) {
		t.Errorf("You: master %s pet %s, want %d and %d", p.World.Master, p.World.Pet, masterID, petID)
	}
	i, _ := p.entity(masterID)
	m := p.World.Entities[i]
	switch {
	case m.Visual == nil || m.Visual.Kind != int(game.KindPlayer):
		t.Errorf("master visual %+v", m.Visual)
	case m.Position == nil || m.Position.X != 10 || m.Position.Y != 20 || m.Position.Z != 1.5:
		t.Errorf("master position %+v", m.Position)
	case m.Path == nil || m.Path.Active:
		t.Errorf("master path %+v", m.Path)
	case m.Speed == nil || m.Speed.Mps != 4.5:
		t.Errorf("master speed %+v", m.Speed)
	case m.Health == nil || m.Health.Hp != 90 || m.Health.Max != 100:
		t.Errorf("master health %+v", m.Health)
	case m.Exp == nil || m.Exp.Points != 1234:
		t.Errorf("master exp %+v", m.Exp)
	}
	i, _ = p.entity(petID)
	if pet := p.World.Entities[i]; pet.Visual == nil || pet.Visual.Kind != int(game.KindPet) || pet.Health == nil || pet.Health.Hp != 50 {
		t.Errorf("pet %+v", pet)
	}
	i, _ = p.entity(otherID)
	first := *p.World.Entities[i].Position
	if o := p.World.Entities[i]; o.Path == nil || !o.Path.Active || o.Path.Target.X != 1000 || o.Speed.Mps != 10 {
		t.Errorf("other %+v", o)
	}
	p = poll("the other entity to move", func(p *pageState) bool {
		i, ok := p.entity(otherID)
		return ok && p.World.Entities[i].Position.X > first.X
	})
	i, _ = p.entity(otherID)
	t.Logf("other entity moved from (%v, %v) to (%v, %v), tick %s", first.X, first.Y,
		p.World.Entities[i].Position.X, p.World.Entities[i].Position.Y, p.World.Tick)

	p = poll("the passer to die", func(p *pageState) bool { return slices.Contains(p.Seen.Vanished, fmtID(passerID)) })
	if _, ok := p.entity(passerID); ok {
		t.Error("the passer vanished but the world still holds it")
	}

	// Terrain: the heights and the marker as Go has them.
	if len(p.World.Terrain) != 1 {
		t.Fatalf("terrain: %d chunks, want 1", len(p.World.Terrain))
	}
	tc := p.World.Terrain[0]
	if tc.X != chunk.X || tc.Y != chunk.Y || tc.Revision != "2" || tc.Edits != 2 || !slices.Equal(tc.Heights, chunk.Heights[:]) {
		t.Errorf("terrain chunk (%d, %d) revision %s, %d edits, heights equal: %v; want (%d, %d) revision 2, 2 edits",
			tc.X, tc.Y, tc.Revision, tc.Edits, slices.Equal(tc.Heights, chunk.Heights[:]), chunk.X, chunk.Y)
	}
	surface, err := terrain.Apply(chunk.Heights, chunk.Edits)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tc.Markers, surface.Markers[:]) {
		t.Errorf("terrain markers differ from terrain.Apply's")
	}

	// Inputs: a click on the canvas's centre moves the master to where it
	// stands; attack and stop through the module.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("view")),
		chromedp.Evaluate[chromedp.Void](`(() => { const c = window.shardwise.client;
			c.attack(c.world.master, `+jsString(fmtID(otherID))+`); c.stop(c.world.master); return true; })()`),
	)
	if err != nil {
		t.Fatal(err)
	}
	var inputs []gateway.Input
	testenv.PollUntil(t, 20*time.Second, "three inputs", func() bool {
		inputs, _ = st.world.recorded()
		return len(inputs) >= 3
	})
	want := []gateway.Input{
		{Seq: 1, Entity: masterID, Kind: 1, HasPoint: true},
		{Seq: 2, Entity: masterID, Kind: 2, Target: otherID},
		{Seq: 3, Entity: masterID, Kind: 3},
	}
	for k, in := range inputs[:3] {
		pt := in.Point
		in.Point = torus.Pos{}
		if in != want[k] {
			t.Errorf("input %d: %+v, want %+v", k, in, want[k])
		}
		if k == 0 && (pt.X < 9 || pt.X > 11 || pt.Y < 19 || pt.Y > 21) {
			t.Errorf("click moved to (%v, %v), want about the master's (10, 20)", pt.X, pt.Y)
		}
	}

	// Ping: a Pong with the nonce.
	nonce, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.shardwise.client.ping().then((p) => p.nonce.toString())`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if nonce != "1" {
		t.Errorf("pong nonce %s, want 1", nonce)
	}

	browsertest.Screenshot(t, ctx, "webclient-play.png")

	// Logout: the server closes with 1000 and the world lets go.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.shardwise.client.logout()`)); err != nil {
		t.Fatal(err)
	}
	p = poll("the close after logout", func(p *pageState) bool { return p.Closed != nil })
	if p.Closed.Code != 1000 {
		t.Errorf("closed with %d %q, want 1000", p.Closed.Code, p.Closed.Reason)
	}
	testenv.PollUntil(t, 20*time.Second, "the world's Leave", func() bool { _, leaves := st.world.recorded(); return leaves == 1 })
	if len(p.Seen.Errors) != 0 {
		t.Errorf("the client saw errors: %v", p.Seen.Errors)
	}
	t.Logf("%d batches applied; whole scenario %v", p.Seen.Batches, time.Since(start).Round(time.Millisecond))
}

// A refused token closes the socket with 4001 and the login code; the
// client reports the close with its code and reason.
func TestPageReportsARefusedLogin(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := browser(t)
	_, chunkBytes := testChunk(t)
	st := newStack(t, chunkBytes)
	if err := chromedp.Do(ctx, chromedp.Navigate(st.url+"/")); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`import("/client.js").then(async ({Client}) => {
			const c = new Client();
			await c.connect(location.origin.replace(/^http/, "ws") + "/ws");
			try { await c.login("not-a-token"); return "logged in"; }
			catch (err) { return JSON.stringify({code: err.code, reason: err.reason}); }
		})`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	var closed struct {
		Code   int
		Reason string
	}
	if err := json.Unmarshal([]byte(got), &closed); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if closed.Code != int(gateway.StatusLoginFailed) || closed.Reason == "" {
		t.Errorf("closed with %d %q, want %d and a reason", closed.Code, closed.Reason, gateway.StatusLoginFailed)
	}
	t.Logf("refused login: %d %s", closed.Code, closed.Reason)
}
