package game_test

import (
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/outbox"
)

type recorder struct {
	account account.ID
	h       [32]byte
	batches int
	bytes   int
	msgs    []outbox.Message
	ticks   []uint64
	keep    bool
	t       *testing.T
}

func (r *recorder) Deliver(tick uint64, frames [][]byte) {
	r.batches++
	hh := sha256.New()
	hh.Write(r.h[:])
	var batch []byte
	for _, f := range frames {
		hh.Write(f)
		r.bytes += len(f)
		batch = append(batch, f...)
	}
	if r.keep {
		err := outbox.DecodeBatch(batch, func(m outbox.Message) error {
			m.Payload = append([]byte(nil), m.Payload...)
			r.msgs = append(r.msgs, m)
			r.ticks = append(r.ticks, tick)
			return nil
		})
		if err != nil {
			r.t.Errorf("account %d tick %d: %v", r.account, tick, err)
		}
	}
	copy(r.h[:], hh.Sum(nil))
}

// boot is the wall time the tests' games boot at, unless a test says
// otherwise: entity ids count from it, so a fixed one gives the same ids
// (and bytes) on every run.
var boot = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func run(t *testing.T, cfg game.Config, ticks int, keep bool) (*game.Game, []*recorder, []game.Report) {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = clock.NewFake(boot)
	}
	g, err := game.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.WithDefaults()
	recs := make([]*recorder, cfg.Players)
	for i := range recs {
		recs[i] = &recorder{account: account.ID(i + 1), keep: keep, t: t}
		g.Attach(account.ID(i+1), recs[i])
	}
	var reps []game.Report
	for range ticks {
		reps = append(reps, g.Step())
	}
	return g, recs, reps
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		cfg   game.Config
		field string
	}{
		{game.Config{Node: 256}, "Node"},
		{game.Config{Players: -1}, "Players"},
		{game.Config{Area: -5}, "Area"},
		{game.Config{Area: 1e9}, "Area"},
		{game.Config{DenChance: 2}, "DenChance"},
		{game.Config{MaterialiseBudget: -1}, "MaterialiseBudget"},
		{game.Config{Clock: clock.NewFake(time.Date(2023, 12, 31, 0, 0, 0, 0, time.UTC))}, "Config.Clock"}, // the runtime's, given the game's Clock
	}
	for _, c := range cases {
		_, err := game.New(c.cfg)
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%+v: err = %v, want config error on %s", c.cfg, err, c.field)
		}
	}
}

func TestDeterministicFromSeed(t *testing.T) {
	cfg := game.Config{Seed: 42, Players: 6}
	_, a, ra := run(t, cfg, 300, false)
	_, b, rb := run(t, cfg, 300, false)
	for i := range a {
		if a[i].h != b[i].h || a[i].batches != b[i].batches {
			t.Fatalf("account %d: runs with the same seed differ", i+1)
		}
	}
	for i := range ra {
		if ra[i] != rb[i] {
			t.Fatalf("tick %d: reports differ: %+v vs %+v", i+1, ra[i], rb[i])
		}
	}
	_, c, _ := run(t, game.Config{Seed: 43, Players: 6}, 300, false)
	same := 0
	for i := range a {
		if a[i].h == c[i].h {
			same++
		}
	}
	if same == len(a) {
		t.Fatal("a different seed produced the same output")
	}
}

// TestOwnerOnlyNeverLeaks plays random games and decodes every batch: an
// experience frame (owner only) reaches only the account that owns the
// entity, and a player-owned health frame only its owner's party.
func TestOwnerOnlyNeverLeaks(t *testing.T) {
	expSeen, healthSeen := 0, 0
	for seed := uint64(1); seed <= 6; seed++ {
		cfg := game.Config{Seed: seed, Players: 9, PartySize: 3, Area: 300, NoticeRadius: 40}
		g, recs, _ := run(t, cfg, 400, true)
		owner := map[uint64]account.ID{} // master entity → account
		for a := account.ID(1); a <= 9; a++ {
			m, ok := g.Master(a)
			if !ok {
				t.Fatalf("no master for %d", a)
			}
			owner[uint64(m)] = a
		}
		for _, r := range recs {
			for _, m := range r.msgs {
				if m.Kind != outbox.KindComponent {
					continue
				}
				switch m.Component {
				case game.WireExp:
					expSeen++
					if owner[m.Entity] != r.account {
						t.Fatalf("seed %d: account %d received experience of entity %d (owner %d)",
							seed, r.account, m.Entity, owner[m.Entity])
					}
				case game.WireHealth:
					if a, owned := owner[m.Entity]; owned {
						healthSeen++
						if (a-1)/3 != (r.account-1)/3 {
							t.Fatalf("seed %d: account %d outside the party of %d got its health", seed, r.account, a)
						}
					}
				}
			}
		}
	}
	if expSeen == 0 || healthSeen == 0 {
		t.Fatalf("the scenes never sent experience (%d) or player health (%d): the test proves nothing", expSeen, healthSeen)
	}
}

