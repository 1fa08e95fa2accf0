package wander

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

var boot = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// smallGrid is a 4 km world of 256 m regions (16 × 16): small enough that
// wanderers finish many legs, and reach the borders' margins, in a short
// run. Its regions are too narrow for the default 224 m ghost band
// (cells wants it under half the edge), so its runtimes take smallBands.
var smallGrid = cells.GridConfig{World: torus.Config{Width: 4096, Height: 4096}, RegionEdge: 256}

var smallBands = cells.Bands{Ghost: 96}

// territory is a fixed region table, never fenced.
type territory struct{ t *cells.Table }

func (t territory) Table() *cells.Table   { return t.t }
func (territory) Fenced() <-chan struct{} { return nil }

func runtimeConfig(grid cells.GridConfig) zone.Config {
	return zone.Config{Grid: grid, Bands: smallBands, Clock: clock.NewFake(boot)}
}

func start(t *testing.T, cfg Config, zc zone.Config) (*Module, *zone.Runtime) {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r, err := zone.New(zc, m)
	if err != nil {
		t.Fatalf("zone.New: %v", err)
	}
	return m, r
}

// recorder keeps every batch of every account, by tick.
type recorder struct {
	batches map[account.ID][][]byte
	ticks   map[account.ID][]uint64
}

func record(r *zone.Runtime, accounts int) *recorder {
	rec := &recorder{batches: make(map[account.ID][][]byte), ticks: make(map[account.ID][]uint64)}
	for a := account.ID(1); a <= account.ID(accounts); a++ {
		r.Attach(a, outbox.SinkFunc(func(tick uint64, frames [][]byte) {
			var b []byte
			for _, f := range frames {
				b = append(b, f...)
			}
			rec.batches[a] = append(rec.batches[a], b)
			rec.ticks[a] = append(rec.ticks[a], tick)
		}))
	}
	return rec
}

func TestConfigValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Entities: -1}, "Entities"},
		{Config{Accounts: -1}, "Accounts"},
		{Config{Entities: 3, Accounts: 4}, "Accounts"},
		{Config{Area: -1}, "Area"},
		{Config{Area: math.NaN()}, "Area"},
		{Config{Centre: torus.Pos{X: math.Inf(1)}}, "Centre"},
		{Config{Margin: -1}, "Margin"},
		{Config{Speed: -1}, "Speed"},
		{Config{Speed: math.Inf(1)}, "Speed"},
		{Config{MoodEvery: -1}, "MoodEvery"},
		{Config{SecretEvery: -1}, "SecretEvery"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			_, err := New(tc.cfg)
			var ce *errcode.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("New(%+v) = %v, want a config error on %s", tc.cfg, err, tc.field)
			}
		})
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if got := (Config{Entities: 2}).WithDefaults().Accounts; got != 2 {
		t.Fatalf("Accounts default with 2 entities = %d, want 2", got)
	}
}

// The checks that need the runtime's grid run in Setup, with the same
// field names.
func TestSetupChecksAgainstTheGrid(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Margin: 128}, "Margin"}, // half the 256 m region edge: no room left
		{Config{Area: 5000}, "Area"},    // wider than the 4096 m torus
	} {
		t.Run(tc.field, func(t *testing.T) {
			m, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = zone.New(runtimeConfig(smallGrid), m)
			var ce *errcode.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("zone.New = %v, want a config error on %s", err, tc.field)
			}
		})
	}
}

func TestSetupTwiceIsRefused(t *testing.T) {
	m, _ := start(t, Config{}, runtimeConfig(smallGrid))
	if _, err := zone.New(runtimeConfig(smallGrid), m); err == nil {
		t.Fatal("a second runtime accepted the module")
	}
}

// Same Config, same clock: the same batches, byte for byte, for every
// account on every tick.
func TestDeterministicBatches(t *testing.T) {
	cfg := Config{Seed: 42, Entities: 48, Area: 400, Centre: torus.Pos{}} // across both seams, four regions
	run := func(cfg Config) *recorder {
		_, r := start(t, cfg, runtimeConfig(smallGrid))
		rec := record(r, cfg.WithDefaults().Accounts)
		for range 300 {
			r.Step()
		}
		return rec
	}
	a, b := run(cfg), run(cfg)
	for acct := account.ID(1); acct <= 4; acct++ {
		if len(a.batches[acct]) == 0 {
			t.Fatalf("account %d got no batch", acct)
		}
		if len(a.batches[acct]) != len(b.batches[acct]) {
			t.Fatalf("account %d: %d batches, then %d", acct, len(a.batches[acct]), len(b.batches[acct]))
		}
		for i := range a.batches[acct] {
			if a.ticks[acct][i] != b.ticks[acct][i] || !bytes.Equal(a.batches[acct][i], b.batches[acct][i]) {
				t.Fatalf("account %d, batch %d (tick %d): the runs differ", acct, i, a.ticks[acct][i])
			}
		}
	}
	cfg.Seed++
	if c := run(cfg); bytes.Equal(c.batches[1][0], a.batches[1][0]) {
		t.Fatal("another seed gave the same first batch: the seed reaches nothing")
	}
}

