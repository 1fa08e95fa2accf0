package webclient_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/internal/browsertest"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
)

// walkEvent is one component the walk script sends: at tick, of entity.
type walkEvent struct {
	tick    uint64
	entity  uint64
	typ     outbox.ComponentType
	payload []byte
}

// The walkers of the animation test, each a case of docs/protocol.md
// "Animating", and the tick the script ends on (an appear of walkEnd).
const (
	walkStraight uint64 = 0x8000_0000_0000_0011 + iota
	walkRedirect
	walkSpeedUp
	walkArrives
	walkChaserStops
	walkCorrected
	walkStanding
	walkLateDiagonal
	walkStopsThenWalks
	walkEnd
)

const walkLastTick = 40

// walkScript is what the walkers are sent: a Position only when a walk
// starts, on a correction and never on arrival, as the server does after
// resendPosition, so a client that draws positions as sent sees them
// stand still.
func walkScript() []walkEvent {
	w, h := torus.Default().Width(), torus.Default().Height()
	pos := func(x, y, z float64) []byte { return positionPayload(x, y, z) }
	to := func(x, y float64) []byte { return pathPayload(true, x, y) }
	stand := pathPayload(false, 0, 0)
	mob := visualPayload(byte(game.KindMob))
	var evs []walkEvent
	add := func(tick, id uint64, comps ...any) {
		for i := 0; i < len(comps); i += 2 {
			evs = append(evs, walkEvent{tick, id, comps[i].(outbox.ComponentType), comps[i+1].([]byte)})
		}
	}
	const (
		vis = game.WireVisual
		p   = game.WirePosition
		pa  = game.WirePath
		sp  = game.WireSpeed
	)
	add(1, masterID, vis, visualPayload(byte(game.KindPlayer)), p, pos(0.5, 100, 0), pa, stand, sp, speedPayload(5))
	// East across the x seam, 0.5 m a tick, far from its target at the end.
	add(1, walkStraight, vis, mob, p, pos(w-3, 100, 0), pa, to(60, 100), sp, speedPayload(10))
	// Redirected north in tick 11, without a Position.
	add(1, walkRedirect, vis, mob, p, pos(50, 50, 0), pa, to(100, 50), sp, speedPayload(5))
	add(11, walkRedirect, pa, to(50, 100))
	// Twice as fast from tick 21.
	add(1, walkSpeedUp, vis, mob, p, pos(200, 50, 0), pa, to(300, 50), sp, speedPayload(4))
	add(21, walkSpeedUp, sp, speedPayload(8))
	// Reaches its target in tick 11 and stands there (z as the target's).
	add(1, walkArrives, vis, mob, p, pos(300, 300, 2), pa, to(303, 300), sp, speedPayload(6))
	// A chaser in reach in tick 9: Path 00 without a Position.
	add(1, walkChaserStops, vis, mob, p, pos(400, 400, 0), pa, to(500, 400), sp, speedPayload(10))
	add(9, walkChaserStops, pa, stand)
	// A correction in tick 17, the walk going on from it.
	add(1, walkCorrected, vis, mob, p, pos(600, 100, 0), pa, to(700, 100), sp, speedPayload(5))
	add(17, walkCorrected, p, pos(605, 100.5, 0))
	// No Path, no Speed: it stands.
	add(1, walkStanding, vis, mob, p, pos(700, 700, 1))
	// Appears in tick 5 walking north-east across the y seam.
	add(5, walkLateDiagonal, vis, mob, p, pos(100, h-1, 0), pa, to(130, 10), sp, speedPayload(7))
	// Stops in tick 9, walks again from where it stood in tick 17.
	add(1, walkStopsThenWalks, vis, mob, p, pos(800, 800, 0), pa, to(900, 800), sp, speedPayload(5))
	add(9, walkStopsThenWalks, pa, stand)
	add(17, walkStopsThenWalks, pa, to(800, 900))
	add(walkLastTick, walkEnd, vis, mob)
	return evs
}

// walkBatches turns the script into the frames of each tick: an entity's
// first components are its appear burst, later ones updates.
func walkBatches(evs []walkEvent) func(tick uint64) [][]byte {
	byTick := make(map[uint64][][]byte)
	seen := make(map[uint64]bool)
	for i := 0; i < len(evs); {
		j := i
		for j < len(evs) && evs[j].tick == evs[i].tick && evs[j].entity == evs[i].entity {
			j++
		}
		var b []byte
		if !seen[evs[i].entity] {
			seen[evs[i].entity] = true
			b = outbox.AppendAppearFrame(b, evs[i].entity, j-i)
		}
		for _, e := range evs[i:j] {
			b = outbox.AppendComponentFrame(b, e.entity, e.typ, e.payload)
		}
		byTick[evs[i].tick] = append(byTick[evs[i].tick], b)
		i = j
	}
	return func(tick uint64) [][]byte { return byTick[tick] }
}

type where struct{ X, Y, Z float64 }

