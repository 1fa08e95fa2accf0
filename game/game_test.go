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

// TestAMastersPositionIsResentEvery16thStep: while a master walks one path
// on a node alone, its owner gets its position only every 16th step
// (game.OwnedResendSteps); between two position frames with no path change
// in between, exactly 16 ticks pass.
func TestAMastersPositionIsResentEvery16thStep(t *testing.T) {
	g, recs, _ := run(t, game.Config{Seed: 5, Players: 1, Roam: 400}, 600, true)
	me, _ := g.Master(1)
	var lastPos uint64
	pathSince := true
	gaps, posFrames := 0, 0
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
				if gap := tick - lastPos; gap != game.OwnedResendSteps {
					t.Fatalf("position frames at ticks %d and %d with no path change between", lastPos, tick)
				}
				gaps++
			}
			lastPos, pathSince = tick, false
		}
	}
	if gaps < 10 || posFrames > 600/8 {
		t.Fatalf("%d position frames, %d %d-step gaps: not the every-%dth-step pattern", posFrames, gaps, game.OwnedResendSteps, game.OwnedResendSteps)
	}
}

// A mob's position is resent to clients only as a correction of a walk
// that was redirected: each position frame of a mob that comes with no
// path frame of it in the same batch (a resend, not a start, an arrival
// or a stop) follows a redirect (a path frame with no position) since its
// last position frame, and two resends with no start or arrival between
// are at least game.CorrectionSteps ticks apart. A node alone has no
// other node's ghosts to keep fresh.
func TestAMobsStraightWalkIsNotResent(t *testing.T) {
	_, recs, _ := run(t, game.Config{Seed: 3, Players: 20, Area: 300, DenChance: 0.2, DenCapacity: 8, WanderChance: 1}, 600, true)
	resends, legs := 0, 0
	for _, r := range recs {
		type state struct {
			lastPos    uint64
			redirected bool
			resent     bool // the last position frame was a resend
		}
		mobs := map[uint64]*state{}
		isMob := map[uint64]bool{}
		for i := 0; i < len(r.msgs); {
			// One batch's frames at a time.
			tick := r.ticks[i]
			j := i
			pos, path := map[uint64]bool{}, map[uint64]bool{}
			for ; j < len(r.msgs) && r.ticks[j] == tick; j++ {
				m := r.msgs[j]
				if m.Kind == outbox.KindComponent && m.Component == game.WireVisual && len(m.Payload) == 1 && game.Kind(m.Payload[0]) == game.KindMob {
					isMob[m.Entity] = true
				}
				if m.Kind == outbox.KindAppear {
					// Seen anew: whether its walk was redirected before, the
					// client cannot tell.
					mobs[m.Entity] = &state{redirected: true}
				}
				if m.Kind != outbox.KindComponent {
					continue
				}
				switch m.Component {
				case game.WirePosition:
					pos[m.Entity] = true
				case game.WirePath:
					path[m.Entity] = true
				}
			}
			for e := range pos {
				if !isMob[e] {
					continue
				}
				s := mobs[e]
				switch {
				case s == nil || s.lastPos == 0:
					// Its appear burst (or a first sight): what came before
					// is unknown, so a correction may follow.
					mobs[e] = &state{lastPos: tick, redirected: true}
					continue
				case !path[e]:
					resends++
					if !s.redirected || (s.resent && tick-s.lastPos < game.CorrectionSteps) {
						t.Fatalf("account %d tick %d: mob %d resent %d ticks after its last position (a resend: %v), redirected=%v", r.account, tick, e, tick-s.lastPos, s.resent, s.redirected)
					}
				default:
					legs++
				}
				s.lastPos, s.redirected, s.resent = tick, false, !path[e]
			}
			for e := range path {
				if s := mobs[e]; s != nil && !pos[e] {
					s.redirected = true
				}
			}
			i = j
		}
	}
	if legs < 100 {
		t.Fatalf("%d legs started or ended, %d corrections: the scene proves little", legs, resends)
	}
	t.Logf("%d legs started or ended, %d corrections", legs, resends)
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
