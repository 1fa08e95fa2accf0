package webclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/internal/browsertest"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/terrain"
	"github.com/shardwise/shardwise/torus"
)

// playShotEnv names a file the play view's test also writes its
// screenshot to (scripts/play-screenshot sets it to docs/img/play.png).
const playShotEnv = "SHARDWISE_PLAY_SCREENSHOT"

// viewState is what the tests read of the play view: what it drew in its
// last frame, and its DOM.
type viewState struct {
	Master, Pet string
	Terrain     int // chunk columns the client holds
	Stats       struct{ Chunks, RegionLines, Entities, Bars, Markers int }
	Drawn       map[string]struct {
		X, Y, Sx, Sy, R float64
		Kind            int
		Health          *struct{ Hp, Max int }
	}
	Canvas   struct{ Left, Top, Width, Height float64 }
	Hover    *struct{ ID, Text string }
	HoverBox struct {
		Visible bool
		Text    string
	}
	Instructions string
	TerrainLine  string
	Log          []string
}

const readView = `(() => {
	const s = window.shardwise, c = s.client, w = c && c.world;
	const drawn = {};
	for (const [id, d] of s.drawn) {
		const e = w.entities.get(id);
		drawn[id.toString()] = {...d, kind: e?.components.visual?.kind ?? 0, health: e?.components.health ?? null};
	}
	const r = document.getElementById("view").getBoundingClientRect();
	const box = document.getElementById("hover");
	return JSON.stringify({
		master: w ? w.master.toString() : "", pet: w ? w.pet.toString() : "", terrain: w ? w.terrain.size : 0,
		stats: s.view.stats, drawn, canvas: {left: r.left, top: r.top, width: r.width, height: r.height},
		hover: s.hover, hoverBox: {visible: !box.hidden, text: box.textContent},
		instructions: document.getElementById("instructions").textContent,
		terrainLine: document.getElementById("terrain").textContent,
		log: s.log,
	});
})()`

// samplePixels reads the canvas's pixels at an n × n grid spread over it,
// as "#rrggbb" strings; and, for each entity of ids, the colours of the
// pixels within its disc ("ID") and at the left of its health bar ("ID
// bar": one colour), where the last frame drew them. One evaluation reads
// them all, so no frame is drawn in between.
func samplePixels(t *testing.T, ctx context.Context, n int, ids ...string) ([]string, map[string][]string) {
	t.Helper()
	js := fmt.Sprintf(`(() => {
		const cv = document.getElementById("view"), g = cv.getContext("2d");
		const dpr = cv.width / cv.getBoundingClientRect().width;
		const hex = (x, y) => { const d = g.getImageData(Math.round(x * dpr), Math.round(y * dpr), 1, 1).data;
			return "#" + [d[0], d[1], d[2]].map((v) => v.toString(16).padStart(2, "0")).join(""); };
		const grid = [];
		for (let j = 0; j < %[1]d; j++) for (let i = 0; i < %[1]d; i++)
			grid.push(hex((i + 0.5) * cv.width / dpr / %[1]d, (j + 0.5) * cv.height / dpr / %[1]d));
		const at = {};
		for (const id of %[2]s) {
			const d = window.shardwise.drawn.get(BigInt(id));
			if (!d) continue;
			const disc = new Set();
			for (let y = -d.r; y <= d.r; y++) for (let x = -d.r; x <= d.r; x++)
				if (Math.hypot(x, y) < d.r - 1) disc.add(hex(d.sx + x, d.sy + y));
			at[id] = [...disc];
			at[id + " bar"] = [hex(d.sx - 11, d.sy - d.r - 6)];
		}
		return JSON.stringify({grid, at});
	})()`, n, jsonOf(t, ids))
	var out struct {
		Grid []string
		At   map[string][]string
	}
	browsertest.EvalJSON(t, ctx, js, &out)
	return out.Grid, out.At
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hoverAt moves the mouse to canvas point (sx, sy) and waits for the
// page to name what is under it.
func hoverAt(t *testing.T, ctx context.Context, v *viewState, sx, sy float64, what string, want func(*viewState) bool) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, v.Canvas.Left+sx, v.Canvas.Top+sy)); err != nil {
		t.Fatal(err)
	}
	testenv.PollUntil(t, 10*time.Second, what, func() bool {
		*v = viewState{}
		browsertest.EvalJSON(t, ctx, readView, v)
		return want(v)
	})
}

