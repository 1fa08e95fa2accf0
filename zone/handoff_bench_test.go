//go:build linux

package zone_test

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/handoff"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// The handoff benchmarks (scripts/bench-handoff runs them and writes
// docs/bench/handoff.md), one per goal of the handoff issue:
//
//   - BenchmarkHandoffLatency: ticks from the tick a source freezes an
//     entity and sends it to the target's first tick that simulates it.
//   - BenchmarkHandoffSnapshot: the encoded size of a game player and its
//     pet, as Runtime.HandoffSnapshot makes them.
//   - BenchmarkRegionMove: 2,000 entities handed over by a region move,
//     and the worst tick on either node against the ticks before it.
//
// The runtime has no hook that says when it froze an entity or thawed
// one, so the latency benchmark watches from outside: after every tick of
// the cluster (every node stepped once) it asks each node whether it
// simulates each entity (Simulated) and whether it holds it frozen
// (Frozen). A source freezes in the output stage of its tick T, after its
// systems ran; a target drains its inbox and thaws what it adopted at the
// start of its Step, before the systems run, so an entity a node
// simulates after its Step N was simulated in tick N, and a latency of 1
// tick means that no tick went without the entity simulated somewhere.
//
// The file builds on Linux only: BenchmarkRegionMove reads the thread's
// CPU clock (CLOCK_THREAD_CPUTIME_ID).

// nearestRank is the nearest-rank p-th percentile (0 < p ≤ 100) of xs, as
// game.Percentile computes it for durations. It sorts xs in place.
func nearestRank[T cmp.Ordered](xs []T, p float64) T {
	var zero T
	if len(xs) == 0 {
		return zero
	}
	slices.Sort(xs)
	rank := int(float64(len(xs))*p/100+0.999999) - 1
	return xs[min(max(rank, 0), len(xs)-1)]
}

func sumHandoffStats(rts []*zone.Runtime) zone.HandoffStats {
	var s zone.HandoffStats
	for _, r := range rts {
		s = s.Plus(r.HandoffStats())
	}
	return s
}

// ---- latency ----

// inFlight is an entity a source froze for a handoff.
type inFlight struct {
	src  int    // the node that froze it
	tick uint64 // the source's tick that froze it (the trigger)
}

// handoffWatch follows entities over the nodes, one look per tick.
type handoffWatch struct {
	rts []*zone.Runtime
	ids []ecs.ID
	// on is the node that simulated each entity at the last look (-1:
	// none).
	on []int
	// taking are the handoffs no target simulates yet; letting are those
	// whose source still holds the entity live (it has not applied the
	// ack).
	taking, letting map[ecs.ID]inFlight
	// latency is, per completed handoff, the target's first simulated
	// tick minus the trigger tick; release is the source's first tick
	// that no longer holds it live minus the trigger tick.
	latency, release []int
	// returned counts handoffs given up (the source simulates it again);
	// double counts looks at which two nodes simulated one entity; unseen
	// counts entities that changed nodes without a look seeing them
	// frozen.
	returned, double, unseen int
}

func newHandoffWatch(rts []*zone.Runtime, ids []ecs.ID) *handoffWatch {
	w := &handoffWatch{rts: rts, ids: ids, on: make([]int, len(ids)),
		taking: make(map[ecs.ID]inFlight), letting: make(map[ecs.ID]inFlight)}
	for i := range w.on {
		w.on[i] = -1
	}
	w.look()
	return w
}

func (w *handoffWatch) tickOf(n int) uint64 { return w.rts[n].World().CurrentTick().N }

// holds reports whether node n holds id live (simulated or frozen, not a
// ghost).
func (w *handoffWatch) holds(n int, id ecs.ID) bool {
	r := w.rts[n]
	return r.World().Alive(id) && !r.Ghosts().Has(id)
}

// look is one look, after a tick of every node.
func (w *handoffWatch) look() {
	for i, id := range w.ids {
		now := -1
		for n, r := range w.rts {
			if r.Simulated(id) {
				if now >= 0 {
					w.double++
				}
				now = n
			}
		}
		if f, ok := w.letting[id]; ok && !w.holds(f.src, id) {
			w.release = append(w.release, int(w.tickOf(f.src)-f.tick))
			delete(w.letting, id)
		}
		prev := w.on[i]
		if f, ok := w.taking[id]; ok {
			switch {
			case now == f.src:
				w.returned++
				delete(w.taking, id)
				delete(w.letting, id)
			case now >= 0:
				w.latency = append(w.latency, int(w.tickOf(now)-f.tick))
				delete(w.taking, id)
			}
		} else if prev >= 0 && now < 0 && w.rts[prev].Frozen().Has(id) && w.holds(prev, id) {
			f := inFlight{src: prev, tick: w.tickOf(prev)}
			w.taking[id], w.letting[id] = f, f
		} else if prev >= 0 && now >= 0 && now != prev {
			w.unseen++
		}
		w.on[i] = now
	}
}

