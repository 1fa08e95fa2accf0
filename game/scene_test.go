package game

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
)

// Scene tests build small worlds by hand, inside the package, to pin one
// behaviour each.

const noDens = 1e-12

type sink struct{ msgs []outbox.Message }

func (s *sink) Deliver(_ uint64, frames [][]byte) {
	var batch []byte
	for _, f := range frames {
		batch = append(batch, f...)
	}
	_ = outbox.DecodeBatch(batch, func(m outbox.Message) error {
		s.msgs = append(s.msgs, m)
		return nil
	})
}

func newScene(t *testing.T, cfg Config) *Game {
	t.Helper()
	if cfg.DenChance == 0 {
		cfg.DenChance = noDens
	}
	if cfg.Players == 0 {
		cfg.Players = 1
	}
	if cfg.Clock == nil { // the same ids on every run
		cfg.Clock = clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// place moves account's master (home too) and pet before the first tick.
func (g *Game) place(t *testing.T, account account.ID, at torus.Pos) ecs.ID {
	t.Helper()
	id, ok := g.Master(account)
	if !ok {
		t.Fatalf("no account %d", account)
	}
	m, _ := g.c.master.Get(id)
	p, _ := g.c.pos.Get(id)
	m.Home, p.Pos = g.geo.Normalise(at), g.geo.Normalise(at)
	pp, _ := g.c.pos.Get(m.Pet)
	pp.Pos = g.geo.Translate(at, torus.Pos{X: -1.5, Y: -1.5})
	return id
}

func (g *Game) hp(id ecs.ID) int32 {
	h, ok := g.c.health.Get(id)
	if !ok {
		return -1
	}
	return h.HP
}

// TestMobNoticesAndAttacksAcrossTheSeam: a player at x = 127,995 and a mob
// at x = 5 are 10 m apart; the mob must notice, chase and hit, exactly as
// it does in the same scene translated away from the seam.
func TestMobNoticesAndAttacksAcrossTheSeam(t *testing.T) {
	type outcome struct {
		hp    []int32
		state MobState
		rel   torus.Pos // mob relative to player at the end
	}
	play := func(offset float64) outcome {
		g := newScene(t, Config{Seed: 7, Roam: 0.01})
		player := g.place(t, 1, torus.Pos{X: 127_995 + offset, Y: 100})
		mob, ok := g.spawnMob(g.w, 0, torus.Pos{X: 5 + offset, Y: 100})
		if !ok {
			t.Fatal("spawn failed")
		}
		var o outcome
		for range 200 {
			g.Step()
			o.hp = append(o.hp, g.hp(player))
		}
		if m, ok := g.c.mob.Get(mob); ok {
			o.state = m.State
			mp, _ := g.c.pos.Get(mob)
			pp, _ := g.c.pos.Get(player)
			o.rel = g.geo.Delta(pp.Pos, mp.Pos)
		}
		return o
	}
	seam := play(0)
	away := play(-60_000) // player at 67,995 and mob at 68,005: no seam between
	hit := false
	for _, hp := range seam.hp {
		hit = hit || hp < 100
	}
	if !hit {
		t.Fatal("the mob across the seam never hit the player")
	}
	if len(seam.hp) != len(away.hp) {
		t.Fatal("runs differ in length")
	}
	for i := range seam.hp {
		if seam.hp[i] != away.hp[i] {
			t.Fatalf("tick %d: player hp %d at the seam, %d away from it", i+1, seam.hp[i], away.hp[i])
		}
	}
	if seam.state != away.state || math.Abs(seam.rel.X-away.rel.X) > 1e-6 || math.Abs(seam.rel.Y-away.rel.Y) > 1e-6 {
		t.Fatalf("end state differs: %+v vs %+v", seam, away)
	}
}

// TestPropertyNearestIsWrapAware: for random scenes straddling the corner
// where both seams cross, nearest() equals a brute-force plain-Euclid
// nearest over the same scene translated so no seam lies inside it.
func TestPropertyNearestIsWrapAware(t *testing.T) {
	const players, radius = 24, 60.0
	rng := rand.New(rand.NewPCG(3, 4))
	for scene := range 25 {
		center := torus.Pos{X: (rng.Float64() - 0.5) * 100, Y: (rng.Float64() - 0.5) * 100}
		g := newScene(t, Config{Seed: uint64(scene), Players: players})
		// Shift: puts the scene around (64 km, 64 km), far from any seam.
		shift := torus.Pos{X: 64_000 - center.X, Y: 64_000 - center.Y}
		var ids []ecs.ID
		var plain []torus.Pos
		for a := account.ID(1); a <= players; a++ {
			at := torus.Pos{X: center.X + (rng.Float64()-0.5)*200, Y: center.Y + (rng.Float64()-0.5)*200}
			id := g.place(t, a, at)
			ids = append(ids, id)
			plain = append(plain, torus.Pos{X: at.X + shift.X, Y: at.Y + shift.Y})
			_ = g.c.frozen.Add(id, Frozen{}) // keep the scene still: no system may move it
		}
		g.Step()
		for _, id := range ids {
			p, _ := g.c.pos.Get(id)
			want := plain[indexOf(ids, id)]
			placed := g.geo.Normalise(torus.Pos{X: want.X - shift.X, Y: want.Y - shift.Y})
			if g.geo.DistanceSq(p.Pos, placed) > 1e-12 {
				t.Fatalf("scene %d: frozen master %d moved", scene, id)
			}
		}
		for q := range 40 {
			qp := torus.Pos{X: center.X + (rng.Float64()-0.5)*240, Y: center.Y + (rng.Float64()-0.5)*240}
			got, gotOK := g.nearest(g.geo.Normalise(qp), radius, KindPlayer)
			if viaGrid, ok := g.nearestPlayer(g.geo.Normalise(qp), radius); viaGrid != got || ok != gotOK {
				t.Fatalf("scene %d: the player grid answers %d,%v, the resident index %d,%v", scene, viaGrid, ok, got, gotOK)
			}
			// Brute force, no wrap, on the translated scene.
			qs := torus.Pos{X: qp.X + shift.X, Y: qp.Y + shift.Y}
			want, wantOK, best := ecs.ID(0), false, math.Inf(1)
			for i, p := range plain {
				d2 := (p.X-qs.X)*(p.X-qs.X) + (p.Y-qs.Y)*(p.Y-qs.Y)
				if d2 <= radius*radius && (d2 < best || (d2 == best && ids[i] < want)) {
					want, wantOK, best = ids[i], true, d2
				}
			}
			if got != want || gotOK != wantOK {
				t.Fatalf("scene %d query %d at %+v: nearest = %d,%v; brute force on the shifted scene = %d,%v",
					scene, q, qp, got, gotOK, want, wantOK)
			}
		}
	}
}

func indexOf(ids []ecs.ID, id ecs.ID) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

// TestDeathVanishesAndCreditsTheKiller: a mob beside a player dies of the
// player's damage intents; the player sees it vanish with reason death and
// the master gains experience through an intent.
func TestDeathVanishesAndCreditsTheKiller(t *testing.T) {
	g := newScene(t, Config{Seed: 9, Roam: 0.01})
	s := &sink{}
	g.Attach(1, s)
	player := g.place(t, 1, torus.Pos{X: 3, Y: 3})
	mob, _ := g.spawnMob(g.w, 0, torus.Pos{X: 4, Y: 3})
	died := 0
	for range 200 {
		died += g.Step().Died
		if !g.w.Alive(mob) {
			break
		}
	}
	if g.w.Alive(mob) || died != 1 {
		t.Fatalf("mob alive=%v, died=%d", g.w.Alive(mob), died)
	}
	g.Step() // the experience intent sent at death applies on the next tick
	e, _ := g.c.exp.Get(player)
	if e.Points != killExp {
		t.Fatalf("experience = %d, want %d", e.Points, killExp)
	}
	var vanish, appear bool
	for _, m := range s.msgs {
		if m.Entity == uint64(mob) && m.Kind == outbox.KindVanish {
			vanish = m.Reason == interest.Death
		}
		appear = appear || (m.Entity == uint64(mob) && m.Kind == outbox.KindAppear)
	}
	if !appear || !vanish {
		t.Fatalf("player saw appear=%v, vanish(death)=%v", appear, vanish)
	}
}

// TestHealingIsAnIntent: a hurt master is healed by its pet, by exactly
// one heal per intent, applied on the tick after the pet decided.
func TestHealingIsAnIntent(t *testing.T) {
	g := newScene(t, Config{Seed: 11, Roam: 0.01})
	player := g.place(t, 1, torus.Pos{X: 500, Y: 500})
	g.Step()
	h, _ := g.c.health.Get(player)
	h.HP = 30
	var hps []int32
	intents := 0
	for range 100 {
		intents += g.Step().Intents
		hps = append(hps, g.hp(player))
	}
	if intents == 0 {
		t.Fatal("no intent was applied")
	}
	for i := 1; i < len(hps); i++ {
		if d := hps[i] - hps[i-1]; d != 0 && d != petHeal {
			t.Fatalf("tick %d: hp changed by %d, want 0 or %d", i, d, petHeal)
		}
	}
	if hps[len(hps)-1] < 60 {
		t.Fatalf("pet stopped healing at %d", hps[len(hps)-1])
	}
}

// TestEvictSendsNoVanish: an entity evicted (handed over) disappears from
// the index with nothing sent to the player watching it.
func TestEvictSendsNoVanish(t *testing.T) {
	g := newScene(t, Config{Seed: 5, Roam: 0.01})
	s := &sink{}
	g.Attach(1, s)
	g.place(t, 1, torus.Pos{X: 1000, Y: 1000})
	mob, _ := g.spawnMob(g.w, 0, torus.Pos{X: 1030, Y: 1000})
	g.Step()
	g.Step()
	if _, ok := g.r.ChunkOf(mob); !ok {
		t.Fatal("mob not indexed")
	}
	s.msgs = nil
	if err := g.w.Evict(mob); err != nil {
		t.Fatal(err)
	}
	g.Step()
	for _, m := range s.msgs {
		if m.Entity == uint64(mob) {
			t.Fatalf("player got %v for an evicted entity", m.Kind)
		}
	}
	if _, ok := g.r.ChunkOf(mob); ok {
		t.Fatal("evicted mob still indexed")
	}
}

// TestDensFollowResidency: dens appear with the columns players hold,
// stock mobs near players, and leave (with their mobs) when the columns
// are released.
func TestDensFollowResidency(t *testing.T) {
	g := newScene(t, Config{Seed: 13, DenChance: 0.5, MaterialiseBudget: 1000})
	player := g.place(t, 1, torus.Pos{X: 10, Y: 10})
	for range 200 {
		g.Step()
	}
	if len(g.dens) == 0 {
		t.Fatal("no dens materialised around the player")
	}
	mobs := g.c.mob.Len()
	if mobs == 0 {
		t.Fatal("no den stocked a mob")
	}
	for col, den := range g.dens {
		d, ok := g.c.den.Get(den)
		if !ok || d.Column != col || len(d.Mobs) > g.cfg.DenCapacity {
			t.Fatalf("den %d at %v: %+v", den, col, d)
		}
		if !g.r.IsResident(col) {
			t.Fatalf("den in a column that is not resident: %v", col)
		}
	}
	// Teleport the player 10 km away, as a respawn would.
	m, _ := g.c.master.Get(player)
	for _, id := range []ecs.ID{player, m.Pet} {
		p, _ := g.c.pos.Get(id)
		p.Pos = g.geo.Translate(p.Pos, torus.Pos{X: 10_000})
		g.w.MarkMoved(id)
	}
	for range 5 {
		g.Step()
	}
	for col := range g.dens {
		if g.geo.ChunkDistance(torus.ChunkPos{X: col.X, Y: col.Y}, torus.ChunkPos{}) < 20 {
			t.Fatalf("den at %v survived the release of its column", col)
		}
	}
	g.c.mob.Each(func(id ecs.ID, mob *Mob) {
		if !g.w.Alive(mob.Den) {
			t.Fatalf("mob %d outlived its den", id)
		}
	})
}

// Spawner cells wrap: a den site is a function of the normalised column,
// so a column and its images one world-width (or height) away name the
// same den at the same spot; and a player standing on the corner where
// both seams cross gets dens on every side of it, each keyed by a
// normalised column.
func TestDenSitesWrapAtTheSeam(t *testing.T) {
	g := newScene(t, Config{Seed: 21, DenChance: 0.3, MaterialiseBudget: 1000})
	nx, ny := int32(g.geo.ChunksX()), int32(g.geo.ChunksY())
	rng := rand.New(rand.NewPCG(21, 1))
	dens := 0
	for range 2000 {
		col := interest.Column{X: int32(rng.IntN(int(nx))), Y: int32(rng.IntN(int(ny)))}
		if rng.IntN(4) == 0 { // the columns right at the seams
			col = interest.Column{X: int32(rng.IntN(3)) - 1 + nx*int32(rng.IntN(2)), Y: int32(rng.IntN(3)) - 1}
		}
		at, key, ok := g.denSite(col)
		if ok {
			dens++
		}
		for _, img := range []interest.Column{
			{X: col.X + nx, Y: col.Y}, {X: col.X - nx, Y: col.Y},
			{X: col.X, Y: col.Y + ny}, {X: col.X - 2*nx, Y: col.Y - ny},
		} {
			at2, key2, ok2 := g.denSite(img)
			if ok2 != ok || key2 != key || at2 != at {
				t.Fatalf("column %v: den (%v, %v, %v) but its image %v: (%v, %v, %v)", col, ok, key, at, img, ok2, key2, at2)
			}
		}
		if key.X < 0 || key.X >= nx || key.Y < 0 || key.Y >= ny {
			t.Fatalf("column %v: key %v is not normalised", col, key)
		}
		if ok && g.geo.ChunkOf(at) != (torus.ChunkPos{X: key.X, Y: key.Y}) {
			t.Fatalf("column %v: den at %v stands outside its cell %v", col, at, key)
		}
	}
	if dens == 0 {
		t.Fatal("no den site among 2000 columns: the property is vacuous")
	}

	g.place(t, 1, torus.Pos{X: 3, Y: 3})
	for range 60 {
		g.Step()
	}
	var west, east, south, north bool
	for key, den := range g.dens {
		d, ok := g.c.den.Get(den)
		if !ok || d.Column != key {
			t.Fatalf("den %d filed under %v: %+v", den, key, d)
		}
		west = west || key.X > nx/2
		east = east || key.X < nx/2
		south = south || key.Y > ny/2
		north = north || key.Y < ny/2
	}
	if !west || !east || !south || !north {
		t.Fatalf("dens around the seam corner only on some sides (w %v e %v s %v n %v): %v", west, east, south, north, g.dens)
	}
}