// Secret frames reach only the owning account, while the same account
// sees the other accounts' wanderers (their positions and moods).
func TestSecretReachesOnlyTheOwner(t *testing.T) {
	// 100 m square inside one default region: everyone in everyone's view.
	cfg := Config{Seed: 7, Entities: 16, Accounts: 4, Area: 100, Centre: torus.Pos{X: 4000, Y: 4000}}
	m, r := start(t, cfg, zone.Config{Clock: clock.NewFake(boot)})
	rec := record(r, cfg.Accounts)
	for range 400 {
		r.Step()
	}
	for acct := account.ID(1); acct <= account.ID(cfg.Accounts); acct++ {
		var ownSecrets, foreignMoods, foreignPositions int
		for _, batch := range rec.batches[acct] {
			err := outbox.DecodeBatch(batch, func(msg outbox.Message) error {
				if msg.Kind != outbox.KindComponent {
					return nil
				}
				owner := m.cfg.AccountOf(int(msg.Entity) - 1) // DerivedID(i) = i + 1
				switch {
				case msg.Component == WireSecret && owner != acct:
					return fmt.Errorf("account %d got the secret of wanderer %d, owned by %d", acct, msg.Entity, owner)
				case msg.Component == WireSecret:
					if len(msg.Payload) != 4 {
						return fmt.Errorf("secret payload of %d bytes", len(msg.Payload))
					}
					ownSecrets++
				case msg.Component == WireMood && owner != acct:
					foreignMoods++
				case msg.Component == WirePosition && owner != acct:
					foreignPositions++
				}
				return nil
			})
			if err != nil {
				t.Fatalf("account %d: %v", acct, err)
			}
		}
		t.Logf("account %d: %d own secrets, %d foreign moods, %d foreign positions", acct, ownSecrets, foreignMoods, foreignPositions)
		if ownSecrets == 0 || foreignMoods == 0 || foreignPositions == 0 {
			t.Fatalf("account %d: %d own secrets, %d foreign moods, %d foreign positions: the test saw too little",
				acct, ownSecrets, foreignMoods, foreignPositions)
		}
	}
}

// Over 2000 ticks no wanderer leaves its spawn region or comes within
// Margin of its borders; the runtime's index keeps up with its chunk; and
// each walks several legs, so the claim is about waypoints, not about
// standing still.
func TestWanderersStayInTheirSpawnRegion(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	cfg := Config{Seed: rng.Uint64(), Entities: 64, Speed: 5 + 30*rng.Float64()}
	if rng.IntN(2) == 0 { // a square across both seams, else the whole torus
		cfg.Area = 300 + 1000*rng.Float64()
		cfg.Centre = torus.Pos{X: 0, Y: 0}
	}
	t.Logf("config %+v", cfg)
	m, r := start(t, cfg, runtimeConfig(smallGrid))
	grid := r.Table().Grid()
	home := make(map[ecs.ID]cells.RegionID)
	for _, id := range m.Wanderers() {
		p, _ := r.Positions().Get(id)
		home[id] = grid.RegionOf(p.Pos)
	}
	if len(home) != cfg.Entities {
		t.Fatalf("%d wanderers on a node that owns the world, want %d", len(home), cfg.Entities)
	}
	margin := m.cfg.Margin
	for tick := 1; tick <= 2000; tick++ {
		r.Step()
		for id, region := range home {
			p, ok := r.Positions().Get(id)
			if !ok {
				t.Fatalf("tick %d: wanderer %d has no position", tick, id)
			}
			x0, y0, x1, y1 := grid.Bounds(region)
			if got := grid.RegionOf(p.Pos); got != region ||
				p.X-x0 < margin || x1-p.X < margin || p.Y-y0 < margin || y1-p.Y < margin || p.Z != 0 {
				t.Fatalf("tick %d: wanderer %d at %+v (region %d), spawned in region %d [%v, %v) × [%v, %v), margin %v",
					tick, id, p.Pos, got, region, x0, x1, y0, y1, margin)
			}
			if c, ok := r.ChunkOf(id); !ok || c != r.Geometry().ChunkOf(p.Pos) {
				t.Fatalf("tick %d: wanderer %d filed under %v (%v), stands in %v", tick, id, c, ok, r.Geometry().ChunkOf(p.Pos))
			}
		}
	}
	for id := range home {
		if w, _ := m.walk.Get(id); w.Leg < 2 {
			t.Fatalf("wanderer %d walked only %d legs in 2000 ticks at %v m/s", id, w.Leg, cfg.Speed)
		}
	}
}