// TestPositionResentEveryEighthStep: while a master walks one path, its
// owner gets its position only every 8th step; between two position
// frames with no path change in between, exactly 8 ticks pass.
func TestPositionResentEveryEighthStep(t *testing.T) {
	g, recs, _ := run(t, game.Config{Seed: 5, Players: 1, Roam: 400}, 600, true)
	me, _ := g.Master(1)
	var lastPos uint64
	pathSince := true
	gaps8, posFrames := 0, 0
	r := recs[0]
	for i, m := range r.msgs {
		if m.Entity != uint64(me) || m.Kind != outbox.KindComponent {
			continue
		}
		tick := r.ticks[i]
		switch m.Component {
		case game.WirePath:
			pathSince = true
		case game.WirePosition:
			posFrames++
			if !pathSince && lastPos != 0 {
				if gap := tick - lastPos; gap != game.PositionResendSteps {
					t.Fatalf("position frames at ticks %d and %d with no path change between", lastPos, tick)
				}
				gaps8++
			}
			lastPos, pathSince = tick, false
		}
	}
	if gaps8 < 10 || posFrames > 600/4 {
		t.Fatalf("%d position frames, %d eight-step gaps: not the every-8th-step pattern", posFrames, gaps8)
	}
}

func TestSmoke(t *testing.T) {
	_, recs, reps := run(t, game.Config{Seed: 1, Players: 8}, 600, false)
	var spawned, died, intents, bytes int
	for _, r := range reps {
		spawned += r.Spawned
		died += r.Died
		intents += r.Intents
		bytes += r.Outbox.BytesDelivered
	}
	last := reps[len(reps)-1]
	t.Logf("entities %d spawned %d died %d intents %d bytes %d", last.Entities, spawned, died, intents, bytes)
	for _, r := range recs {
		t.Logf("account %d: %d batches %d bytes", r.account, r.batches, r.bytes)
	}
}

// Position resends are spread over the eight phases of the resend period:
// every entity resends on every 8th step of its own, at a phase set by its
// id, so a world of entities that started walking together does not send
// all their positions in the same tick (which made every 8th tick the
// slowest of the world benchmark).
func TestPositionResendsAreSpreadOverPhases(t *testing.T) {
	_, recs, _ := run(t, game.Config{Seed: 3, Players: 40, Area: 300, DenChance: 0.2, DenCapacity: 8, WanderChance: 1}, 240, true)
	var byPhase [game.PositionResendSteps]int
	seen := map[[2]uint64]bool{} // (tick, entity): count each resend once
	for _, r := range recs {
		for i, m := range r.msgs {
			tick := r.ticks[i]
			if tick < 80 || m.Kind != outbox.KindComponent || m.Component != game.WirePosition {
				continue
			}
			if k := [2]uint64{tick, m.Entity}; !seen[k] {
				seen[k] = true
				byPhase[tick%game.PositionResendSteps]++
			}
		}
	}
	lo, hi, total := byPhase[0], byPhase[0], 0
	for _, n := range byPhase {
		lo, hi, total = min(lo, n), max(hi, n), total+n
	}
	if total < 500 {
		t.Fatalf("only %d position resends: the scene does not exercise the rule", total)
	}
	if 2*hi > 3*lo {
		t.Fatalf("position resends by tick mod %d: %v (busiest phase > 1.5x the quietest)", game.PositionResendSteps, byPhase)
	}
	t.Logf("position resends by phase: %v", byPhase)
}
