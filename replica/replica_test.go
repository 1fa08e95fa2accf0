package replica

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
)

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// burst encodes an appear burst of e with one frame per (type, payload).
func burst(e uint64, comps ...any) []byte {
	b := outbox.AppendAppearFrame(nil, e, len(comps)/2)
	return append(b, delta(e, comps...)...)
}

// delta encodes component frames of e: pairs of type and payload string.
func delta(e uint64, comps ...any) []byte {
	var b []byte
	for i := 0; i < len(comps); i += 2 {
		b = outbox.AppendComponentFrame(b, e, outbox.ComponentType(comps[i].(int)), []byte(comps[i+1].(string)))
	}
	return b
}

func vanish(e uint64, r interest.VanishReason) []byte { return outbox.AppendVanishFrame(nil, e, r) }

var c0, c1 = torus.ChunkPos{X: 1, Y: 1}, torus.ChunkPos{X: 2, Y: 1}

func st(epoch, seq uint64) Stamp { return Stamp{Epoch: epoch, Seq: seq} }

// payloads returns e's components as type → payload, decoded from its burst.
func payloads(t testing.TB, s *Store, e uint64) map[outbox.ComponentType]string {
	t.Helper()
	b, ok := s.AppendBurst(nil, e)
	if !ok {
		return nil
	}
	out := map[outbox.ComponentType]string{}
	if err := outbox.DecodeBatch(b, func(m outbox.Message) error {
		if m.Kind == outbox.KindComponent {
			out[m.Component] = string(m.Payload)
		}
		return nil
	}); err != nil {
		t.Fatalf("burst of %d does not decode: %v", e, err)
	}
	return out
}