// latencyScene is the latency benchmark's world: an 8 km torus of 2 km
// regions owned by four nodes in a checkerboard, so that every region
// border is a node border; 2,000 wanderers spread over it, roaming 1 km
// around their spawn points at 20 m/s (1 m a tick), so that many cross a
// border in a few hundred ticks; 200 of them are viewers, each with a
// client on its node.
func latencyScene() (cells.GridConfig, wander.Config) {
	gc := cells.GridConfig{RegionEdge: 2048}
	gc.World.Width, gc.World.Height = 8192, 8192
	return gc.WithDefaults(), wander.Config{Seed: 3, Entities: 2_000, Accounts: 200, Roam: 1000, Speed: 20}
}

// BenchmarkHandoffLatency is the handoff latency in ticks: from the tick
// a source freezes an entity and sends it (the trigger) to the target's
// first tick that simulates it, over every handoff the wanderers of
// latencyScene make while they roam. One op is one cluster tick.
// schedule=lockstep waits after every tick until every message sent has
// arrived (as zonetest.Cluster.StepSync); schedule=20Hz steps the four
// nodes every 50 ms of real time without waiting for anything, as
// production nodes tick, so a handoff waits for the loopback link as it
// is. Reported: the handoffs completed, the latency's median, p99 and
// max, the share within 2 ticks, and the ticks until the source lets go
// (applies the ack).
func BenchmarkHandoffLatency(b *testing.B) {
	for _, schedule := range []string{"lockstep", "20Hz"} {
		b.Run("schedule="+schedule, func(b *testing.B) {
			gc, cfg := latencyScene()
			c := startBenchCluster(b, 4, gc, checkerboard, func(int) (zone.Module, error) { return wander.New(cfg) })
			c.attachViewers(b, cfg.Accounts, newCountSink)
			rts := make([]*zone.Runtime, len(c.nodes))
			for i, n := range c.nodes {
				rts[i] = n.rt
			}
			ids := make([]ecs.ID, cfg.Entities)
			for i := range ids {
				ids[i], _ = wander.ID(i)
			}
			w := newHandoffWatch(rts, ids)
			var pace *time.Ticker
			if schedule == "20Hz" {
				// The production schedule: a tick every 50 ms, whatever
				// the link has delivered by then.
				pace = time.NewTicker(50 * time.Millisecond)
				defer pace.Stop()
			}
			for b.Loop() {
				if pace == nil {
					c.tick(b)
				} else {
					<-pace.C
					// Index order, so a message may also reach a node
					// later in the order within the same round, as
					// between independent nodes.
					for _, r := range rts {
						r.Step()
					}
				}
				w.look()
			}
			reportLatency(b, w, sumHandoffStats(rts))
		})
	}
}

func reportLatency(b *testing.B, w *handoffWatch, st zone.HandoffStats) {
	if w.double+w.unseen > 0 {
		b.Fatalf("an entity was simulated on two nodes at once %d times, and moved unseen %d times: the latencies would be wrong", w.double, w.unseen)
	}
	b.ReportMetric(float64(len(w.latency)), "handoffs")
	b.ReportMetric(float64(st.Acked), "acked")
	b.ReportMetric(float64(st.Refused+st.Aborted), "given-up")
	b.ReportMetric(float64(w.returned), "returned")
	if len(w.latency) == 0 {
		return // a run too short to see one (-benchtime 1x)
	}
	within := 0
	for _, l := range w.latency {
		if l <= 2 {
			within++
		}
	}
	b.ReportMetric(float64(nearestRank(w.latency, 50)), "p50-ticks")
	b.ReportMetric(float64(nearestRank(w.latency, 99)), "p99-ticks")
	b.ReportMetric(float64(slices.Max(w.latency)), "max-ticks")
	b.ReportMetric(float64(slices.Min(w.latency)), "min-ticks")
	b.ReportMetric(float64(within)/float64(len(w.latency)), "share-le2")
	if len(w.release) > 0 {
		b.ReportMetric(float64(nearestRank(w.release, 50)), "release-p50-ticks")
		b.ReportMetric(float64(slices.Max(w.release)), "release-max-ticks")
	}
}