// The play view against a real zone node of the reference game: once
// logged in it draws the ground it was sent (a shaded heightmap: many
// colours over the canvas, none of it the colour of ground not sent), the
// region borders that cross its view, its own master and pet in their
// own colours apart from another player's, health bars, a name under the
// pointer, the instruction line, and a log in which the Terrain messages
// are a count, not a line each.
func TestPlayViewDrawsTheWorld(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := browsertest.Start(t, browsertest.Options{Width: 1100, Height: 720, ExceptionsFail: true})
	// Near the origin, where four regions meet (both borders in view),
	// 20 m east of a den of this seed's.
	home := torus.Pos{X: -12, Y: 3}
	rw := newRealWorld(t, game.Config{Seed: 21, NoBots: true, DenChance: 0.1},
		map[account.ID]torus.Pos{601: home, 602: {X: home.X + 12, Y: home.Y - 4}})
	cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, otherMaster := rw.dialSim(t, cctx, 602)

	if err := chromedp.Do(ctx,
		chromedp.Navigate(rw.url+"/"),
		chromedp.WaitVisible(chromedp.ID("connect")),
		chromedp.SetValue(chromedp.CSS(`input[name=token]`), rw.token(t, 601)),
		chromedp.Click(chromedp.ID("connect")),
	); err != nil {
		t.Fatal(err)
	}
	var v viewState
	read := func() *viewState {
		v = viewState{}
		browsertest.EvalJSON(t, ctx, readView, &v)
		return &v
	}
	other := fmtID(otherMaster)
	testenv.PollUntil(t, 30*time.Second, "the master, its pet, the other player and the ground of the whole view drawn", func() bool {
		p := read()
		_, m := p.Drawn[p.Master]
		_, q := p.Drawn[p.Pet]
		_, o := p.Drawn[other]
		// 11 × 11 columns around the master (interest.DefaultView).
		return p.Master != "0" && m && q && o && p.Terrain >= 121 && p.Stats.Chunks > 0 && p.Stats.Bars >= 2
	})
	t.Logf("drawn: %d columns of %d held, %d entities, %d health bars, %d region lines, %d markers",
		v.Stats.Chunks, v.Terrain, v.Stats.Entities, v.Stats.Bars, v.Stats.RegionLines, v.Stats.Markers)

	if !strings.Contains(v.Instructions, "Click to move") || !strings.Contains(v.Instructions, "click a mob to attack") {
		t.Errorf("instruction line %q, want it to say: click to move, click a mob to attack", v.Instructions)
	}
	if v.Stats.RegionLines != 2 {
		t.Errorf("%d region borders drawn at (%v, %v), want the 2 that meet at the origin", v.Stats.RegionLines, home.X, home.Y)
	}

	m, o := v.Drawn[v.Master], v.Drawn[other]
	// The pet may pass under its master while it walks to its place
	// beside it (1.5 m south and west): sample until it stands clear.
	var grid []string
	var px map[string][]string
	testenv.PollUntil(t, 10*time.Second, "the pet clear of its master", func() bool {
		grid, px = samplePixels(t, ctx, 12, v.Master, v.Pet, other)
		return slices.Contains(px[v.Pet], colourPet)
	})
	// The ground: drawn over the whole canvas, and shaded.
	colours := map[string]int{}
	for _, c := range grid {
		colours[c]++
	}
	if n := colours[colourUnknown]; n > len(grid)/10 {
		t.Errorf("%d of %d sampled pixels are of ground not drawn (%s)", n, len(grid), colourUnknown)
	}
	if len(colours) < 20 {
		t.Errorf("%d colours among %d pixels sampled of the ground, want a shaded heightmap (at least 20): %v", len(colours), len(grid), colours)
	}
	t.Logf("%d colours among %d pixels of the ground", len(colours), len(grid))
	// The player's own master in its colour (and the pet in its, above),
	// another player in neither.
	if !slices.Contains(px[v.Master], colourMaster) {
		t.Errorf("the master's disc holds %v, not the own master's %s", px[v.Master], colourMaster)
	}
	if o := px[other]; !slices.Contains(o, colourPlayer) || slices.Contains(o, colourMaster) || slices.Contains(o, colourPet) {
		t.Errorf("the other player's disc holds %v, want another player's %s and neither the master's nor the pet's", o, colourPlayer)
	}
	// Its health bar (mobs may have hurt it by now: any of the bar's colours).
	if bar := px[v.Master+" bar"]; m.Health == nil || len(bar) != 1 || !slices.Contains(colourHealth, bar[0]) {
		t.Errorf("the master's health bar (health %+v) starts with %v, want one of %v", m.Health, bar, colourHealth)
	}

	// Hovering names what is under the pointer.
	hoverAt(t, ctx, &v, o.Sx, o.Sy, "the other player named under the pointer", func(p *viewState) bool {
		return p.Hover != nil && p.Hover.ID == other
	})
	if want := "Player " + other; !strings.HasPrefix(v.Hover.Text, want) || !v.HoverBox.Visible || v.HoverBox.Text != v.Hover.Text {
		t.Errorf("hover over the other player: %+v, box %+v; want a visible %q", *v.Hover, v.HoverBox, want)
	}
	m = v.Drawn[v.Master]
	hoverAt(t, ctx, &v, m.Sx, m.Sy, "the own master named under the pointer", func(p *viewState) bool {
		return p.Hover != nil && p.Hover.ID == p.Master
	})
	if want := "You (player " + v.Master + ") · HP "; !strings.HasPrefix(v.Hover.Text, want) || !v.HoverBox.Visible {
		t.Errorf("hover over the master: %+v, box %+v; want a visible %q…", *v.Hover, v.HoverBox, want)
	}

	// The log: Terrain messages counted on their own line.
	for _, l := range v.Log {
		if strings.Contains(strings.ToLower(l), "terrain") {
			t.Errorf("log line %q: terrain belongs on its own line, counted", l)
		}
	}
	if want := fmt.Sprintf("terrain: %d columns held", v.Terrain); !strings.HasPrefix(v.TerrainLine, want) {
		t.Errorf("terrain line %q, want %q…", v.TerrainLine, want)
	}
	t.Logf("log: %q; %s", v.Log, v.TerrainLine)

	// Hover over a mob, if one is in sight (the screenshot is better with
	// it); mobs move, so the pointer follows the nearest at each try.
	mobInSight := func() (string, bool) {
		best, bestD := "", math.Inf(1)
		for id, d := range v.Drawn {
			dist := math.Hypot(d.Sx-v.Canvas.Width/2, d.Sy-v.Canvas.Height/2)
			if d.Kind == int(game.KindMob) && d.Sx > 10 && d.Sy > 10 && d.Sx < v.Canvas.Width-10 && d.Sy < v.Canvas.Height-10 && dist < bestD {
				best, bestD = id, dist
			}
		}
		return best, best != ""
	}
	if _, ok := mobInSight(); ok {
		testenv.PollUntil(t, 10*time.Second, "a mob named under the pointer", func() bool {
			id, ok := mobInSight()
			if !ok {
				return false
			}
			d := v.Drawn[id]
			if err := chromedp.Do(ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, v.Canvas.Left+d.Sx, v.Canvas.Top+d.Sy)); err != nil {
				t.Fatal(err)
			}
			read()
			return v.Hover != nil && v.Drawn[v.Hover.ID].Kind == int(game.KindMob)
		})
		if want := "Mob " + v.Hover.ID; !strings.HasPrefix(v.Hover.Text, want) {
			t.Errorf("hover over mob %s: %q, want %q…", v.Hover.ID, v.Hover.Text, want)
		}
		t.Logf("hover over a mob: %q", v.Hover.Text)
	} else {
		t.Log("no mob in sight to hover over")
		hoverAt(t, ctx, &v, o.Sx, o.Sy, "the other player named again", func(p *viewState) bool { return p.Hover != nil && p.Hover.ID == other })
	}
	// For the screenshot: the pointer on the mob nearest the middle, if
	// any, just before the shot (it walks on).
	read()
	if id, ok := mobInSight(); ok {
		d := v.Drawn[id]
		if err := chromedp.Do(ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, v.Canvas.Left+d.Sx, v.Canvas.Top+d.Sy)); err != nil {
			t.Fatal(err)
		}
	}
	var also []string
	if p := os.Getenv(playShotEnv); p != "" {
		also = append(also, p)
	}
	browsertest.Screenshot(t, ctx, "webclient-play-view.png", also...)
}

