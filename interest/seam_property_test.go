package interest

import (
	"cmp"
	"fmt"
	"math"
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
//
// The scene keeps its own model of what every subscriber announced and was
// sent and where every entity stands, in the local frame, where no seam
// lies between any two objects: the model is plain integer differences and
// shares no code with the package (a model that asked the Subscriptions
// what is sent would share every bug of it). Every key the scene hands the
// package is an alias of the world key, shifted by whole turns of the
// torus, so a missing normalisation shows in both runs of a seed.
type scene struct {
	t      *testing.T
	world  torus.World
	offset int32 // chunks added to X and Y of every object
	rng    *rand.Rand
	salt   uint64 // this tick's alias choice; see key
	check  bool

	subs *Subscriptions[uint64]
	vis  *Visibility[uint64, eid]
	res  *Residency

	anchors map[uint64]ChunkPos          // subscriber → local anchor chunk
	held    map[uint64]map[ChunkPos]bool // subscriber → local announced chunk → sent
	pos     map[eid]torus.Pos            // entity → local position
	nextEnt eid
	log     []string
}

// seamView is the view every subscriber of a scene uses.
var seamView = View{Radius: 2, Slabs: 1, ReleaseMargin: 1}

func newScene(t *testing.T, seed uint64, offset int32, check bool) *scene {
	w := torus.Default()
	subs := NewSubscriptions[uint64](w)
	res, err := NewResidency(w, ResidencyConfig{AnchorRadius: 2, MaterialiseBudget: 10})
	if err != nil {
		t.Fatal(err)
	}
	FollowClients(res, subs)
	return &scene{
		t: t, world: w, offset: offset, rng: rand.New(rand.NewPCG(seed, 99)), salt: seed, check: check,
		subs: subs, vis: NewVisibility[uint64, eid](subs), res: res,
		anchors: map[uint64]ChunkPos{}, held: map[uint64]map[ChunkPos]bool{}, pos: map[eid]torus.Pos{}, nextEnt: 1,
	}
}

// key returns a world key of local chunk c: translated by the offset and by
// −1, 0 or +1 turns of the torus on each axis. The turns are a pure
// function of c and the tick, so the script's draws and the order of map
// walks never change them and a seed replays exactly.
func (s *scene) key(c ChunkPos) ChunkPos {
	h := s.salt ^ uint64(uint32(c.X))*0x9e3779b97f4a7c15 ^ uint64(uint32(c.Y))*0xc2b2ae3d27d4eb4f ^ uint64(uint32(c.Slab))*0x165667b19e3779f9
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 29
	tx, ty := int32(h%3)-1, int32(h/3%3)-1
	return ChunkPos{
		X:    c.X + s.offset + tx*int32(s.world.ChunksX()),
		Y:    c.Y + s.offset + ty*int32(s.world.ChunksY()),
		Slab: c.Slab,
	}
}

func (s *scene) columnKey(c Column) Column { return ColumnOf(s.key(ChunkPos{X: c.X, Y: c.Y})) }

// toLocalColumn maps a world column back to the local frame, choosing the
// image nearest the cluster so both runs print the same coordinates.
func (s *scene) toLocalColumn(c Column) Column {
	dx, dy, _ := s.world.ChunkDelta(ChunkPos{X: s.offset, Y: s.offset}, ChunkPos{X: c.X, Y: c.Y})
	return Column{X: int32(dx), Y: int32(dy)}
}

// chunkOf is the local chunk of a local position.
func (s *scene) chunkOf(p torus.Pos) ChunkPos {
	e, h := s.world.ChunkEdge(), s.world.SlabHeight()
	return ChunkPos{X: int32(math.Floor(p.X / e)), Y: int32(math.Floor(p.Y / e)), Slab: int32(math.Floor(p.Z / h))}
}

func (s *scene) randLocalPos() torus.Pos {
	return torus.Pos{X: s.rng.Float64()*600 - 300, Y: s.rng.Float64()*600 - 300, Z: s.rng.Float64()*700 - 200}
}

func absDiff(a, b int32) int32 {
	if a < b {
		return b - a
	}
	return a - b
}

// follow moves the model of sub's announced set to seamView around local
// anchor a: chunks past the release margin go, the view's chunks come
// (unsent), the rest keep their state.
func (s *scene) follow(sub uint64, a ChunkPos) {
	held := s.held[sub]
	if held == nil {
		held = map[ChunkPos]bool{}
		s.held[sub] = held
	}
	r, sl, m := int32(seamView.Radius), int32(seamView.Slabs), int32(seamView.ReleaseMargin)
	for c := range held {
		if max(absDiff(c.X, a.X), absDiff(c.Y, a.Y)) > r+m || absDiff(c.Slab, a.Slab) > sl+m {
			delete(held, c)
		}
	}
	for z := a.Slab - sl; z <= a.Slab+sl; z++ {
		for y := a.Y - r; y <= a.Y+r; y++ {
			for x := a.X - r; x <= a.X+r; x++ {
				c := ChunkPos{X: x, Y: y, Slab: z}
				if _, ok := held[c]; !ok {
					held[c] = false
				}
			}
		}
	}
}

// modelChunks returns sub's announced local chunks (only the unsent ones
// with pendingOnly) in (slab, y, x) order, so the script's choices over
// them do not depend on where the seam is.
func (s *scene) modelChunks(sub uint64, pendingOnly bool) []ChunkPos {
	var out []ChunkPos
	for c, sent := range s.held[sub] {
		if !pendingOnly || !sent {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b ChunkPos) int {
		return cmp.Or(cmp.Compare(a.Slab, b.Slab), cmp.Compare(a.Y, b.Y), cmp.Compare(a.X, b.X))
	})
	return out
}

// visibleNow is the model of visibility: every (subscriber, entity) whose
// local chunk the subscriber was sent.
func (s *scene) visibleNow() map[[2]uint64]bool {
	out := map[[2]uint64]bool{}
	for sub, held := range s.held {
		for e, p := range s.pos {
			if held[s.chunkOf(p)] {
				out[[2]uint64{sub, uint64(e)}] = true
			}
		}
	}
	return out
}

func (s *scene) run(ticks int) error {
	for n := range ticks {
		if err := s.tick(n); err != nil {
			return err
		}
	}
	return nil
}

func (s *scene) tick(n int) error {
	s.salt = s.salt*0x5851f42d4c957f2d + 1442695040888963407
	before := s.visibleNow()
	forgotten := map[uint64]bool{}
	destroyReason := map[[2]uint64]VanishReason{}

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
			delete(s.held, sub)
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
		s.subs.ViewManifest(sub, s.key(a), seamView, &m)
		s.subs.Apply(sub, m)
		s.follow(sub, a)
		held := s.held[sub]
		for _, c := range s.modelChunks(sub, true) {
			if s.rng.IntN(4) != 0 { // a budget: some chunks wait a tick
				if !s.subs.MarkSent(sub, s.key(c)) {
					return fmt.Errorf("tick %d: MarkSent(%d, local %v) refused an announced, unsent chunk", n, sub, c)
				}
				held[c] = true
			}
		}
		if all := s.modelChunks(sub, false); len(all) > 0 && s.rng.IntN(5) == 0 {
			c := all[s.rng.IntN(len(all))]
			if got := s.subs.Unsend(sub, s.key(c)); got != held[c] {
				return fmt.Errorf("tick %d: Unsend(%d, local %v) = %v, the model says %v", n, sub, c, got, held[c])
			}
			held[c] = false
		}
		s.res.SetAnchor(AnchorID(sub), ColumnOf(s.key(a)))
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
		s.vis.Reindex(e, s.key(s.chunkOf(s.pos[e])))
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
			for sub, held := range s.held {
				if held[s.chunkOf(p)] {
					destroyReason[[2]uint64{sub, uint64(e)}] = reason
				}
			}
			s.vis.Remove(e, reason)
			delete(s.pos, e)
		case r < 12:
			from := s.chunkOf(p)
			p.X += s.rng.Float64()*80 - 40
			p.Y += s.rng.Float64()*80 - 40
			p.Z += s.rng.Float64()*60 - 30
			s.pos[e] = p
			if got, want := s.vis.Reindex(e, s.key(s.chunkOf(p))), s.chunkOf(p) != from; got != want {
				return fmt.Errorf("tick %d: Reindex(%d) reported a chunk change %v, the model says %v", n, e, got, want)
			}
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
		if !s.check {
			continue
		}
		var want []uint64
		for sub, held := range s.held {
			if held[s.chunkOf(s.pos[e])] {
				want = append(want, sub)
			}
		}
		slices.Sort(want)
		if !slices.Equal(obs, want) {
			return fmt.Errorf("tick %d: observers of %d are %v, the model says %v", n, e, obs, want)
		}
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
		return nil
	}
	if err := s.checkSubscriptions(n); err != nil {
		return err
	}
	// Compare the drain with the model's before/after difference.
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
			return fmt.Errorf("tick %d: empty delivery for %d", n, d.Subscriber)
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
			return fmt.Errorf("tick %d: model expects %q, drain lacks it (drain %v)", n, k, drained(ds))
		}
	}
	for k := range got {
		if !want[k] {
			return fmt.Errorf("tick %d: drain has %q, model does not", n, k)
		}
	}
	return s.checkResidency(n)
}

