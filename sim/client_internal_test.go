package sim

import (
	"encoding/binary"
	"maps"
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/proto/clientpb"
	"github.com/shardwise/shardwise/terrain"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// socketless is a client with no socket, fed messages by hand.
func socketless(lean bool) *Client {
	return &Client{
		lean: lean, changed: make(chan struct{}), view: interest.DefaultView(),
		entities: make(map[uint64]*Entity), terrain: make(map[[2]int32][]byte),
	}
}

func serverBytes(t *testing.T, m *clientpb.ServerMessage) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A full and a lean client apply the same messages: both count every
// frame and every byte alike (ByKind accounts for each frame whole); the
// full one keeps every entity it is shown, the lean one, once You names
// them, only its own master and pet.
func TestLeanAndFullClientsCountAlikeAndKeepWhatTheyShould(t *testing.T) {
	const master, pet, mob = 7, 8, 9
	pos := zone.AppendPos(nil, torus.Pos{X: 10, Y: 20})
	path := append([]byte{1}, pos...)
	var (
		appearMaster = outbox.AppendAppearFrame(nil, master, 2)
		masterPos    = outbox.AppendComponentFrame(nil, master, game.WirePosition, pos)
		masterPath   = outbox.AppendComponentFrame(nil, master, game.WirePath, path)
		appearMob    = outbox.AppendAppearFrame(nil, mob, 1)
		mobPos       = outbox.AppendComponentFrame(nil, mob, game.WirePosition, pos)
		mobMove      = outbox.AppendComponentFrame(nil, mob, game.WirePosition, pos)
		mobPath      = outbox.AppendComponentFrame(nil, mob, game.WirePath, path)
		mobExp       = outbox.AppendComponentFrame(nil, mob, 200, []byte{1}) // a type past Updates' end
		vanishMob    = outbox.AppendVanishFrame(nil, mob, interest.OutOfSight)
	)
	chunk := terrain.AppendChunk(nil, &terrain.Chunk{X: 1, Y: 2})
	batch := func(tick uint64, frames ...[]byte) []byte {
		return serverBytes(t, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_Batch{Batch: &clientpb.Batch{Tick: tick, Frames: slices.Concat(frames...)}}})
	}
	msgs := [][]byte{
		batch(1, appearMaster, masterPos, masterPath, appearMob, mobPos),
		serverBytes(t, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_You{You: &clientpb.You{Master: master, Pet: pet}}}),
		serverBytes(t, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_Terrain{Terrain: &clientpb.Terrain{Chunk: chunk}}}),
		batch(2, mobMove, mobPath, mobExp),
		batch(3, vanishMob),
	}
	var want ClientStats
	want.Batches, want.Appears, want.Vanishes, want.Updates, want.Messages = 3, 2, 1, 6, len(msgs)
	for _, m := range msgs {
		want.Bytes += len(m)
	}
	want.ByKind = ByteCounts{
		Bursts:   len(appearMaster) + len(masterPos) + len(masterPath) + len(appearMob) + len(mobPos),
		Vanishes: len(vanishMob),
		Terrain:  len(msgs[2]),
	}
	want.ByKind.Updates[game.WirePosition] = len(mobMove)
	want.ByKind.Updates[game.WirePath] = len(mobPath)
	want.ByKind.Updates[len(want.ByKind.Updates)-1] = len(mobExp)

	for _, lean := range []bool{false, true} {
		c := socketless(lean)
		vanished := make(map[uint64]vanish)
		apply := func(b []byte) {
			t.Helper()
			c.stats.Bytes += len(b)
			c.stats.Messages++
			if err := c.apply(b, vanished); err != nil || c.closeErr != nil {
				t.Fatalf("lean=%v: %v %v", lean, err, c.closeErr)
			}
		}
		apply(msgs[0])
		if len(c.entities) != 2 {
			t.Fatalf("lean=%v: %d entities before You, want both shown", lean, len(c.entities))
		}
		apply(msgs[1])
		if _, ok := c.entities[mob]; ok == lean {
			t.Fatalf("lean=%v: the mob kept=%v after You", lean, ok)
		}
		for _, m := range msgs[2:] {
			apply(m)
		}
		got := c.stats
		got.BlinkLog = nil
		if got.ByKind != want.ByKind || got.Bytes != want.Bytes || got.Batches != want.Batches || got.Appears != want.Appears ||
			got.Vanishes != want.Vanishes || got.Updates != want.Updates || got.Messages != want.Messages {
			t.Fatalf("lean=%v: stats\n%+v, want\n%+v", lean, got, want)
		}
		e, ok := c.entities[master]
		if !ok || !slices.Equal(e.Components[game.WirePath], path) {
			t.Fatalf("lean=%v: the master is %+v", lean, e)
		}
		if _, ok := c.entities[mob]; ok {
			t.Fatalf("lean=%v: the mob outlived its vanish", lean)
		}
		if _, ok := c.terrain[[2]int32{1, 2}]; ok == lean {
			t.Fatalf("lean=%v: terrain kept=%v", lean, ok)
		}
	}
}