func TestApply(t *testing.T) {
	type step struct {
		u       Update
		applied bool
	}
	cases := []struct {
		name   string
		steps  []step
		want   map[outbox.ComponentType]string // nil: no ghost
		chunk  torus.ChunkPos
		stats  Stats
		events []EventKind
	}{
		{
			name:   "burst creates",
			steps:  []step{{Update{1, st(1, 1), c0, burst(1, 1, "pos", 2, "hp")}, true}},
			want:   map[outbox.ComponentType]string{1: "pos", 2: "hp"},
			chunk:  c0,
			stats:  Stats{Applied: 1, Appeared: 1, Ghosts: 1},
			events: []EventKind{Appeared},
		},
		{
			name: "delta replaces one type, moves",
			steps: []step{
				{Update{1, st(1, 1), c0, burst(1, 1, "pos", 2, "hp")}, true},
				{Update{1, st(1, 2), c1, delta(1, 1, "pos2")}, true},
			},
			want:   map[outbox.ComponentType]string{1: "pos2", 2: "hp"},
			chunk:  c1,
			stats:  Stats{Applied: 2, Appeared: 1, Ghosts: 1},
			events: []EventKind{Appeared, Moved},
		},
		{
			name: "late and duplicate are stale",
			steps: []step{
				{Update{1, st(1, 1), c0, burst(1, 1, "a")}, true},
				{Update{1, st(1, 3), c0, delta(1, 1, "c")}, true},
				{Update{1, st(1, 2), c0, delta(1, 1, "b")}, false},
				{Update{1, st(1, 3), c0, delta(1, 1, "c?")}, false},
				{Update{1, st(0, 9), c1, burst(1, 1, "old")}, false},
			},
			want:   map[outbox.ComponentType]string{1: "c"},
			chunk:  c0,
			stats:  Stats{Applied: 2, Stale: 3, Appeared: 1, Ghosts: 1},
			events: []EventKind{Appeared},
		},
		{
			name: "newer epoch replaces the state",
			steps: []step{
				{Update{1, st(1, 5), c0, burst(1, 1, "a", 2, "b")}, true},
				{Update{1, st(2, 1), c0, delta(1, 2, "B")}, true},
				{Update{1, st(1, 6), c0, delta(1, 1, "late")}, false},
			},
			want:   map[outbox.ComponentType]string{2: "B"},
			chunk:  c0,
			stats:  Stats{Applied: 2, Stale: 1, Appeared: 1, Ghosts: 1},
			events: []EventKind{Appeared},
		},
		{
			name: "vanish leaves a tombstone that fences a late appear",
			steps: []step{
				{Update{1, st(1, 1), c0, burst(1, 1, "a")}, true},
				{Update{1, st(1, 3), c0, vanish(1, interest.Death)}, true},
				{Update{1, st(1, 2), c0, burst(1, 1, "late")}, false},
			},
			stats:  Stats{Applied: 2, Stale: 1, Appeared: 1, Vanished: 1, Tombstones: 1},
			events: []EventKind{Appeared, Vanished},
		},
		{
			name: "vanish overtaking its appear still fences it",
			steps: []step{
				{Update{1, st(1, 2), c0, vanish(1, interest.Gone)}, false},
				{Update{1, st(1, 1), c0, burst(1, 1, "a")}, false},
			},
			stats: Stats{Stale: 1, Tombstones: 1},
		},
		{
			name: "a newer appear after a vanish comes back",
			steps: []step{
				{Update{1, st(1, 1), c0, burst(1, 1, "a")}, true},
				{Update{1, st(1, 2), c0, vanish(1, interest.OutOfSight)}, true},
				{Update{1, st(1, 3), c1, burst(1, 1, "back")}, true},
			},
			want:   map[outbox.ComponentType]string{1: "back"},
			chunk:  c1,
			stats:  Stats{Applied: 3, Appeared: 2, Vanished: 1, Ghosts: 1},
			events: []EventKind{Appeared, Vanished, Appeared},
		},
		{
			name:  "delta for an unknown entity is an orphan",
			steps: []step{{Update{1, st(1, 1), c0, delta(1, 1, "a")}, false}},
			stats: Stats{Orphans: 1},
		},
		{
			name: "raw chunk coordinates across the seam are normalised",
			steps: []step{
				{Update{1, st(1, 1), torus.ChunkPos{X: -1, Y: 4000}, burst(1, 1, "a")}, true},
			},
			want:   map[outbox.ComponentType]string{1: "a"},
			chunk:  torus.ChunkPos{X: 3999, Y: 0},
			stats:  Stats{Applied: 1, Appeared: 1, Ghosts: 1},
			events: []EventKind{Appeared},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			for i, sp := range tc.steps {
				applied, err := s.Apply(sp.u)
				if err != nil || applied != sp.applied {
					t.Fatalf("step %d: applied %v, err %v; want %v", i, applied, err, sp.applied)
				}
			}
			if got := payloads(t, s, 1); !mapsEqual(got, tc.want) {
				t.Fatalf("ghost = %v, want %v", got, tc.want)
			}
			if tc.want != nil {
				if _, c, _ := s.Has(1); c != tc.chunk {
					t.Fatalf("chunk %v, want %v", c, tc.chunk)
				}
				if rs := s.AppendResidents(nil, tc.chunk); !slices.Equal(rs, []uint64{1}) {
					t.Fatalf("residents of %v = %v", tc.chunk, rs)
				}
			}
			if got := s.Stats(); got != tc.stats {
				t.Fatalf("stats = %+v, want %+v", got, tc.stats)
			}
			var kinds []EventKind
			for _, ev := range s.Drain(nil) {
				kinds = append(kinds, ev.Kind)
			}
			if !slices.Equal(kinds, tc.events) {
				t.Fatalf("events %v, want %v", kinds, tc.events)
			}
		})
	}
}

