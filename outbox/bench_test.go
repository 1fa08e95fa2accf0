package outbox

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/torus"
)

// benchScene is the load: 2,000 subscribers with 11 × 11 × 3 views
// and 20,000 entities in a 200 × 200 chunk square; each tick one entity in
// eight resends its position (every 8th step) and one in twenty its health.
type benchScene struct {
	world torus.World
	subs  *interest.Subscriptions[acct]
	vis   *interest.Visibility[acct, ent]
	pos   []torus.Pos
	hp    []uint32
	tick  uint64
	// waypoints > 0 makes the position message carry a path of that many
	// points, like the spec's Path component: a costlier encode.
	waypoints int
}

func (b *benchScene) AppendObserversOf(dst []acct, e ent) []acct {
	return b.vis.AppendObserversOf(dst, e)
}
func (b *benchScene) OwnerOf(ent) (acct, bool)              { return 0, false }
func (b *benchScene) AppendParty(dst []acct, _ acct) []acct { return dst }

func (b *benchScene) positionPayload(dst []byte, e ent) []byte {
	p := b.pos[e-1]
	dst = binary.AppendUvarint(dst, uint64(p.X*100))
	dst = binary.AppendUvarint(dst, uint64(p.Y*100))
	dst = binary.AppendUvarint(dst, uint64(p.Z*100))
	for i := range b.waypoints {
		step := float64(i+1) * 1.7
		dst = binary.AppendVarint(dst, int64(math.Round((p.X+step)*100)))
		dst = binary.AppendVarint(dst, int64(math.Round((p.Y-step)*100)))
		dst = binary.AppendVarint(dst, int64(math.Round(p.Z*100)))
	}
	return dst
}

func (b *benchScene) healthPayload(dst []byte, e ent) []byte {
	return binary.AppendUvarint(dst, uint64(b.hp[e-1]))
}

func newBenchScene(tb testing.TB, subscribers, entities int) *benchScene {
	tb.Helper()
	w := torus.Default()
	rng := rand.New(rand.NewPCG(3, 4))
	b := &benchScene{world: w, subs: interest.NewSubscriptions[acct](w)}
	b.vis = interest.NewVisibility[acct, ent](b.subs)
	span := 200 * w.ChunkEdge()
	var m interest.Manifest
	for s := range subscribers {
		a := acct(s + 1)
		anchor := w.ChunkOf(torus.Pos{X: rng.Float64()*span - span/2, Y: rng.Float64()*span - span/2, Z: 100})
		b.subs.ViewManifest(a, anchor, interest.DefaultView(), &m)
		b.subs.Apply(a, m)
		for _, c := range m.Added {
			b.subs.MarkSent(a, c)
		}
	}
	for i := range entities {
		p := w.Normalise(torus.Pos{X: rng.Float64()*span - span/2, Y: rng.Float64()*span - span/2, Z: 100})
		b.pos = append(b.pos, p)
		b.hp = append(b.hp, 1000)
		b.vis.Reindex(ent(i+1), w.ChunkOf(p))
	}
	b.vis.Drain()
	return b
}

// dirtyThisTick calls mark for this tick's dirty components.
func (b *benchScene) dirtyThisTick(mark func(e ent, t ComponentType)) {
	b.tick++
	for i := range b.pos {
		e := ent(i + 1)
		if uint64(i)%8 == b.tick%8 {
			b.pos[i].X = math.Mod(b.pos[i].X+0.25, 128_000)
			mark(e, tPosition)
		}
		if uint64(i)%20 == b.tick%20 {
			b.hp[i]--
			mark(e, tHealth)
		}
	}
}

type discard struct{ bytes int }

func (d *discard) Deliver(_ uint64, frames [][]byte) {
	for _, f := range frames {
		d.bytes += len(f)
	}
}

func newBenchOutbox(tb testing.TB, b *benchScene, sink Sink, subscribers int) *Outbox[acct, ent] {
	o := New[acct, ent](b)
	for _, enc := range []EncoderFuncs[acct, ent]{
		{WireType: tPosition, AudienceFunc: func(ent) Audience[acct] { return Public[acct]() }, PayloadFunc: b.positionPayload},
		{WireType: tHealth, AudienceFunc: func(ent) Audience[acct] { return Public[acct]() }, PayloadFunc: b.healthPayload},
	} {
		if err := o.Register(enc); err != nil {
			tb.Fatal(err)
		}
	}
	for s := range subscribers {
		o.Attach(acct(s+1), sink)
	}
	return o
}

