package webclient_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/internal/browsertest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/proto/clientpb"
	"github.com/shardwise/shardwise/terrain"
)

// A You naming other ids than the ones the client holds (its player came
// back from its last save after its node died: docs/protocol.md) starts
// the view afresh: the server sends no vanish for the old view and every
// entity of the new one appears again, so the Client forgets every entity
// it knew and keeps the ground, which is not sent again. The first You,
// or the same ids again, forgets nothing. The messages are the Go
// encoder's, fed to Client.receive as the socket would.
func TestAYouWithNewIDsStartsTheViewAfresh(t *testing.T) {
	t.Parallel() // its own Chromium: see browser
	ctx := conformancePage(t)
	msg := func(m *clientpb.ServerMessage) string {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b64(b)
	}
	you := func(master, pet uint64) string {
		return msg(&clientpb.ServerMessage{Body: &clientpb.ServerMessage_You{You: &clientpb.You{Master: master, Pet: pet}}})
	}
	shown := func(tick uint64, ids ...uint64) string {
		var frames []byte
		for _, id := range ids {
			frames = outbox.AppendAppearFrame(frames, id, 1)
			frames = outbox.AppendComponentFrame(frames, id, game.WirePosition, positionPayload(10, 20, 0))
		}
		return msg(&clientpb.ServerMessage{Body: &clientpb.ServerMessage_Batch{Batch: &clientpb.Batch{Tick: tick, Frames: frames}}})
	}
	ground := msg(&clientpb.ServerMessage{Body: &clientpb.ServerMessage_Terrain{Terrain: &clientpb.Terrain{
		Chunk: terrain.AppendChunk(nil, &terrain.Chunk{X: 1, Y: 2})}}})
	steps := []struct {
		msg  string
		want string // the entities known after it, sorted; then the terrain chunks held
	}{
		{shown(1, 7), "7 t0"},
		{you(7, 8), "7 t0"}, // the first You: nothing to forget
		{shown(2, 8, 9), "7,8,9 t0"},
		{ground, "7,8,9 t1"},
		{you(7, 8), "7,8,9 t1"}, // the same ids
		{you(17, 18), " t1"},    // new ids: afresh, the ground kept
		{shown(3, 17, 18, 9), "17,18,9 t1"},
	}
	var msgs []string
	for _, s := range steps {
		msgs = append(msgs, s.msg)
	}
	var got []string
	browsertest.EvalJSON(t, ctx, fmt.Sprintf(`(async () => {
		const {Client} = await import("/client.js");
		const bytes = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
		const c = new Client();
		const failed = [];
		c.on("protocolerror", (e) => failed.push(e.message));
		return JSON.stringify(%s.map((m) => {
			c.receive(bytes(m).buffer);
			if (failed.length) return "protocol error: " + failed.join("; ");
			return [...c.world.entities.keys()].map(String).sort().join(",") + " t" + c.world.terrain.size;
		}));
	})()`, jsonArray(t, msgs)), &got)
	if len(got) != len(steps) {
		t.Fatalf("%d results for %d messages: %v", len(got), len(steps), got)
	}
	for i, s := range steps {
		if got[i] != s.want {
			t.Errorf("after message %d: the client holds %q, want %q", i, got[i], s.want)
		}
	}
}

func jsonArray(t *testing.T, s []string) string {
	t.Helper()
	quoted := slices.Clone(s)
	for i, v := range quoted {
		quoted[i] = jsString(v)
	}
	return "[" + strings.Join(quoted, ",") + "]"
}