func mapsEqual(a, b map[outbox.ComponentType]string) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestApplyRefusesMalformedUpdates(t *testing.T) {
	cases := map[string][]byte{
		"no frames":            nil,
		"bad outbox bytes":     {0x80},
		"frame of another":     delta(2, 1, "a"),
		"burst cut short":      outbox.AppendAppearFrame(nil, 1, 2),
		"burst then extra":     append(burst(1, 1, "a"), delta(1, 2, "b")...),
		"two bursts":           append(burst(1, 1, "a"), burst(1, 1, "a")...),
		"vanish then delta":    append(vanish(1, 0), delta(1, 1, "a")...),
		"delta then vanish":    append(delta(1, 1, "a"), vanish(1, 0)...),
		"type twice in delta":  delta(1, 1, "a", 1, "b"),
		"type twice in burst":  burst(1, 3, "a", 3, "b"),
		"delta then burst":     append(delta(1, 1, "a"), burst(1, 1, "a")...),
		"two vanishes":         append(vanish(1, 0), vanish(1, 0)...),
		"vanish reason out of": {10, byte(outbox.KindVanish), 1, 0, 0, 0, 0, 0, 0, 0, 9},
	}
	for name, b := range cases {
		s := newStore(t)
		if _, err := s.Apply(Update{1, st(1, 1), c0, burst(1, 1, "keep")}); err != nil {
			t.Fatal(err)
		}
		s.Drain(nil)
		applied, err := s.Apply(Update{Entity: 1, Stamp: st(1, 2), Chunk: c1, Frames: b})
		if applied || !errors.Is(err, ErrMalformed) || errcode.Of(err) != "REPLICA.MALFORMED" {
			t.Errorf("%s: applied %v, err %v", name, applied, err)
		}
		if got := payloads(t, s, 1); !mapsEqual(got, map[outbox.ComponentType]string{1: "keep"}) || len(s.Drain(nil)) != 0 {
			t.Errorf("%s: a malformed update changed the ghost: %v", name, got)
		}
	}
	s := newStore(t)
	if _, err := s.Apply(Update{Entity: 1, Frames: []byte{0x80}}); !errors.Is(err, outbox.ErrMalformed) {
		t.Errorf("bad frame bytes: err %v does not match outbox.ErrMalformed", err)
	}
}

func TestBatchReportsGaps(t *testing.T) {
	s := newStore(t)
	steps := []struct {
		source string
		seq    uint64
		gap    bool
	}{
		{"a", 7, false}, // baseline
		{"a", 8, false},
		{"b", 1, false},
		{"a", 10, true}, // 9 lost
		{"a", 11, false},
		{"a", 1, true}, // numbering afresh
		{"b", 2, false},
	}
	for i, sp := range steps {
		err := s.Batch(sp.source, sp.seq)
		var gap *GapError
		if got := errors.As(err, &gap); got != sp.gap {
			t.Fatalf("step %d: err %v, want gap %v", i, err, sp.gap)
		}
		if sp.gap && (!errors.Is(err, ErrGap) || errcode.Of(err) != "REPLICA.GAP" || gap.Source != sp.source || gap.Got != sp.seq) {
			t.Fatalf("step %d: gap %+v, err %v", i, gap, err)
		}
	}
	if s.Stats().Gaps != 2 {
		t.Fatalf("gaps = %d", s.Stats().Gaps)
	}
}