// The page draws walkers where they have walked, not where they were last
// sent: its World.where advances from batch to batch without a Position,
// play.js's drawing goes on advancing between batches by the clock, and
// the estimate is the one sim's View.Where makes of the same frames, for
// every case of docs/protocol.md "Animating".
func TestPageAnimatesWalkersAsSimDoes(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := browser(t)
	_, chunkBytes := testChunk(t)
	st := newScriptStack(t, newScriptWorld(chunkBytes, walkBatches(walkScript()), walkLastTick))

	// The Go client of the same script, on the same gateway.
	cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	goClient, err := sim.Dial(cctx, "ws"+strings.TrimPrefix(st.url, "http")+"/ws")
	if err != nil {
		t.Fatal(err)
	}
	defer goClient.Close()
	if _, err := goClient.Login(cctx, st.token(t, 78)); err != nil {
		t.Fatal(err)
	}

	err = chromedp.Do(ctx,
		chromedp.Navigate(st.url+"/"),
		chromedp.WaitVisible(chromedp.ID("connect")),
		// Each batch: the straight walker's estimate and its position as sent.
		chromedp.Evaluate[chromedp.Void](`window.walk = [];
			window.addEventListener("shardwise-client", (ev) => {
				const c = ev.detail;
				c.on("batch", (b) => {
					const e = c.world.entities.get(`+fmt.Sprint(walkStraight)+`n);
					walk.push({tick: Number(b.tick), where: c.world.where(`+fmt.Sprint(walkStraight)+`n),
						sent: e ? e.components.position : null});
				});
			}); true`),
		chromedp.SetValue(chromedp.CSS(`input[name=token]`), st.token(t, 77)),
		chromedp.Click(chromedp.ID("connect")),
	)
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint64{walkStraight, walkRedirect, walkSpeedUp, walkArrives, walkChaserStops, walkCorrected,
		walkStanding, walkLateDiagonal, walkStopsThenWalks}
	var page struct {
		Tick  int
		Where map[string]*where
		Walk  []struct {
			Tick        int
			Where, Sent *where
		}
	}
	idList := make([]string, len(ids))
	for i, id := range ids {
		idList[i] = fmt.Sprintf("%dn", id)
	}
	readWalk := `(() => { const c = window.shardwise.client; if (!c) return "{}";
		const w = {};
		for (const id of [` + strings.Join(idList, ",") + `]) w[id.toString()] = c.world.where(id);
		return JSON.stringify({tick: Number(c.world.tick), where: w, walk: window.walk}); })()`
	testenv.PollUntil(t, 30*time.Second, "the page to see the script's last tick", func() bool {
		browsertest.EvalJSON(t, ctx, readWalk, &page)
		return page.Tick == walkLastTick
	})
	if err := goClient.Wait(cctx, func(v *sim.View) bool { _, ok := v.Entity(walkEnd); return ok }); err != nil {
		t.Fatal(err)
	}

	// Batch by batch, the straight walker advances half a metre a tick
	// across the seam, though its Position was sent only in tick 1.
	geo := torus.Default()
	if len(page.Walk) < 5 {
		t.Fatalf("the page recorded %d batches, want the script's 7", len(page.Walk))
	}
	for _, b := range page.Walk {
		if b.Where == nil || b.Sent == nil {
			t.Errorf("tick %d: where %v, sent %v", b.Tick, b.Where, b.Sent)
			continue
		}
		want := torus.Pos{X: geo.NormaliseX(geo.Width() - 3 + 0.5*float64(b.Tick-1)), Y: 100}
		if d := geo.Distance(torus.Pos{X: b.Where.X, Y: b.Where.Y}, want); d > 1e-6 {
			t.Errorf("tick %d: the straight walker is estimated at (%v, %v), want (%v, %v) (sent (%v, %v))",
				b.Tick, b.Where.X, b.Where.Y, want.X, want.Y, b.Sent.X, b.Sent.Y)
		}
	}

	// Every walker where sim's Go client has it.
	goClient.Look(func(v *sim.View) {
		for _, id := range ids {
			want, ok := v.Where(id)
			got := page.Where[fmt.Sprint(id)]
			switch {
			case !ok || got == nil:
				t.Errorf("entity %#x: the page has %v, sim %v (%v)", id, got, want, ok)
			case geo.Distance(torus.Pos{X: got.X, Y: got.Y}, want) > 1e-6 || math.Abs(got.Z-want.Z) > 1e-6:
				t.Errorf("entity %#x: the page estimates (%v, %v, %v), sim (%v, %v, %v)", id, got.X, got.Y, got.Z, want.X, want.Y, want.Z)
			default:
				t.Logf("entity %#x at (%.3f, %.3f, %.3f) in tick %d, as sim has it", id, got.X, got.Y, got.Z, walkLastTick)
			}
		}
	})

	// No batch comes after the last tick; the page's drawing goes on
	// walking the straight walker by the clock.
	readDrawn := `(() => { const p = window.shardwise.drawn.get(` + fmt.Sprint(walkStraight) + `n);
		return JSON.stringify(p ?? null); })()`
	last := page.Where[fmt.Sprint(walkStraight)]
	var first *where
	testenv.PollUntil(t, 10*time.Second, "the straight walker drawn past its last estimate", func() bool {
		browsertest.EvalJSON(t, ctx, readDrawn, &first)
		return first != nil && geo.DeltaX(last.X, first.X) > 0
	})
	var then *where
	testenv.PollUntil(t, 10*time.Second, "the straight walker drawn further on", func() bool {
		browsertest.EvalJSON(t, ctx, readDrawn, &then)
		return then != nil && geo.DeltaX(first.X, then.X) > 0
	})
	if then.X < last.X || then.X > 60 || then.Y != 100 {
		t.Errorf("the straight walker drawn at (%v, %v), off its path to (60, 100)", then.X, then.Y)
	}
	t.Logf("drawn at x %.3f, then %.3f, after the last batch's %.3f", first.X, then.X, last.X)
	browsertest.Screenshot(t, ctx, "webclient-animate.png")
}