// ---- snapshot size ----

// BenchmarkHandoffSnapshot is the size of what a handoff sends for a
// player of the reference game: Runtime.HandoffSnapshot of its master and
// of its pet, and the two as one Transfer (a master and its pet move as a
// unit), in bytes as encoded. The game runs alone (one node, 64 players,
// its dens and mobs) for 200 ticks first, so the players walk paths and
// fight. One op snapshots and encodes every player with its pet. Reported:
// the largest master, pet and pair over the players, their medians, and
// the largest snapshot of any entity of the world (a den lists its mobs).
func BenchmarkHandoffSnapshot(b *testing.B) {
	g, err := game.New(game.Config{Seed: 1, Players: 64, Clock: clock.NewFake(benchBoot)})
	if err != nil {
		b.Fatal(err)
	}
	r := g.Runtime()
	b.Cleanup(func() { _ = r.Close() })
	for range 200 {
		g.Step()
	}
	masters, ok := ecs.StoreOf[game.Master](g.World())
	if !ok {
		b.Fatal("the game registers no master store")
	}
	type player struct{ master, pet ecs.ID }
	var players []player
	for a := account.ID(1); a <= 64; a++ {
		id, ok := g.Master(a)
		if !ok {
			b.Fatalf("account %d has no master", a)
		}
		m, _ := masters.Get(id)
		players = append(players, player{id, m.Pet})
	}
	snap := func(id ecs.ID) handoff.Snapshot {
		s, err := r.HandoffSnapshot(id)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	var masterB, petB, pairB []int
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		masterB, petB, pairB = masterB[:0], petB[:0], pairB[:0]
		for _, p := range players {
			m, q := snap(p.master), snap(p.pet)
			buf = handoff.Transfer{Entities: []handoff.Snapshot{m, q}}.Append(buf[:0])
			masterB, petB, pairB = append(masterB, m.Size()), append(petB, q.Size()), append(pairB, len(buf))
		}
	}
	largest, largestKind := 0, ""
	visuals, _ := ecs.StoreOf[game.Visual](g.World())
	g.World().EachEntity(func(id ecs.ID) {
		s, err := r.HandoffSnapshot(id)
		if err != nil {
			return // a ghost or leaving: nothing a handoff would send
		}
		if s.Size() > largest {
			largest, largestKind = s.Size(), "entity"
			if v, ok := visuals.Get(id); ok {
				largestKind = [...]string{"?", "player", "pet", "mob", "den"}[min(int(v.Kind), 4)]
			}
		}
	})
	p := players[0]
	for _, e := range []struct {
		what string
		id   ecs.ID
	}{{"master", p.master}, {"pet", p.pet}} {
		s := snap(e.id)
		parts := ""
		for _, c := range s.Components {
			parts += fmt.Sprintf(" %s=%d", c.Name, len(c.Data))
		}
		b.Logf("%s snapshot: %d bytes; component data bytes:%s", e.what, s.Size(), parts)
	}
	b.Logf("largest snapshot in the world: %d bytes (a %s)", largest, largestKind)
	b.ReportMetric(float64(slices.Max(masterB)), "player-B")
	b.ReportMetric(float64(slices.Max(petB)), "pet-B")
	b.ReportMetric(float64(slices.Max(pairB)), "pair-B")
	b.ReportMetric(float64(nearestRank(masterB, 50)), "player-p50-B")
	b.ReportMetric(float64(nearestRank(petB, 50)), "pet-p50-B")
	b.ReportMetric(float64(nearestRank(pairB, 50)), "pair-p50-B")
	b.ReportMetric(float64(largest), "largest-B")
}

// ---- region move ----

// moveScene is the region move's world: an 8 km torus of 2 km regions,
// rows 0–1 on zone-0 and rows 2–3 on zone-1 (cells.Uniform); 2,000
// wanderers in region (1, 1), which zone-0 owns, 200 of them viewers with
// a client on zone-0. Wanderers never leave their spawn region (no Roam),
// so before a move every one is zone-0's and nothing crosses a border.
func moveScene() (cells.GridConfig, wander.Config, torus.Pos) {
	gc := cells.GridConfig{RegionEdge: 2048}
	gc.World.Width, gc.World.Height = 8192, 8192
	centre := torus.Pos{X: 3072, Y: 3072} // the middle of region (1, 1)
	return gc.WithDefaults(), wander.Config{Seed: 4, Entities: 2_000, Accounts: 200, Area: 1800, Centre: centre}, centre
}