// checkSubscriptions compares every subscriber's announced and sent sets
// with the model's, and the view's own predicates (which ViewManifest does
// not all use) with plain differences around one anchor.
func (s *scene) checkSubscriptions(n int) error {
	if a, ok := s.anchors[uint64(n%5+1)]; ok {
		if err := s.checkViewPredicates(n, a); err != nil {
			return err
		}
	}
	for sub, held := range s.held {
		sent := 0
		for c, isSent := range held {
			k := s.key(c)
			if !s.subs.IsAnnounced(sub, k) {
				return fmt.Errorf("tick %d: %d does not hold local %v (anchor %v), the model does", n, sub, c, s.anchors[sub])
			}
			if s.subs.IsSent(sub, k) != isSent {
				return fmt.Errorf("tick %d: %d sent local %v is %v, the model says %v", n, sub, c, !isSent, isSent)
			}
			if isSent {
				sent++
			}
		}
		if got := s.subs.AnnouncedCount(sub); got != len(held) {
			return fmt.Errorf("tick %d: %d announced %d chunks, the model %d (anchor %v)", n, sub, got, len(held), s.anchors[sub])
		}
		if got := s.subs.SentCount(sub); got != sent {
			return fmt.Errorf("tick %d: %d was sent %d chunks, the model %d", n, sub, got, sent)
		}
	}
	return nil
}

