package dashboard_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/dashboard"
	"github.com/shardwise/shardwise/internal/browsertest"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// screenshotTo, if set, is where TestPageShowsTheClusterLive also writes
// its screenshot (for docs/dashboard.png):
//
//	go test ./dashboard -run TestPageShowsTheClusterLive -args -screenshot=$PWD/docs/dashboard.png
var screenshotTo = flag.String("screenshot", "", "also write the dashboard test's screenshot to this path")

// failoverShotTo, if set, is where TestPageShowsANodeDownAndItsRegionsChangingOwner
// also writes its screenshot (for docs/img/dashboard-failover.png).
var failoverShotTo = flag.String("failover-screenshot", "", "also write the failover test's screenshot to this path")

// pageState is window.dashboard.state().
type pageState struct {
	Connected        bool           `json:"connected"`
	Received         int            `json:"received"`
	Version          uint64         `json:"version"`
	TableVersion     uint64         `json:"tableVersion"`
	Owners           []string       `json:"owners"`
	Nodes            []string       `json:"nodes"`
	RegionsDrawn     map[string]int `json:"regionsDrawn"`
	EntitiesDrawn    int            `json:"entitiesDrawn"`
	KindsDrawn       map[string]int `json:"kindsDrawn"`
	HandoffsDrawn    int            `json:"handoffsDrawn"`
	HandoffsSeen     int            `json:"handoffsSeen"`
	Down             []string       `json:"down"`
	DeadRegionsDrawn int            `json:"deadRegionsDrawn"`
	ChangesDrawn     int            `json:"changesDrawn"`
	ChangesSeen      int            `json:"changesSeen"`
	Tiles            int            `json:"tiles"`
	Play             bool           `json:"play"`
	Follow           bool           `json:"follow"`
	View             struct{ CX, CY, Scale, Width, Height float64 }
}

// outOfView is the first of the page's moving entities (not dens) that its
// view does not show on the torus of side world, or "" if it shows all.
func outOfView(t *testing.T, ctx context.Context, world float64) string {
	t.Helper()
	var out struct {
		View      struct{ CX, CY, Width, Height float64 }
		Positions map[string][4]any
	}
	browsertest.EvalJSON(t, ctx, `JSON.stringify({view: window.dashboard.state().view, positions: window.dashboard.positions()})`, &out)
	in := func(p, c, span float64) bool {
		d := math.Mod(p-c+world/2, world)
		if d < 0 {
			d += world
		}
		return math.Abs(d-world/2) <= span/2
	}
	for id, p := range out.Positions {
		x, _ := p[0].(float64)
		y, _ := p[1].(float64)
		if p[3] != "den" && (!in(x, out.View.CX, out.View.Width) || !in(y, out.View.CY, out.View.Height)) {
			return fmt.Sprintf("%s %s at (%v, %v), view %+v", p[3], id, x, y, out.View)
		}
	}
	return ""
}

func state(t *testing.T, ctx context.Context) pageState {
	t.Helper()
	var s pageState
	browsertest.EvalJSON(t, ctx, `JSON.stringify(window.dashboard ? window.dashboard.state() : {})`, &s)
	return s
}

// waitPage polls the page's state until cond holds, at most limit.
func waitPage(t *testing.T, ctx context.Context, limit time.Duration, what string, cond func(pageState) bool) pageState {
	t.Helper()
	var s pageState
	if !zonetest.Poll(limit, func() bool { s = state(t, ctx); return cond(s) }) {
		t.Fatalf("the page never showed %s; its state: %+v", what, s)
	}
	return s
}

// runCluster steps the rig on its own goroutine, a round every 20 ms
// (the collector's clock moves 50 ms a round), until the test ends: the
// cluster's clock, as a host's tick loop is. Only the stepper touches
// the runtimes from then on.
func runCluster(t *testing.T, r *rig) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			for _, n := range r.c.Nodes {
				began := time.Now()
				rep := n.Runtime.Step()
				r.col.Zone(report(n, rep, time.Since(began)))
			}
			if !zonetest.Poll(10*time.Second, r.c.Synced) {
				t.Errorf("messages still in flight after 10s")
				return
			}
			r.clk.Advance(tick)
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
}