// moveNormalTicks are measured before each move: the normal tick.
const moveNormalTicks = 200

// moveLimit is how many ticks a move may take before the benchmark
// fails.
const moveLimit = 400

// threadCPU is the CPU time of the calling thread
// (clock_gettime(CLOCK_THREAD_CPUTIME_ID), nanoseconds; getrusage's
// RUSAGE_THREAD counts in scheduler ticks here, 4 ms): with the goroutine
// locked to its thread, the CPU its code used, whatever else the shared
// machine ran meanwhile.
func threadCPU() time.Duration {
	const clockThreadCPUTimeID = 3 // CLOCK_THREAD_CPUTIME_ID; the syscall package does not name it
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// tickTimes are one node's step times, wall clock and thread CPU.
type tickTimes struct{ wall, cpu []time.Duration }

func (t *tickTimes) reset() { t.wall, t.cpu = t.wall[:0], t.cpu[:0] }

// BenchmarkRegionMove hands 2,000 entities from one node to the other by
// a region move. One op is one move: moveNormalTicks ticks measured as
// the normal tick, then a table that gives the wanderers' region to the
// other node (zonetest.Cluster.Apply: through etcd, returning once both
// nodes hold it), then ticks until every wanderer is simulated on the new
// owner and the old one has applied every ack. Ops alternate the
// direction (the clients stay attached to zone-0). The cluster is a
// zonetest one (its own embedded etcd, coord leases, the fault-injecting
// network without faults), because a move needs a table that changes; it
// runs in lockstep (every node's Step, then a wait until every message
// has arrived). A tick time is one node's Step: wall clock, and the CPU
// time of the benchmark's thread (the goroutine is locked to it), which
// leaves out what other processes and goroutines took of the 2 shared
// cores meanwhile. Reported, medians over the ops: the ticks and wall
// time of a move (steps and waits; at 20 Hz the move takes ticks × 50
// ms), the worst tick of either node during it, the normal tick (p50 and
// p99 of the ticks before it on the node that then held the entities),
// the ratio of the two, each node's worst tick, and the same in CPU time.
func BenchmarkRegionMove(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	gc, cfg, centre := moveScene()
	c := zonetest.Start(b, zonetest.Config{
		Nodes: 2, Grid: gc,
		Module: func(int, string) (zone.Module, error) { return wander.New(cfg) },
	})
	rts := []*zone.Runtime{c.Nodes[0].Runtime, c.Nodes[1].Runtime}
	region := c.Grid.RegionOf(centre)
	if rts[0].Table().Owner(region) != c.Nodes[0].Name {
		b.Fatal("the wanderers' region is not zone-0's")
	}
	for a := account.ID(1); a <= account.ID(cfg.Accounts); a++ {
		rts[0].Attach(a, &countSink{})
	}
	ids := make([]ecs.ID, cfg.Entities)
	for i := range ids {
		ids[i], _ = wander.ID(i)
		if !rts[0].Simulated(ids[i]) {
			b.Fatalf("wanderer %d is not simulated on zone-0", i)
		}
	}
	times := make([]tickTimes, 2) // this op's, per node
	// Each Step runs under the pprof label tick=normal:ROLE or
	// tick=move:ROLE:K (ROLE src or dst, K the tick of the move from 0),
	// so that a CPU profile of this benchmark tells the move's ticks from
	// the normal ones (go tool pprof -tagfocus tick=move), and the worst
	// one from the rest.
	ctx := context.Background()
	src := 0
	tick := func(moving bool) {
		for i, r := range rts {
			role := "dst"
			if i == src {
				role = "src"
			}
			ls := pprof.Labels("tick", "normal:"+role)
			if moving {
				ls = pprof.Labels("tick", fmt.Sprintf("move:%s:%d", role, len(times[i].wall)))
			}
			c0, t0 := threadCPU(), time.Now()
			pprof.Do(ctx, ls, func(context.Context) { r.Step() })
			t, c := &times[i], threadCPU()
			t.wall, t.cpu = append(t.wall, time.Since(t0)), append(t.cpu, c-c0)
		}
		c.Sync(10 * time.Second)
	}
	for range benchWarmTicks {
		tick(false)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var moveTicks, moveWall, applyWall, worst, worstSrc, worstDst, normal50, normal99, ratio, worstCPU, normalCPU50, normalCPU99, ratioCPU []float64
	version := rts[0].Table().Version()
	for b.Loop() {
		dst := 1 - src
		runtime.GC() // the last op's garbage is not this one's
		times[0].reset()
		times[1].reset()
		for range moveNormalTicks {
			tick(false)
		}
		before := tickTimes{slices.Clone(times[src].wall), slices.Clone(times[src].cpu)}
		acked0 := rts[src].HandoffStats().Acked
		version++
		t, err := rts[0].Table().WithOwners(version, map[cells.RegionID]string{region: c.Nodes[dst].Name})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		c.Apply(t)
		applyWall = append(applyWall, ms(time.Since(t0)))
		times[0].reset()
		times[1].reset()
		start, n := time.Now(), 0
		for !moved(rts, src, dst, ids, acked0) {
			if n == moveLimit {
				b.Fatalf("after %d ticks %d of %d wanderers are simulated on %s (handoffs %+v)",
					n, countSimulated(rts[dst], ids), len(ids), c.Nodes[dst].Name, sumHandoffStats(rts))
			}
			tick(true)
			n++
		}
		moveWall = append(moveWall, ms(time.Since(start)))
		if len(moveTicks) == 0 {
			for _, i := range []int{src, dst} {
				b.Logf("move %s -> %s, ticks on %s (wall / thread CPU): %s", c.Nodes[src].Name, c.Nodes[dst].Name, c.Nodes[i].Name, tickList(times[i]))
			}
		}
		moveTicks = append(moveTicks, float64(n))
		ws, wd := slices.Max(times[src].wall), slices.Max(times[dst].wall)
		p50, p99 := nearestRank(before.wall, 50), nearestRank(before.wall, 99)
		worst, worstSrc, worstDst = append(worst, ms(max(ws, wd))), append(worstSrc, ms(ws)), append(worstDst, ms(wd))
		normal50, normal99 = append(normal50, ms(p50)), append(normal99, ms(p99))
		ratio = append(ratio, float64(max(ws, wd))/float64(p99))
		wc, cp99 := max(slices.Max(times[src].cpu), slices.Max(times[dst].cpu)), nearestRank(before.cpu, 99)
		worstCPU, normalCPU99 = append(worstCPU, ms(wc)), append(normalCPU99, ms(cp99))
		normalCPU50 = append(normalCPU50, ms(nearestRank(before.cpu, 50)))
		ratioCPU = append(ratioCPU, float64(wc)/float64(cp99))
		src = dst
	}
	st := sumHandoffStats(rts)
	if st.Refused+st.Aborted+st.Stale > 0 {
		b.Logf("handoffs %+v: some were refused, aborted or stale", st)
	}
	med := func(xs []float64) float64 { return nearestRank(xs, 50) }
	b.ReportMetric(float64(len(ids)), "entities")
	b.ReportMetric(med(moveTicks), "move-ticks")
	b.ReportMetric(med(moveWall), "move-wall-ms")
	b.ReportMetric(med(applyWall), "apply-ms")
	b.ReportMetric(med(worst), "worst-ms")
	b.ReportMetric(med(worstSrc), "worst-src-ms")
	b.ReportMetric(med(worstDst), "worst-dst-ms")
	b.ReportMetric(med(normal50), "normal-p50-ms")
	b.ReportMetric(med(normal99), "normal-p99-ms")
	b.ReportMetric(med(ratio), "worst/normal-p99")
	b.ReportMetric(med(worstCPU), "worst-cpu-ms")
	b.ReportMetric(med(normalCPU50), "normal-cpu-p50-ms")
	b.ReportMetric(med(normalCPU99), "normal-cpu-p99-ms")
	b.ReportMetric(med(ratioCPU), "cpu-worst/normal-p99")
	b.ReportMetric(float64(st.Refused+st.Aborted), "given-up")
}

// tickList prints a node's step times, "wall/cpu" in ms.
func tickList(t tickTimes) string {
	out := ""
	for i := range t.wall {
		out += fmt.Sprintf(" %.1f/%.1f", float64(t.wall[i].Microseconds())/1000, float64(t.cpu[i].Microseconds())/1000)
	}
	return out
}

// moved reports whether every id is simulated on dst and src has applied
// an ack for each since it had acked0.
func moved(rts []*zone.Runtime, src, dst int, ids []ecs.ID, acked0 int) bool {
	if rts[src].HandoffStats().Acked-acked0 < len(ids) {
		return false
	}
	return countSimulated(rts[dst], ids) == len(ids)
}

func countSimulated(r *zone.Runtime, ids []ecs.ID) int {
	n := 0
	for _, id := range ids {
		if r.Simulated(id) {
			n++
		}
	}
	return n
}