// A runtime that owns only some regions creates exactly the wanderers
// that spawn in them, with the single-node run's ids and positions, and
// they walk the same paths.
func TestSplitRunCreatesTheWanderersOfItsRegions(t *testing.T) {
	cfg := Config{Seed: 99, Entities: 64, Accounts: 8}
	names := []string{"zone-a", "zone-b", "zone-c", "zone-d"}
	grid, err := cells.NewGrid(smallGrid)
	if err != nil {
		t.Fatal(err)
	}
	table, err := cells.Uniform(grid, 1, names)
	if err != nil {
		t.Fatal(err)
	}

	whole, solo := start(t, cfg, runtimeConfig(smallGrid))
	if got := len(whole.Wanderers()); got != cfg.Entities {
		t.Fatalf("the single node made %d wanderers, want %d", got, cfg.Entities)
	}
	spawnOwner := make(map[ecs.ID]string)
	for i := range cfg.Entities {
		id, _ := ID(i)
		if whole.Wanderers()[i] != id {
			t.Fatalf("wanderer %d has id %d, want %d", i, whole.Wanderers()[i], id)
		}
		p, _ := solo.Positions().Get(id)
		spawnOwner[id] = table.OwnerOf(p.Pos)
	}

	parts := make([]*zone.Runtime, len(names))
	seen := make(map[ecs.ID]string)
	for n, name := range names {
		zc := runtimeConfig(smallGrid)
		zc.Name, zc.Node, zc.Territory = name, n, territory{table}
		m, r := start(t, cfg, zc)
		parts[n] = r
		var want []ecs.ID
		for i := range cfg.Entities {
			if id, _ := ID(i); spawnOwner[id] == name {
				want = append(want, id)
			}
		}
		got := m.Wanderers()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s made %v, want %v", name, got, want)
		}
		if r.World().Len() != len(want) {
			t.Fatalf("%s holds %d entities, made %d wanderers", name, r.World().Len(), len(want))
		}
		for _, id := range got {
			seen[id] = name
		}
		for i := range cfg.Accounts {
			acct := cfg.AccountOf(i)
			id, _ := ID(i)
			v, ok := r.Viewer(acct)
			if here := spawnOwner[id] == name; ok != here || (ok && v != id) {
				t.Fatalf("%s: viewer of account %d = %d, %v; wanderer %d spawned on %s", name, acct, v, ok, id, spawnOwner[id])
			}
		}
		t.Logf("%s: %d wanderers", name, len(got))
	}
	if len(seen) != cfg.Entities {
		t.Fatalf("the four nodes made %d wanderers between them, want %d", len(seen), cfg.Entities)
	}

	for range 200 {
		solo.Step()
		for _, r := range parts {
			r.Step()
		}
	}
	for id, name := range seen {
		r := parts[indexOf(names, name)]
		want, _ := solo.Positions().Get(id)
		got, ok := r.Positions().Get(id)
		if !ok || *got != *want {
			t.Fatalf("wanderer %d at %+v on %s, at %+v on the single node", id, got, name, want)
		}
	}
}

func indexOf(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

// The draws are what make a run reproducible on any node: check that they
// depend on every input and on nothing else.
func TestDrawsArePureAndSpread(t *testing.T) {
	m := &Module{cfg: Config{Seed: 1}.WithDefaults()}
	again := &Module{cfg: Config{Seed: 1}.WithDefaults()}
	base := m.draw(saltMood, 5, 3)
	if again.draw(saltMood, 5, 3) != base {
		t.Fatal("draw is not a function of its inputs")
	}
	other := &Module{cfg: Config{Seed: 2}.WithDefaults()}
	for name, v := range map[string]uint64{
		"seed": other.draw(saltMood, 5, 3), "salt": m.draw(saltSecret, 5, 3),
		"key": m.draw(saltMood, 6, 3), "counter": m.draw(saltMood, 5, 4),
	} {
		if v == base {
			t.Fatalf("changing the %s did not change the draw", name)
		}
	}
	var buckets [16]int
	for k := range uint64(16000) {
		buckets[int(unit(m.draw(saltSpawnX, k, 0))*16)]++
	}
	for i, n := range buckets {
		if n < 800 || n > 1200 {
			t.Fatalf("bucket %d of 16 holds %d of 16000 draws: not uniform", i, n)
		}
	}
}

// The secret's wire payload is its value, little endian.
func TestSecretPayload(t *testing.T) {
	_, r := start(t, Config{Seed: 3, Entities: 1, Accounts: 1}, runtimeConfig(smallGrid))
	rec := record(r, 1)
	r.Step()
	m, _ := ecs.StoreOf[Secret](r.World())
	id, _ := ID(0)
	s, _ := m.Get(id)
	var found bool
	_ = outbox.DecodeBatch(rec.batches[1][0], func(msg outbox.Message) error {
		if msg.Kind == outbox.KindComponent && msg.Component == WireSecret {
			found = binary.LittleEndian.Uint32(msg.Payload) == s.Value
		}
		return nil
	})
	if !found {
		t.Fatalf("no secret frame carrying %d in the first batch", s.Value)
	}
}