// BenchmarkFlush compares, on the same scene, the outbox (encode once per
// audience) with the per-recipient baseline, for a small position message
// (3 varints) and a path message (position + 8 waypoints). One op = one
// tick: mark ~3,500 dirty components, resolve audiences, encode, deliver
// one batch per subscriber.
func BenchmarkFlush(b *testing.B) {
	for _, msg := range []struct {
		name      string
		waypoints int
	}{{"position", 0}, {"path8", 8}} {
		b.Run("encode-once/"+msg.name, func(b *testing.B) { benchEncodeOnce(b, msg.waypoints) })
		b.Run("per-recipient/"+msg.name, func(b *testing.B) { benchPerRecipient(b, msg.waypoints) })
	}
}

func benchEncodeOnce(b *testing.B, waypoints int) {
	sc := newBenchScene(b, 2000, 20000)
	sc.waypoints = waypoints
	sink := &discard{}
	o := newBenchOutbox(b, sc, sink, 2000)
	var st Stats
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		sc.dirtyThisTick(o.MarkDirty)
		st = o.Flush(sc.tick)
	}
	cpu.report(b)
	b.ReportMetric(float64(st.BytesEncoded), "bytes-encoded/tick")
	b.ReportMetric(float64(st.BytesDelivered), "bytes-delivered/tick")
	b.ReportMetric(float64(st.PayloadsEncoded), "encodes/tick")
	b.ReportMetric(float64(st.Batches), "batches/tick")
}

// benchPerRecipient is the baseline the spec replaces: the same fan-out,
// but each recipient's message is encoded for it alone (sendToPlayer in a
// loop), into that recipient's own batch buffer.
func benchPerRecipient(b *testing.B, waypoints int) {
	sc := newBenchScene(b, 2000, 20000)
	sc.waypoints = waypoints
	sink := &discard{}
	// Recipients are found through a map, as a registry of sockets would.
	batches := make(map[acct][]byte, 2000)
	var touched []acct
	var obs []acct
	var payload []byte
	var one [1][]byte
	var encodedBytes, encodes int
	mark := func(e ent, t ComponentType) {
		obs = sc.vis.AppendObserversOf(obs[:0], e)
		for _, a := range obs {
			if t == tPosition {
				payload = sc.positionPayload(payload[:0], e)
			} else {
				payload = sc.healthPayload(payload[:0], e)
			}
			encodes++
			n := len(batches[a])
			if n == 0 {
				touched = append(touched, a)
			}
			batches[a] = AppendComponentFrame(batches[a], uint64(e), t, payload)
			encodedBytes += len(batches[a]) - n
		}
	}
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		encodedBytes, encodes = 0, 0
		sc.dirtyThisTick(mark)
		for _, a := range touched {
			one[0] = batches[a]
			sink.Deliver(sc.tick, one[:])
			batches[a] = batches[a][:0]
		}
		touched = touched[:0]
	}
	cpu.report(b)
	b.ReportMetric(float64(encodedBytes), "bytes-encoded/tick")
	b.ReportMetric(float64(encodedBytes), "bytes-delivered/tick")
	b.ReportMetric(float64(encodes), "encodes/tick")
}

// BenchmarkFlushAppearBursts: 50 entities appear to 30 viewers each tick
// (a crowd walking into view); bursts share component frames.
func BenchmarkFlushAppearBursts(b *testing.B) {
	sc := newBenchScene(b, 0, 50)
	sink := &discard{}
	o := newBenchOutbox(b, sc, sink, 30)
	b.ReportAllocs()
	for b.Loop() {
		for a := acct(1); a <= 30; a++ {
			for e := ent(1); e <= 50; e++ {
				o.Appear(a, e)
			}
		}
		o.Flush(0)
	}
}

type cpuClock struct {
	start int64
	ok    bool
}

// startCPU collects the setup's garbage first, so that the GC work charged
// to the measured loop is the loop's own.
func startCPU() cpuClock {
	runtime.GC()
	n, ok := processCPU()
	return cpuClock{start: n, ok: ok}
}

// report adds cpu-ns/op: process CPU time per op (includes the GC's).
func (c cpuClock) report(b *testing.B) {
	if n, ok := processCPU(); ok && c.ok && b.N > 0 {
		b.ReportMetric(float64(n-c.start)/float64(b.N), "cpu-ns/op")
	}
}