// A client reckons where an entity walks from its last Position along its
// Path at its Speed, tick by tick, through a redirect sent without a
// Position (the new path took effect in the tick it arrived), as the
// reference game moves it.
func TestWhereFollowsPathAndSpeedThroughARedirect(t *testing.T) {
	const mob = 9
	geo, err := torus.New(torus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := socketless(false)
	c.geo, c.welcome = geo, &clientpb.Welcome{TickHz: 20}
	pathTo := func(x, y float64) []byte { return append([]byte{1}, zone.AppendPos(nil, torus.Pos{X: x, Y: y})...) }
	speed := func(mps float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(mps)) }
	batch := func(tick uint64, frames ...[]byte) {
		t.Helper()
		b := serverBytes(t, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_Batch{Batch: &clientpb.Batch{Tick: tick, Frames: slices.Concat(frames...)}}})
		if err := c.apply(b, map[uint64]vanish{}); err != nil || c.closeErr != nil {
			t.Fatal(err, c.closeErr)
		}
	}
	where := func(tick uint64, want torus.Pos) {
		t.Helper()
		c.lastTick = tick
		got, ok := (&View{c}).Where(mob)
		if !ok || geo.Distance(got, want) > 1e-3 {
			t.Fatalf("tick %d: where %v %v, want %v", tick, got, ok, want)
		}
	}
	// Tick 1: it appears at (10, 20) walking east to (30, 20) at 2 m/s:
	// 0.1 m a tick.
	batch(1, outbox.AppendAppearFrame(nil, mob, 3),
		outbox.AppendComponentFrame(nil, mob, game.WirePosition, zone.AppendPos(nil, torus.Pos{X: 10, Y: 20})),
		outbox.AppendComponentFrame(nil, mob, game.WirePath, pathTo(30, 20)),
		outbox.AppendComponentFrame(nil, mob, game.WireSpeed, speed(2)))
	where(1, torus.Pos{X: 10, Y: 20})
	where(11, torus.Pos{X: 11, Y: 20})
	// Tick 21: redirected north to (12, 40) at 4 m/s, no Position: by tick
	// 20 it had reached (11.9, 20); in tick 21 it stepped 0.2 m towards the
	// new aim.
	batch(21, outbox.AppendComponentFrame(nil, mob, game.WirePath, pathTo(11.9, 40)),
		outbox.AppendComponentFrame(nil, mob, game.WireSpeed, speed(4)))
	where(21, torus.Pos{X: 11.9, Y: 20.2})
	where(31, torus.Pos{X: 11.9, Y: 22.2})
	// Long after, it has stopped at the target.
	where(1000, torus.Pos{X: 11.9, Y: 40})
	// A Position replaces the reckoning.
	batch(1001, outbox.AppendComponentFrame(nil, mob, game.WirePosition, zone.AppendPos(nil, torus.Pos{X: 5, Y: 5})))
	where(1001, torus.Pos{X: 5, Y: 5})
}

// The reckoning agrees with the server: a client shown a world of walking
// mobs (wandering, chasing the bots that fight them) and bots with pets,
// whose straight walks the server no longer resends, knows at every tick
// where each entity it sees stands, to a centimetre.
func TestWhereMatchesTheServerEveryTick(t *testing.T) {
	t.Parallel()
	g, err := game.New(game.Config{Seed: 7, Players: 6, Area: 300, DenChance: 0.2, DenCapacity: 6, WanderChance: 1})
	if err != nil {
		t.Fatal(err)
	}
	geo := g.Geometry()
	c := socketless(false)
	c.geo, c.welcome = geo, &clientpb.Welcome{TickHz: 20}
	vanished := make(map[uint64]vanish)
	redirects := 0 // path updates with no position in the batch
	g.Attach(1, outbox.SinkFunc(func(tick uint64, frames [][]byte) {
		fs := slices.Concat(frames...)
		pos := map[uint64]bool{}
		_ = outbox.DecodeBatch(fs, func(m outbox.Message) error {
			if m.Kind == outbox.KindComponent && m.Component == game.WirePosition {
				pos[m.Entity] = true
			}
			return nil
		})
		_ = outbox.DecodeBatch(fs, func(m outbox.Message) error {
			if m.Kind == outbox.KindComponent && m.Component == game.WirePath && !pos[m.Entity] {
				redirects++
			}
			return nil
		})
		b := serverBytes(t, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_Batch{Batch: &clientpb.Batch{Tick: tick, Frames: fs}}})
		if err := c.apply(b, vanished); err != nil || c.closeErr != nil {
			t.Fatal(err, c.closeErr)
		}
	}))
	positions := g.Runtime().Positions()
	checked, worst := 0, 0.0
	for range 600 {
		c.lastTick = g.Step().Tick
		v := &View{c}
		for id := range c.entities {
			where, ok := v.Where(id)
			truth, ok2 := positions.Get(ecs.ID(id))
			if !ok || !ok2 {
				continue
			}
			d := geo.Delta(where, truth.Pos)
			off := math.Hypot(d.X, d.Y)
			worst = max(worst, off)
			if off > 0.01 {
				t.Fatalf("tick %d: entity %d reckoned at %v, stands at %v (%.3f m off)", c.lastTick, id, where, truth.Pos, off)
			}
			checked++
		}
	}
	if checked < 10000 || redirects < 100 {
		t.Fatalf("%d checks, %d redirects: the scene proves little", checked, redirects)
	}
	t.Logf("%d positions checked, %d redirects, worst %.2g m", checked, redirects, worst)
}