// checkViewPredicates asks seamView's Wants and Keeps, with aliased keys,
// about every chunk up to one past the release margin around local anchor
// a.
func (s *scene) checkViewPredicates(n int, a ChunkPos) error {
	r, sl, m := int32(seamView.Radius), int32(seamView.Slabs), int32(seamView.ReleaseMargin)
	ka := s.key(a)
	for z := a.Slab - sl - m - 1; z <= a.Slab+sl+m+1; z++ {
		for y := a.Y - r - m - 1; y <= a.Y+r+m+1; y++ {
			for x := a.X - r - m - 1; x <= a.X+r+m+1; x++ {
				c := ChunkPos{X: x, Y: y, Slab: z}
				ring, dz := max(absDiff(x, a.X), absDiff(y, a.Y)), absDiff(z, a.Slab)
				kc := s.key(c)
				if got, want := seamView.Wants(s.world, ka, kc), ring <= r && dz <= sl; got != want {
					return fmt.Errorf("tick %d: Wants(anchor local %v, local %v) = %v, want %v", n, a, c, got, want)
				}
				if got, want := seamView.Keeps(s.world, ka, kc), ring <= r+m && dz <= sl+m; got != want {
					return fmt.Errorf("tick %d: Keeps(anchor local %v, local %v) = %v, want %v", n, a, c, got, want)
				}
			}
		}
	}
	return nil
}

// checkResidency compares holders against brute force: a column's holders
// are one for all clients (any chunk of it sent to anyone) plus one per
// anchor within radius 2; after the commit, resident columns are all held;
// a column's count is its number of (subscriber, sent chunk) pairs.
func (s *scene) checkResidency(n int) error {
	sentIn := map[Column]int{}
	for _, held := range s.held {
		for c, sent := range held {
			if sent {
				sentIn[ColumnOf(c)]++
			}
		}
	}
	for col, want := range sentIn {
		if got := s.subs.ColumnCount(s.columnKey(col)); got != want {
			return fmt.Errorf("tick %d: local column %v count %d, the model %d", n, col, got, want)
		}
	}
	for x := int32(-12); x <= 12; x++ {
		for y := int32(-12); y <= 12; y++ {
			col := Column{X: x, Y: y}
			want := 0
			if sentIn[col] > 0 {
				want++
			}
			for _, a := range s.anchors {
				if max(absDiff(a.X, x), absDiff(a.Y, y)) <= 2 {
					want++
				}
			}
			k := s.columnKey(col)
			if got := s.res.Holders(k); got != want {
				return fmt.Errorf("tick %d: local column (%d,%d) has %d holders, brute force says %d", n, x, y, got, want)
			}
			if s.res.IsResident(k) && want == 0 {
				return fmt.Errorf("tick %d: local column (%d,%d) resident with no holder after commit", n, x, y)
			}
			if got := s.subs.ColumnCount(k); got != sentIn[col] {
				return fmt.Errorf("tick %d: local column (%d,%d) count %d, the model %d", n, x, y, got, sentIn[col])
			}
		}
	}
	return nil
}

func TestVisibilityMatchesNaiveModel(t *testing.T) {
	for seed := range uint64(40) {
		if err := newScene(t, seed, 0, true).run(25); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// translatedDiff plays the scene of seed twice: straddling both seams, and
// translated by 2000 chunks so that no seam lies between any two objects.
// Everything observable must be identical.
func translatedDiff(t *testing.T, seed uint64, bugs plantedBugs) error {
	onSeam := newScene(t, seed, 0, false)
	away := newScene(t, seed, 2000, false)
	onSeam.subs.plant, away.subs.plant = bugs, bugs
	if err := onSeam.run(25); err != nil {
		return fmt.Errorf("on the seam: %w", err)
	}
	if err := away.run(25); err != nil {
		return fmt.Errorf("away: %w", err)
	}
	if !slices.Equal(onSeam.log, away.log) {
		for i := range min(len(onSeam.log), len(away.log)) {
			if onSeam.log[i] != away.log[i] {
				return fmt.Errorf("first difference at line %d:\n on seam: %s\n away:    %s", i, onSeam.log[i], away.log[i])
			}
		}
		return fmt.Errorf("logs differ in length %d vs %d", len(onSeam.log), len(away.log))
	}
	if len(onSeam.log) == 0 {
		return fmt.Errorf("the scene produced nothing to compare")
	}
	return nil
}

func TestWrapAwareEqualsTranslated(t *testing.T) {
	for seed := range uint64(40) {
		if err := translatedDiff(t, seed, plantedBugs{}); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}