// Colours the tests expect of view.js's COLOURS.
const (
	colourUnknown = "#1b2418"
	colourMaster  = "#ffd23f"
	colourPet     = "#38c6ff"
	colourPlayer  = "#f2f2f2"
)

// colourHealth are the colours of a health bar: above half, above a
// quarter, below.
var colourHealth = []string{"#43c443", "#ffb300", "#ff3b30"}

// Entities of the standing script.
const (
	standMob    uint64 = 0x0040_0000_0000_0007
	standPlayer uint64 = 0x0040_0000_0000_0008
)

// standingBatch is a script in which nothing moves: the master at
// (10, 20), its pet at (12, 19), a mob at (22, 20) with 30 of 40 HP and
// another player at (4, 26).
func standingBatch(tick uint64) [][]byte {
	if tick > 1 {
		return nil
	}
	wt := func(t outbox.ComponentType) []byte { return []byte{byte(t)} }
	burst := func(id uint64, comps ...[]byte) []byte {
		b := outbox.AppendAppearFrame(nil, id, len(comps)/2)
		for i := 0; i < len(comps); i += 2 {
			b = outbox.AppendComponentFrame(b, id, outbox.ComponentType(comps[i][0]), comps[i+1])
		}
		return b
	}
	return [][]byte{
		burst(masterID, wt(game.WireVisual), visualPayload(byte(game.KindPlayer)), wt(game.WirePosition), positionPayload(10, 20, 0),
			wt(game.WireHealth), healthPayload(90, 100)),
		burst(petID, wt(game.WireVisual), visualPayload(byte(game.KindPet)), wt(game.WirePosition), positionPayload(12, 19, 0)),
		burst(standMob, wt(game.WireVisual), visualPayload(byte(game.KindMob)), wt(game.WirePosition), positionPayload(22, 20, 0),
			wt(game.WireHealth), healthPayload(30, 40)),
		burst(standPlayer, wt(game.WireVisual), visualPayload(byte(game.KindPlayer)), wt(game.WirePosition), positionPayload(4, 26, 0)),
	}
}

