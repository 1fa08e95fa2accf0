package interest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/torus"
)

// scene drives Subscriptions, Visibility and Residency through a random
// script of view moves, partial sends, unsends, forgets, entity walks,
// spawns and deaths in a cluster of objects around local (0, 0). The same
// script can be played at any chunk offset; at offset 0 the cluster
// straddles both seams.
type scene struct {
	t      *testing.T
	world  torus.World
	offset int32 // chunks added to X and Y of every object
	rng    *rand.Rand
	check  bool

	subs *Subscriptions[uint64]
	vis  *Visibility[uint64, eid]
	res  *Residency

	anchors map[uint64]ChunkPos // subscriber → local anchor chunk
	pos     map[eid]torus.Pos   // entity → local position
	nextEnt eid
	log     []string
}

func newScene(t *testing.T, seed uint64, offset int32, check bool) *scene {
	w := torus.Default()
	subs := NewSubscriptions[uint64](w)
	res, err := NewResidency(w, ResidencyConfig{AnchorRadius: 2, MaterialiseBudget: 10})
	if err != nil {
		t.Fatal(err)
	}
	FollowClients(res, subs)
	return &scene{
		t: t, world: w, offset: offset, rng: rand.New(rand.NewPCG(seed, 99)), check: check,
		subs: subs, vis: NewVisibility[uint64, eid](subs), res: res,
		anchors: map[uint64]ChunkPos{}, pos: map[eid]torus.Pos{}, nextEnt: 1,
	}
}

func (s *scene) toWorldChunk(c ChunkPos) ChunkPos {
	return ChunkPos{X: c.X + s.offset, Y: c.Y + s.offset, Slab: c.Slab}
}

func (s *scene) toWorldPos(p torus.Pos) torus.Pos {
	d := float64(s.offset) * s.world.ChunkEdge()
	return torus.Pos{X: p.X + d, Y: p.Y + d, Z: p.Z}
}

// toLocal maps a world chunk back to the local frame, choosing the image
// nearest the cluster so both runs print the same coordinates.
func (s *scene) toLocalColumn(c Column) Column {
	dx, dy, _ := s.world.ChunkDelta(ChunkPos{X: s.offset, Y: s.offset}, ChunkPos{X: c.X, Y: c.Y})
	return Column{X: int32(dx), Y: int32(dy)}
}

// localOrder sorts world chunks by their local coordinates, so that the
// random choices made over them do not depend on where the seam is.
func (s *scene) localOrder(cs []ChunkPos) []ChunkPos {
	local := func(c ChunkPos) ChunkPos {
		col := s.toLocalColumn(ColumnOf(c))
		return ChunkPos{X: col.X, Y: col.Y, Slab: c.Slab}
	}
	slices.SortFunc(cs, func(a, b ChunkPos) int {
		la, lb := local(a), local(b)
		if la.Slab != lb.Slab {
			return int(la.Slab - lb.Slab)
		}
		if la.Y != lb.Y {
			return int(la.Y - lb.Y)
		}
		return int(la.X - lb.X)
	})
	return cs
}

func (s *scene) randLocalPos() torus.Pos {
	return torus.Pos{X: s.rng.Float64()*600 - 300, Y: s.rng.Float64()*600 - 300, Z: s.rng.Float64()*700 - 200}
}

// visibleNow is the naive model: every (subscriber, entity) whose chunk the
// subscriber holds, found by scanning everything.
func (s *scene) visibleNow() map[[2]uint64]bool {
	out := map[[2]uint64]bool{}
	for sub := range s.anchors {
		for e, p := range s.pos {
			if s.subs.IsSent(sub, s.world.ChunkOf(s.toWorldPos(p))) {
				out[[2]uint64{sub, uint64(e)}] = true
			}
		}
	}
	return out
}