// An owner-only frame (experience, purse) about the client's own master or
// pet is expected; about any other entity it is a leak, counted.
func TestOwnerOnlyFramesAboutOthersAreLeaks(t *testing.T) {
	const master, pet, other = 3, 4, 9
	c := socketless(false)
	c.master, c.pet = master, pet
	b := serverBytes(t, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_Batch{Batch: &clientpb.Batch{Tick: 1, Frames: slices.Concat(
		outbox.AppendComponentFrame(nil, master, game.WireExp, []byte{2}),
		outbox.AppendComponentFrame(nil, pet, game.WirePurse, []byte{0}),
		outbox.AppendComponentFrame(nil, other, game.WireHealth, []byte{1}),
		outbox.AppendComponentFrame(nil, other, game.WireExp, []byte{2}),
		outbox.AppendComponentFrame(nil, other, game.WirePurse, []byte{0}),
	)}}})
	if err := c.apply(b, map[uint64]vanish{}); err != nil || c.closeErr != nil {
		t.Fatal(err, c.closeErr)
	}
	if got := c.stats.Leaks; got != 2 {
		t.Fatalf("leaks %d, want 2 (the other entity's experience and purse)", got)
	}
}

// A You naming other ids than the ones the client holds (its player came
// back from its last save: docs/protocol.md) starts the view afresh: the
// client forgets every entity it knew, for the server sends no vanish for
// them and every entity of the new view appears again; it keeps the
// ground, which is not sent again. The first You, or the same ids again,
// forgets nothing.
func TestAYouWithNewIDsStartsTheViewAfresh(t *testing.T) {
	pos := zone.AppendPos(nil, torus.Pos{X: 10, Y: 20})
	you := func(master, pet uint64) []byte {
		return serverBytes(t, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_You{You: &clientpb.You{Master: master, Pet: pet}}})
	}
	shown := func(tick uint64, ids ...uint64) []byte {
		var frames []byte
		for _, id := range ids {
			frames = outbox.AppendAppearFrame(frames, id, 1)
			frames = outbox.AppendComponentFrame(frames, id, game.WirePosition, pos)
		}
		return serverBytes(t, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_Batch{Batch: &clientpb.Batch{Tick: tick, Frames: frames}}})
	}
	chunk := terrain.AppendChunk(nil, &terrain.Chunk{X: 1, Y: 2})
	ground := serverBytes(t, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_Terrain{Terrain: &clientpb.Terrain{Chunk: chunk}}})
	for _, lean := range []bool{false, true} {
		c := socketless(lean)
		vanished := make(map[uint64]vanish)
		apply := func(b []byte) {
			t.Helper()
			if err := c.apply(b, vanished); err != nil || c.closeErr != nil {
				t.Fatalf("lean=%v: %v %v", lean, err, c.closeErr)
			}
		}
		knows := func(want ...uint64) {
			t.Helper()
			got := slices.Sorted(maps.Keys(c.entities))
			if !slices.Equal(got, want) {
				t.Fatalf("lean=%v: the client knows %v, want %v", lean, got, want)
			}
		}
		apply(shown(1, 7))
		apply(you(7, 8))
		apply(shown(2, 8, 9))
		apply(ground)
		if lean {
			knows(7, 8)
		} else {
			knows(7, 8, 9)
		}
		apply(you(7, 8)) // the same ids: nothing changes
		if lean {
			knows(7, 8)
		} else {
			knows(7, 8, 9)
		}
		apply(you(17, 18))
		knows()
		apply(shown(3, 17, 18, 9))
		if lean {
			knows(17, 18)
		} else {
			knows(9, 17, 18)
		}
		if _, ok := c.terrain[[2]int32{1, 2}]; ok == lean {
			t.Fatalf("lean=%v: terrain kept=%v after the new You", lean, ok)
		}
		if c.stats.Blinks != 0 {
			t.Fatalf("lean=%v: %d blinks", lean, c.stats.Blinks)
		}
	}
}