// A click on a mob attacks it (and walks the master up to it); a click on
// the ground walks there; hovering names the mob with its health.
func TestPlayViewClickAttacksAMob(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := browser(t)
	_, chunkBytes := testChunk(t)
	st := newScriptStack(t, newScriptWorld(chunkBytes, standingBatch, 0))
	if err := chromedp.Do(ctx,
		chromedp.Navigate(st.url+"/"),
		chromedp.WaitVisible(chromedp.ID("connect")),
		chromedp.SetValue(chromedp.CSS(`input[name=token]`), st.token(t, 79)),
		chromedp.Click(chromedp.ID("connect")),
	); err != nil {
		t.Fatal(err)
	}
	var v viewState
	mob := fmtID(standMob)
	testenv.PollUntil(t, 20*time.Second, "the mob drawn", func() bool {
		v = viewState{}
		browsertest.EvalJSON(t, ctx, readView, &v)
		_, ok := v.Drawn[mob]
		return ok && v.Master == fmtID(masterID)
	})
	d := v.Drawn[mob]
	hoverAt(t, ctx, &v, d.Sx+2, d.Sy-1, "the mob named under the pointer", func(p *viewState) bool { return p.Hover != nil })
	if want := "Mob " + mob + " · HP 30/40"; v.Hover.Text != want {
		t.Errorf("hover over the mob: %q, want %q", v.Hover.Text, want)
	}

	// A click on the mob, then one on the ground 5 m west of the master.
	m := v.Drawn[fmtID(masterID)]
	perMetre := (d.Sx - m.Sx) / (22 - 10)
	if err := chromedp.Do(ctx,
		chromedp.MouseClickXY(v.Canvas.Left+d.Sx+2, v.Canvas.Top+d.Sy-1),
		chromedp.MouseClickXY(v.Canvas.Left+m.Sx-5*perMetre, v.Canvas.Top+m.Sy),
	); err != nil {
		t.Fatal(err)
	}
	var inputs []gateway.Input
	testenv.PollUntil(t, 20*time.Second, "three inputs", func() bool {
		inputs, _ = st.world.recorded()
		return len(inputs) >= 3
	})
	attack, walkUp, walk := inputs[0], inputs[1], inputs[2]
	if attack.Kind != uint32(game.InputAttack) || attack.Entity != masterID || attack.Target != standMob {
		t.Errorf("first input %+v, want the master's attack on mob %d", attack, standMob)
	}
	if walkUp.Kind != uint32(game.InputMove) || walkUp.Entity != masterID || !walkUp.HasPoint ||
		torus.Default().Distance(walkUp.Point, torus.Pos{X: 22, Y: 20}) > 0.5 {
		t.Errorf("second input %+v, want the master's move to the mob at (22, 20)", walkUp)
	}
	if walk.Kind != uint32(game.InputMove) || !walk.HasPoint || torus.Default().Distance(walk.Point, torus.Pos{X: 5, Y: 20}) > 0.5 {
		t.Errorf("third input %+v, want a move to the ground clicked, (5, 20)", walk)
	}
	browsertest.EvalJSON(t, ctx, readView, &v)
	t.Logf("inputs %+v; log %q", inputs, v.Log)
}