func (s *scene) tick(n int) {
	before := s.visibleNow()
	forgotten := map[uint64]bool{}
	destroyReason := map[[2]uint64]VanishReason{}
	view := View{Radius: 2, Slabs: 1, ReleaseMargin: 1}

	// Subscribers: join, move their view, receive part of what is pending,
	// lose a chunk, or leave.
	for sub := uint64(1); sub <= 5; sub++ {
		a, present := s.anchors[sub]
		switch r := s.rng.IntN(10); {
		case !present && r < 6:
			a = ChunkPos{X: int32(s.rng.IntN(13) - 6), Y: int32(s.rng.IntN(13) - 6), Slab: int32(s.rng.IntN(3) - 1)}
		case present && r == 0:
			s.subs.Forget(sub)
			delete(s.anchors, sub)
			forgotten[sub] = true
			if s.rng.IntN(2) == 0 {
				continue
			}
			// Reconnect within the same tick.
		case present && r < 6:
			a.X += int32(s.rng.IntN(5) - 2)
			a.Y += int32(s.rng.IntN(5) - 2)
			a.Slab += int32(s.rng.IntN(3) - 1)
		case !present:
			continue
		}
		s.anchors[sub] = a
		var m Manifest
		s.subs.ViewManifest(sub, s.toWorldChunk(a), view, &m)
		s.subs.Apply(sub, m)
		for _, c := range s.localOrder(s.subs.AppendUnsent(nil, sub)) {
			if s.rng.IntN(4) != 0 { // a budget: some chunks wait a tick
				s.subs.MarkSent(sub, c)
			}
		}
		if held := s.localOrder(s.subs.AppendAnnounced(nil, sub)); len(held) > 0 && s.rng.IntN(5) == 0 {
			s.subs.Unsend(sub, held[s.rng.IntN(len(held))])
		}
		s.res.SetAnchor(AnchorID(sub), ColumnOf(s.toWorldChunk(a)))
	}
	for sub := range forgotten {
		if _, back := s.anchors[sub]; !back {
			s.res.RemoveAnchor(AnchorID(sub))
		}
	}

	// Entities: spawn, walk (sometimes across several chunks), die.
	for range s.rng.IntN(4) {
		e := s.nextEnt
		s.nextEnt++
		s.pos[e] = s.randLocalPos()
		s.vis.Reindex(e, s.world.ChunkOf(s.toWorldPos(s.pos[e])))
	}
	ents := make([]eid, 0, len(s.pos))
	for e := range s.pos {
		ents = append(ents, e)
	}
	slices.Sort(ents)
	for _, e := range ents {
		p := s.pos[e]
		switch r := s.rng.IntN(20); {
		case r == 0:
			reason := []VanishReason{Gone, Death}[s.rng.IntN(2)]
			for sub := range s.anchors {
				if s.subs.IsSent(sub, s.world.ChunkOf(s.toWorldPos(p))) {
					destroyReason[[2]uint64{sub, uint64(e)}] = reason
				}
			}
			s.vis.Remove(e, reason)
			delete(s.pos, e)
		case r < 12:
			p.X += s.rng.Float64()*80 - 40
			p.Y += s.rng.Float64()*80 - 40
			p.Z += s.rng.Float64()*60 - 30
			s.pos[e] = p
			s.vis.Reindex(e, s.world.ChunkOf(s.toWorldPos(p)))
		}
	}

	ds := s.vis.Drain()
	for _, line := range drained(ds) {
		s.log = append(s.log, fmt.Sprintf("t%d %s", n, line))
	}
	for _, e := range ents {
		if _, alive := s.pos[e]; !alive {
			continue
		}
		obs := s.vis.ObserversOf(e)
		slices.Sort(obs)
		s.log = append(s.log, fmt.Sprintf("t%d observers %d %v", n, e, obs))
	}
	ch := s.res.Commit()
	for _, c := range ch.Materialised {
		s.log = append(s.log, fmt.Sprintf("t%d materialise %v", n, s.toLocalColumn(c)))
	}
	// Releases happen in sorted world order, which legitimately differs
	// with the seam's place; what is torn down is a set.
	var gone []string
	for _, c := range ch.Dematerialised {
		gone = append(gone, fmt.Sprintf("t%d dematerialise %v", n, s.toLocalColumn(c)))
	}
	slices.Sort(gone)
	s.log = append(s.log, gone...)

	if !s.check {
		return
	}
	// Compare the drain with the naive model's before/after difference.
	after := s.visibleNow()
	for sub := range forgotten {
		for k := range before {
			if k[0] == sub {
				delete(before, k)
			}
		}
	}
	want := map[string]bool{}
	for k := range after {
		if !before[k] {
			want[fmt.Sprint(k[0], " +", k[1])] = true
		}
	}
	for k := range before {
		if !after[k] {
			reason, ok := destroyReason[k]
			if !ok {
				reason = OutOfSight
			}
			want[fmt.Sprint(k[0], " -", k[1], "(", reason, ")")] = true
		}
	}
	got := map[string]bool{}
	for _, d := range ds {
		if len(d.Appeared) == 0 && len(d.Vanished) == 0 {
			s.t.Fatalf("tick %d: empty delivery for %d", n, d.Subscriber)
		}
		for _, e := range d.Appeared {
			got[fmt.Sprint(d.Subscriber, " +", uint64(e))] = true
		}
		for _, v := range d.Vanished {
			got[fmt.Sprint(d.Subscriber, " -", uint64(v.Entity), "(", v.Reason, ")")] = true
		}
	}
	for k := range want {
		if !got[k] {
			s.t.Fatalf("tick %d: model expects %q, drain lacks it (drain %v)", n, k, drained(ds))
		}
	}
	for k := range got {
		if !want[k] {
			s.t.Fatalf("tick %d: drain has %q, model does not", n, k)
		}
	}
	// Residency against brute force: a column's holders are one for all
	// clients (any chunk of it held by anyone) plus one per anchor within
	// radius 2; after the commit, resident columns are all held.
	for x := int32(-12); x <= 12; x++ {
		for y := int32(-12); y <= 12; y++ {
			col := ColumnOf(s.toWorldChunk(ChunkPos{X: x, Y: y}))
			want := 0
			if s.subs.ColumnCount(col) > 0 {
				want++
			}
			for _, a := range s.anchors {
				if s.world.ChunkDistance(s.toWorldChunk(a), ChunkPos{X: col.X, Y: col.Y}) <= 2 {
					want++
				}
			}
			if got := s.res.Holders(col); got != want {
				s.t.Fatalf("tick %d: column (%d,%d) has %d holders, brute force says %d", n, x, y, got, want)
			}
			if s.res.IsResident(col) && want == 0 {
				s.t.Fatalf("tick %d: column (%d,%d) resident with no holder after commit", n, x, y)
			}
		}
	}
	// Subscription invariants: sent ⊆ announced; column counts add up.
	perColumn := map[Column]int{}
	for sub := range s.anchors {
		for _, c := range s.subs.AppendAnnounced(nil, sub) {
			if s.subs.IsSent(sub, c) {
				perColumn[ColumnOf(c)]++
			}
		}
	}
	for col, n := range perColumn {
		if got := s.subs.ColumnCount(col); got != n {
			s.t.Fatalf("column %v count %d, want %d", col, got, n)
		}
	}
}

func TestVisibilityMatchesNaiveModel(t *testing.T) {
	for seed := range uint64(40) {
		s := newScene(t, seed, 0, true)
		for n := range 25 {
			s.tick(n)
		}
	}
}

// TestWrapAwareEqualsTranslated plays each random scene twice: straddling
// both seams, and translated by 2000 chunks so that no seam lies between
// any two objects. Everything observable must be identical.
func TestWrapAwareEqualsTranslated(t *testing.T) {
	for seed := range uint64(40) {
		onSeam := newScene(t, seed, 0, false)
		away := newScene(t, seed, 2000, false)
		for n := range 25 {
			onSeam.tick(n)
			away.tick(n)
		}
		if !slices.Equal(onSeam.log, away.log) {
			for i := range min(len(onSeam.log), len(away.log)) {
				if onSeam.log[i] != away.log[i] {
					t.Fatalf("seed %d: first difference at line %d:\n on seam: %s\n away:    %s", seed, i, onSeam.log[i], away.log[i])
				}
			}
			t.Fatalf("seed %d: logs differ in length %d vs %d", seed, len(onSeam.log), len(away.log))
		}
		if len(onSeam.log) == 0 {
			t.Fatalf("seed %d: the scene produced nothing to compare", seed)
		}
	}
}
