package sim

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

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