// TestPageShowsTheClusterLive serves the dashboard of a 2-node game
// cluster, stepped live, to headless Chromium: the page connects to the
// stream, the map draws regions of every node and the entities, entities
// move between two samples, and when zone-0's busiest region is given to
// zone-1 the handoffs appear on the page (flashing on the map) with the
// new table. The first view follows the entities; the still (/?still)
// draws one snapshot. The screenshot is saved as a test artifact.
func TestPageShowsTheClusterLive(t *testing.T) {
	r := startRig(t, dashboard.CollectorConfig{})
	r.step(20)
	reg := busiestRegion(t, r.col.Snapshot(), "zone-0")
	r.col.Event("the cluster is up: zone-0 and zone-1")
	// The streams end before the server closes (Close waits for them).
	streams, endStreams := context.WithCancel(context.Background())
	srv := httptest.NewServer(dashboard.Handler(r.col, dashboard.HandlerConfig{
		Context: streams,
		Play:    func(context.Context) (string, error) { return dashboard.PlayURL("127.0.0.1:1", "none"), nil },
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(endStreams)
	runCluster(t, r)
	ctx := browser(t)

	if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	s := waitPage(t, ctx, 20*time.Second, "regions of both nodes and entities", func(s pageState) bool {
		return s.Connected && s.RegionsDrawn["zone-0"] > 0 && s.RegionsDrawn["zone-1"] > 0 && s.EntitiesDrawn > 0
	})
	if strings.Join(s.Nodes, ",") != "zone-0,zone-1" || !s.Play || s.KindsDrawn["player"] == 0 {
		t.Fatalf("page state %+v: want both nodes, the play view and players drawn", s)
	}
	t.Logf("the page draws %d entities (%v) on %d tiles", s.EntitiesDrawn, s.KindsDrawn, s.Tiles)

	// The first view follows the action: it holds every moving entity,
	// closer than the whole world.
	out := "?"
	if !zonetest.Poll(10*time.Second, func() bool { out = outOfView(t, ctx, 8192); return out == "" }) {
		t.Fatalf("the follow view does not show %s", out)
	}
	if s = state(t, ctx); !s.Follow || s.View.Width >= 8192 {
		t.Errorf("the first view %+v (follow %v): want it following, closer than the 8192 m world", s.View, s.Follow)
	}

	// Entities move between two samples.
	var before map[string][3]any
	browsertest.EvalJSON(t, ctx, `JSON.stringify(window.dashboard.positions())`, &before)
	moved := ""
	if !zonetest.Poll(20*time.Second, func() bool {
		var now map[string][3]any
		browsertest.EvalJSON(t, ctx, `JSON.stringify(window.dashboard.positions())`, &now)
		for id, p := range now {
			if q, ok := before[id]; ok && (p[0] != q[0] || p[1] != q[1]) {
				moved = fmt.Sprintf("%s from (%v, %v) to (%v, %v)", id, q[0], q[1], p[0], p[1])
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no entity of %d moved on the page; its state %+v, the collector's tick %d", len(before), state(t, ctx), r.col.Snapshot().Nodes[0].Tick)
	}
	t.Logf("moved: %s", moved)

	// Zoom about the centre (which stops following), then drag the view
	// past the world's west edge: its centre wraps onto the torus. A
	// double click shows the whole world, the follow button the action.
	var nav struct {
		Before, Zoomed, After, Fit struct{ CX, CY, Scale float64 }
		Following                  bool
	}
	browsertest.EvalJSON(t, ctx, `(() => {
		const c = document.getElementById("map"), r = c.getBoundingClientRect();
		const x = r.left + r.width / 2, y = r.top + r.height / 2;
		const view = () => { const v = window.dashboard.state().view; return {cx: v.cx, cy: v.cy, scale: v.scale}; };
		const before = view();
		c.dispatchEvent(new WheelEvent("wheel", {deltaY: -600, clientX: x, clientY: y, bubbles: true, cancelable: true}));
		const following = window.dashboard.state().follow;
		const zoomed = view();
		const dx = (before.cx + 1000) * zoomed.scale;
		const opts = (px) => ({pointerId: 7, clientX: px, clientY: y, bubbles: true});
		c.dispatchEvent(new PointerEvent("pointerdown", opts(x)));
		c.dispatchEvent(new PointerEvent("pointermove", opts(x + dx)));
		c.dispatchEvent(new PointerEvent("pointerup", opts(x + dx)));
		const after = view();
		c.dispatchEvent(new MouseEvent("dblclick", {bubbles: true}));
		return JSON.stringify({before, zoomed, after, fit: view(), following});
	})()`, &nav)
	if nav.Zoomed.Scale <= nav.Before.Scale*2 || nav.Zoomed.CX != nav.Before.CX || nav.Following {
		t.Errorf("the wheel did not zoom about the centre, or the view still follows: %+v", nav)
	}
	if want := 8192.0 - 1000; nav.After.CX < 0 || nav.After.CX >= 8192 || !near(nav.After.CX, want) {
		t.Errorf("dragged past the west edge: centre x %v, want %v on the torus (%+v)", nav.After.CX, want, nav)
	}
	if nav.Fit.CX != 4096 || nav.Fit.CY != 4096 || nav.Fit.Scale >= nav.Before.Scale {
		t.Errorf("a double click shows %+v, want the whole world, centred at 4096, 4096, farther than the follow view %+v", nav.Fit, nav.Before)
	}
	if _, err := chromedp.Run(ctx, chromedp.Click(chromedp.ID("follow"))); err != nil {
		t.Fatal(err)
	}
	if !zonetest.Poll(10*time.Second, func() bool { out = outOfView(t, ctx, 8192); return out == "" }) {
		t.Fatalf("after the follow button, the view does not show %s", out)
	}

	// A region move: its entities are handed over, and the page shows it.
	r.col.Event(fmt.Sprintf("moving region %d from zone-0 to zone-1", reg.ID))
	r.moveRegion(reg.ID, "zone-1")
	s = waitPage(t, ctx, 30*time.Second, "a handoff flashing and the new table", func(s pageState) bool {
		return s.HandoffsSeen > 0 && s.HandoffsDrawn > 0 && s.TableVersion > 1
	})
	t.Logf("page after the move: %d handoffs seen, %d flashing, table v%d", s.HandoffsSeen, s.HandoffsDrawn, s.TableVersion)
	var also []string
	if *screenshotTo != "" {
		also = append(also, *screenshotTo)
	}
	browsertest.Screenshot(t, ctx, "dashboard.png", also...)

	// The still (for screenshots): one snapshot drawn, no stream.
	if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/?still")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, 10*time.Second, "a still with entities", func(s pageState) bool {
		return s.Received == 1 && !s.Connected && s.EntitiesDrawn > 0 && s.RegionsDrawn["zone-1"] > 0
	})
}

func near(a, b float64) bool { return a-b < 0.5 && b-a < 0.5 }

// browser opens a tab for t, in which a page exception fails the test, in
// the test binary's headless Chromium (browsertest.Start).
func browser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.Start(t, browsertest.Options{Width: 1400, Height: 860, ExceptionsFail: true})
}

// TestPageShowsANodeDownAndItsRegionsChangingOwner: a zone node declared
// down (killed) is marked dead on the page, its regions hatched, until a
// new table gives them to the other node (a failover); then each of them
// is outlined as having changed owner, labelled from → to, and none is
// drawn as a dead node's any more.
func TestPageShowsANodeDownAndItsRegionsChangingOwner(t *testing.T) {
	r := startRig(t, dashboard.CollectorConfig{})
	r.step(20)
	streams, endStreams := context.WithCancel(context.Background())
	srv := httptest.NewServer(dashboard.Handler(r.col, dashboard.HandlerConfig{Context: streams}))
	t.Cleanup(srv.Close)
	t.Cleanup(endStreams)
	// The failover's table is written here, between two rounds of the
	// stepper: only the stepper touches the runtimes once it runs.
	cur := r.c.Nodes[1].Runtime.Table()
	gone := cur.RegionsOf("zone-0")
	owners := map[cells.RegionID]string{}
	for _, reg := range gone {
		owners[reg] = "zone-1"
	}
	next, err := cur.WithOwners(cur.Version()+1, owners)
	if err != nil {
		t.Fatal(err)
	}
	r.col.NodeDown("zone-0", "killed")
	runCluster(t, r)
	ctx := browser(t)
	if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, 20*time.Second, "the first snapshot", func(s pageState) bool { return s.Connected && s.Received > 0 })
	// The whole world in view: every region is drawn.
	browsertest.EvalJSON(t, ctx, `(() => { document.getElementById("map").dispatchEvent(new MouseEvent("dblclick", {bubbles: true})); return JSON.stringify("ok"); })()`, new(string))
	s := waitPage(t, ctx, 20*time.Second, "zone-0 down and its regions hatched", func(s pageState) bool {
		// Each region is drawn once per copy of the world in view.
		return s.Connected && strings.Join(s.Down, ",") == "zone-0" && s.DeadRegionsDrawn >= len(gone) && s.DeadRegionsDrawn == s.RegionsDrawn["zone-0"]
	})
	var row string
	browsertest.EvalJSON(t, ctx, `JSON.stringify(document.querySelector("#zones tr.down")?.textContent ?? "")`, &row)
	if !strings.HasPrefix(row, "zone-0 (killed)") {
		t.Errorf("the zone nodes' table shows the node down as %q, want it marked killed", row)
	}
	t.Logf("before the failover: %d of zone-0's regions hatched, %d changes", s.DeadRegionsDrawn, s.ChangesDrawn)

	r.c.Apply(next)
	s = waitPage(t, ctx, 30*time.Second, "zone-0's regions changing owner to zone-1", func(s pageState) bool {
		return s.TableVersion == next.Version() && s.ChangesSeen == len(gone) && s.ChangesDrawn >= len(gone) &&
			s.DeadRegionsDrawn == 0 && s.RegionsDrawn["zone-0"] == 0
	})
	t.Logf("after the failover: %d regions outlined as changed, %d seen, table v%d", s.ChangesDrawn, s.ChangesSeen, s.TableVersion)
	var also []string
	if *failoverShotTo != "" {
		also = append(also, *failoverShotTo)
	}
	browsertest.Screenshot(t, ctx, "dashboard-failover.png", also...)
}