// The ground shows no seam between two chunk columns: the last pixel
// column of one's texture and the first of its east neighbour's differ
// about as much as the pixel columns beside them on each side do
// (contour lines left out). (Slopes
// taken from one column's samples alone, one-sided at its edges, showed
// the heights' whole decimetres as a step at every column edge.)
func TestGroundHasNoSeamBetweenColumns(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(httptestServer(t)+"/index.html")); err != nil {
		t.Fatal(err)
	}
	geo := torus.Default()
	gen, err := terrain.New(21, geo)
	if err != nil {
		t.Fatal(err)
	}
	// Two rows of columns, west and east, near the origin.
	var chunks []map[string]any
	for _, x := range []int32{3997, 3998, 3999, 0} {
		for _, y := range []int32{0, 1} {
			h := gen.Base(torus.ChunkPos{X: x, Y: y})
			chunks = append(chunks, map[string]any{"x": x, "y": y, "heights": h[:]})
		}
	}
	js := fmt.Sprintf(`import("/view.js").then(({View, TEXTURE}) => {
		const w = {geometry: {sizeX: %[1]v, sizeY: %[2]v, chunkEdge: %[3]v}, terrain: new Map()};
		for (const c of %[4]s) w.terrain.set(c.x + "," + c.y, {...c, heights: Int16Array.from(c.heights), markers: new Uint8Array(256), edits: []});
		const v = new View();
		v.contour = 1e9; // no contour lines: they are steps of their own
		v.updateRange(w);
		const px = (c) => v.texture(w, c, %[3]v).getContext("2d").getImageData(0, 0, TEXTURE, TEXTURE).data;
		const lum = (d, x, y) => { const o = (y * TEXTURE + x) * 4; return 0.3 * d[o] + 0.59 * d[o + 1] + 0.11 * d[o + 2]; };
		// Mean |step| between pixel columns x and x+1 of one texture, and
		// across the edge between west's last column and east's first.
		const step = (a, xa, b, xb) => { let s = 0; for (let y = 0; y < TEXTURE; y++) s += Math.abs(lum(a, xa, y) - lum(b, xb, y)); return s / TEXTURE; };
		const edges = [];
		for (const y of [0, 1]) for (const [wx, ex] of [[3997, 3998], [3998, 3999], [3999, 0]]) {
			const a = px(w.terrain.get(wx + "," + y)), b = px(w.terrain.get(ex + "," + y));
			edges.push({across: step(a, TEXTURE - 1, b, 0), west: step(a, TEXTURE - 2, a, TEXTURE - 1), east: step(b, 0, b, 1)});
		}
		return JSON.stringify(edges);
	})`, geo.Width(), geo.Height(), geo.ChunkEdge(), jsonOf(t, chunks))
	var edges []struct{ Across, West, East float64 }
	browsertest.EvalJSON(t, ctx, js, &edges)
	for i, e := range edges {
		if near := max(e.West, e.East); e.Across > 2*near+1 {
			t.Errorf("edge %d: mean step %.2f across the column edge, %.2f and %.2f beside it on each side", i, e.Across, e.West, e.East)
		}
	}
	t.Logf("mean luminance steps across column edges and beside them: %+v", edges)
}