// A lost appear and a lost vanish are repaired by the snapshot: the zombie
// goes, the missing ghost comes.
func TestReplaceRepairsLostLifecycle(t *testing.T) {
	s := newStore(t)
	mustApply(t, s, Update{1, st(1, 1), c0, burst(1, 1, "zombie")})
	mustApply(t, s, Update{3, st(1, 1), c1, burst(3, 1, "elsewhere")})
	mustApply(t, s, Update{4, st(1, 4), c0, burst(4, 1, "kept")})
	s.Drain(nil)
	// Lost: vanish of 1, appear of 2. The snapshot of c0 says 2 and 4.
	err := s.Replace(c0, []Update{
		{Entity: 2, Stamp: st(1, 3), Frames: burst(2, 1, "missing", 2, "x")},
		{Entity: 4, Stamp: st(1, 4), Frames: burst(4, 1, "kept")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.Has(1); ok {
		t.Fatal("zombie 1 survived the snapshot")
	}
	if got := payloads(t, s, 2); !mapsEqual(got, map[outbox.ComponentType]string{1: "missing", 2: "x"}) {
		t.Fatalf("ghost 2 = %v", got)
	}
	if _, c, ok := s.Has(3); !ok || c != c1 {
		t.Fatal("a snapshot of c0 touched a ghost of c1")
	}
	rs := s.AppendResidents(nil, c0)
	slices.Sort(rs)
	if !slices.Equal(rs, []uint64{2, 4}) {
		t.Fatalf("residents of c0 = %v", rs)
	}
	evs := s.Drain(nil)
	want := []Event{
		{Kind: Vanished, Entity: 1, Chunk: c0, Reason: interest.OutOfSight},
		{Kind: Appeared, Entity: 2, Chunk: c0},
	}
	if !slices.Equal(evs, want) {
		t.Fatalf("events %+v, want %+v", evs, want)
	}
	// A late appear of the zombie, sent before the snapshot, stays out.
	if applied, _ := s.Apply(Update{1, st(1, 1), c0, burst(1, 1, "zombie")}); applied {
		t.Fatal("a late appear brought back a ghost the snapshot removed")
	}
	// Replace(chunk, nil) clears a chunk no longer held.
	if err := s.Replace(c0, nil); err != nil || len(s.AppendResidents(nil, c0)) != 0 || s.Len() != 1 {
		t.Fatalf("clear: err %v, %d ghosts left", err, s.Len())
	}
}

func TestReplaceRefusesMalformedSnapshots(t *testing.T) {
	cases := map[string][]Update{
		"delta entry":   {{Entity: 2, Stamp: st(1, 1), Frames: delta(2, 1, "a")}},
		"vanish entry":  {{Entity: 2, Stamp: st(1, 1), Frames: vanish(2, 0)}},
		"bad bytes":     {{Entity: 2, Stamp: st(1, 1), Frames: []byte{1}}},
		"entity twice":  {{Entity: 2, Stamp: st(1, 1), Frames: burst(2)}, {Entity: 2, Stamp: st(1, 2), Frames: burst(2)}},
		"second is bad": {{Entity: 2, Stamp: st(1, 1), Frames: burst(2)}, {Entity: 5, Frames: burst(6)}},
	}
	for name, entries := range cases {
		s := newStore(t)
		mustApply(t, s, Update{1, st(1, 1), c0, burst(1, 1, "a")})
		if err := s.Replace(c0, entries); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v", name, err)
		}
		if _, _, ok := s.Has(1); !ok || s.Len() != 1 {
			t.Errorf("%s: a refused snapshot changed the store", name)
		}
	}
}

// The burst served to a late local subscriber is byte for byte the
// owner's: same head, same frames, the owner's order.
func TestAppendBurstIsTheOwnersBytes(t *testing.T) {
	s := newStore(t)
	owner := burst(9, 5, "pos", 2, "hp", 7, "look")
	mustApply(t, s, Update{9, st(1, 1), c0, owner})
	if got, ok := s.AppendBurst(nil, 9); !ok || !bytes.Equal(got, owner) {
		t.Fatalf("burst %x, want the owner's %x", got, owner)
	}
	mustApply(t, s, Update{9, st(1, 2), c0, delta(9, 2, "hp-1", 8, "new")})
	want := burst(9, 5, "pos", 2, "hp-1", 7, "look", 8, "new")
	if got, _ := s.AppendBurst([]byte{0xAA}, 9); !bytes.Equal(got, append([]byte{0xAA}, want...)) {
		t.Fatalf("burst after a delta %x, want %x", got, want)
	}
	if f, ok := s.Frame(9, 2); !ok || !bytes.Equal(f, outbox.AppendComponentFrame(nil, 9, 2, []byte("hp-1"))) {
		t.Fatalf("frame of type 2 = %x", f)
	}
	if _, ok := s.AppendBurst(nil, 10); ok {
		t.Fatal("a burst of an entity with no ghost")
	}
}

func TestTombstonesAreBounded(t *testing.T) {
	s, err := New(Config{Tombstones: 2})
	if err != nil {
		t.Fatal(err)
	}
	for e := uint64(1); e <= 3; e++ {
		mustApply(t, s, Update{e, st(1, 1), c0, burst(e)})
		mustApply(t, s, Update{e, st(1, 2), c0, vanish(e, interest.Gone)})
	}
	if n := s.Stats().Tombstones; n != 2 {
		t.Fatalf("%d tombstones, want 2", n)
	}
	// Entity 1's tombstone is forgotten: its late appear is accepted (the
	// documented cost of the bound); 3's is still refused.
	if applied, _ := s.Apply(Update{3, st(1, 1), c0, burst(3)}); applied {
		t.Fatal("remembered tombstone did not fence")
	}
	if applied, _ := s.Apply(Update{1, st(1, 1), c0, burst(1)}); !applied {
		t.Fatal("forgotten tombstone still fenced")
	}
	var ce *errcode.ConfigError
	if err := (Config{Tombstones: -1}).Validate(); !errors.As(err, &ce) || ce.Field != "Tombstones" {
		t.Fatalf("Validate(-1) = %v", err)
	}
}

func mustApply(t testing.TB, s *Store, u Update) {
	t.Helper()
	if _, err := s.Apply(u); err != nil {
		t.Fatal(err)
	}
}
