package webclient_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/internal/browsertest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/proto/clientpb"
	"github.com/shardwise/shardwise/terrain"
	"github.com/shardwise/shardwise/webclient"
	"github.com/shardwise/shardwise/zone"
)

// The tests in this file run the client's decoders in Chromium on bytes
// the Go encoders wrote and check that they agree with the Go decoders:
// the same values for what Go accepts, a refusal (FrameError or
// ProtoError, never another exception) for what Go refuses.

// conformanceJS loads the modules and defines the page-side halves of the
// checks; each returns a JSON string.
const conformanceJS = `(async () => {
	const proto = await import("/proto.js");
	const frames = await import("/frames.js");
	const client = await import("/client.js");
	const bytes = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
	const b64 = (b) => btoa(String.fromCharCode(...b));
	const outcome = (fn, Err) => {
		try { fn(); return "ok"; }
		catch (err) { return err instanceof Err ? "refused" : "threw " + err.name + ": " + err.message; }
	};
	const big = (_, v) => (typeof v === "bigint" ? v.toString() : v instanceof Uint8Array ? b64(v) : v);
	window.conf = {
		// replay applies every batch to a World and returns its snapshot.
		replay(batches) {
			const w = new client.World();
			batches.forEach(([tick, b], i) => w.applyBatch(BigInt(tick), bytes(b)));
			return JSON.stringify(w.snapshot());
		},
		batchOutcomes: (cases) => JSON.stringify(cases.map((b) => outcome(() => frames.decodeBatch(bytes(b)), frames.FrameError))),
		chunkOutcomes: (cases) => JSON.stringify(cases.map((b) => {
			try { const c = frames.decodeChunk(bytes(b)); return {ok: true, heights: [...c.heights], markers: [...c.markers], edits: c.edits.length}; }
			catch (err) { return {ok: false, error: err instanceof frames.FrameError ? "refused" : "threw " + err.name}; }
		})),
		server: (cases) => JSON.stringify(cases.map((b) => {
			try { return proto.decodeServerMessage(bytes(b)); }
			catch (err) { return {refused: err instanceof proto.ProtoError, error: err.name + ": " + err.message}; }
		}), big),
		// atomic applies good, then bad, and reports whether bad was
		// refused and whether the world is still what good made it.
		atomic([good, bad]) {
			const w = new client.World();
			w.applyBatch(1n, bytes(good));
			const before = JSON.stringify(w.snapshot());
			const got = outcome(() => w.applyBatch(2n, bytes(bad)), frames.FrameError);
			return JSON.stringify({outcome: got, unchanged: JSON.stringify(w.snapshot()) === before});
		},
		client: (cases) => JSON.stringify(cases.map((m) => b64(proto.encodeClientMessage(m)))),
	};
	return JSON.stringify(true);
})()`

func conformancePage(t *testing.T) context.Context {
	t.Helper()
	ctx := browser(t)
	srv := httptestServer(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv+"/index.html")); err != nil {
		t.Fatal(err)
	}
	var ok bool
	browsertest.EvalJSON(t, ctx, conformanceJS, &ok)
	return ctx
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// call runs window.conf[fn](arg) in the page and decodes its JSON result.
func call(t *testing.T, ctx context.Context, fn string, arg, out any) {
	t.Helper()
	a, err := json.Marshal(arg)
	if err != nil {
		t.Fatal(err)
	}
	browsertest.EvalJSON(t, ctx, fmt.Sprintf("window.conf.%s(%s)", fn, a), out)
}

// recorder is an outbox.Sink that keeps every batch.
type recorder struct{ batches [][2]any }

func (r *recorder) Deliver(tick uint64, frames [][]byte) {
	r.batches = append(r.batches, [2]any{tick, b64(bytes.Join(frames, nil))})
}

// goEntity is what the Go decoders make of an entity's last payloads.
type goEntity struct {
	hasVisual, hasPos   bool
	visual, hp, max     int
	x, y, z, speed      float64
	hasPath             bool
	pathX, pathY        float64
	hasHealth, hasSpeed bool
}

// The reference game's own batches, a hundred ticks of them, give the
// same world in the client as the Go decoders give.
func TestClientReplaysTheReferenceGame(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := conformancePage(t)
	g, err := game.New(game.Config{Seed: 11, Players: 3, Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	g.Attach(account.ID(1), rec)
	for range 100 {
		g.Step()
	}
	// The Go side of the replay.
	want := map[uint64]*goEntity{}
	for _, b := range rec.batches {
		raw, _ := base64.StdEncoding.DecodeString(b[1].(string))
		err := outbox.DecodeBatch(raw, func(m outbox.Message) error {
			switch m.Kind {
			case outbox.KindAppear:
				want[m.Entity] = &goEntity{}
			case outbox.KindVanish:
				delete(want, m.Entity)
			case outbox.KindComponent:
				e := want[m.Entity]
				if e == nil {
					e = &goEntity{}
					want[m.Entity] = e
				}
				return e.set(m.Component, m.Payload)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("the game's batch of tick %v: %v", b[0], err)
		}
	}
	if len(want) < 3 {
		t.Fatalf("the game showed account 1 only %d entities", len(want))
	}

	var got struct {
		Entities []struct {
			ID       string
			Position *struct{ X, Y, Z float64 }
			Path     *struct {
				Active bool
				Target *struct{ X, Y float64 }
			}
			Speed  *struct{ Mps float64 }
			Visual *struct{ Kind int }
			Health *struct{ Hp, Max int }
		}
	}
	call(t, ctx, "replay", rec.batches, &got)
	if len(got.Entities) != len(want) {
		t.Errorf("the client knows %d entities, Go %d", len(got.Entities), len(want))
	}
	for _, e := range got.Entities {
		var id uint64
		fmt.Sscan(e.ID, &id)
		w := want[id]
		if w == nil {
			t.Errorf("entity %s: the client has it, Go does not", e.ID)
			continue
		}
		ok := (e.Visual != nil) == w.hasVisual && (e.Visual == nil || e.Visual.Kind == w.visual) &&
			(e.Position != nil) == w.hasPos && (e.Position == nil || e.Position.X == w.x && e.Position.Y == w.y && e.Position.Z == w.z) &&
			(e.Path == nil) == !w.hasPath && (e.Path == nil || !e.Path.Active || e.Path.Target.X == w.pathX && e.Path.Target.Y == w.pathY) &&
			(e.Health != nil) == w.hasHealth && (e.Health == nil || e.Health.Hp == w.hp && e.Health.Max == w.max) &&
			(e.Speed != nil) == w.hasSpeed && (e.Speed == nil || e.Speed.Mps == w.speed)
		if !ok {
			t.Errorf("entity %s: client %+v, Go %+v", e.ID, e, *w)
		}
	}
	t.Logf("%d batches, %d entities agree", len(rec.batches), len(got.Entities))
}

// set decodes one payload as game/components.go and zone.DecodePos do.
func (e *goEntity) set(t outbox.ComponentType, p []byte) error {
	switch t {
	case game.WireVisual:
		e.visual, e.hasVisual = int(p[0]), true
	case game.WirePosition:
		pos, err := zone.DecodePos(p)
		e.x, e.y, e.z, e.hasPos = pos.X, pos.Y, pos.Z, true
		return err
	case game.WirePath:
		// The client decodes an inactive path to {active: false}; here
		// only its presence and an active one's target are compared.
		e.hasPath = true
		if len(p) == 13 {
			pos, err := zone.DecodePos(p[1:])
			e.pathX, e.pathY = pos.X, pos.Y
			return err
		}
		e.pathX, e.pathY = 0, 0
	case game.WireSpeed:
		e.speed, e.hasSpeed = float64(math.Float32frombits(binary.LittleEndian.Uint32(p))), true
	case game.WireHealth:
		hp, n := binary.Uvarint(p)
		mx, _ := binary.Uvarint(p[n:])
		e.hp, e.max, e.hasHealth = int(hp), int(mx), true
	}
	return nil
}

// mutations returns b's every prefix and b with each byte in turn
// replaced by each of a few values: the neighbourhood of a valid encoding,
// where a decoder that is not as strict as Go's would accept something.
func mutations(b []byte) [][]byte {
	var out [][]byte
	for n := range len(b) {
		out = append(out, b[:n])
	}
	for i := range b {
		for _, v := range []byte{0x00, 0x01, 0x7f, 0x80, 0xff, b[i] ^ 0x01} {
			if v == b[i] {
				continue
			}
			m := slices.Clone(b)
			m[i] = v
			out = append(out, m)
		}
	}
	return append(out, append(slices.Clone(b), 0), append(slices.Clone(b), b...))
}

// The batch decoder accepts and refuses exactly what outbox.DecodeBatch
// does, over every mutation of a batch with each kind of frame.
func TestBatchDecoderIsAsStrictAsGo(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := conformancePage(t)
	var valid []byte
	valid = outbox.AppendAppearFrame(valid, 0x8000_0000_0000_0001, 2)
	valid = outbox.AppendComponentFrame(valid, 0x8000_0000_0000_0001, game.WireVisual, []byte{byte(game.KindMob)})
	valid = outbox.AppendComponentFrame(valid, 0x8000_0000_0000_0001, 300, nil) // a type of two varint bytes, no payload
	valid = outbox.AppendComponentFrame(valid, 7, game.WireHealth, healthPayload(3, 200))
	valid = outbox.AppendVanishFrame(valid, 9, interest.Death)
	valid = outbox.AppendAppearFrame(valid, 10, 0)
	cases := append(mutations(valid),
		nil,
		outbox.AppendComponentFrame(nil, 1, 0xFFFF, []byte("x")),
		outbox.AppendAppearFrame(nil, 1, outbox.MaxBurstLen+1),
		append([]byte{0x80, 0x00}, valid...), // a non-minimal length
	)
	var enc []string
	for _, c := range cases {
		enc = append(enc, b64(c))
	}
	var got []string
	call(t, ctx, "batchOutcomes", enc, &got)
	refused := 0
	for i, c := range cases {
		want := "ok"
		if outbox.DecodeBatch(c, func(outbox.Message) error { return nil }) != nil {
			want = "refused"
			refused++
		}
		if got[i] != want {
			t.Errorf("case %d (% x): client %s, outbox.DecodeBatch %s", i, c, got[i], want)
		}
	}
	t.Logf("%d batches, %d refused by both", len(cases), refused)
}

// The chunk decoder accepts and refuses exactly what terrain.DecodeChunk
// does, and decodes the same heights and markers.
func TestChunkDecoderIsAsStrictAsGo(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := conformancePage(t)
	_, valid := testChunk(t)
	cases := mutations(valid)
	var enc []string
	for _, c := range cases {
		enc = append(enc, b64(c))
	}
	var got []struct {
		OK      bool
		Error   string
		Heights []int16
		Markers []uint8
		Edits   int
	}
	call(t, ctx, "chunkOutcomes", enc, &got)
	refused := 0
	for i, c := range cases {
		ch, err := terrain.DecodeChunk(c)
		if err != nil {
			refused++
			if got[i].OK || got[i].Error != "refused" {
				t.Errorf("case %d: terrain.DecodeChunk refuses (%v), the client: %+v", i, err, got[i].Error)
			}
			continue
		}
		s, err := terrain.Apply(ch.Heights, ch.Edits)
		if err != nil {
			t.Fatal(err)
		}
		if !got[i].OK || !slices.Equal(got[i].Heights, ch.Heights[:]) || !slices.Equal(got[i].Markers, s.Markers[:]) || got[i].Edits != len(ch.Edits) {
			t.Errorf("case %d: terrain.DecodeChunk accepts, the client: ok %v %s, heights equal %v, markers equal %v",
				i, got[i].OK, got[i].Error, slices.Equal(got[i].Heights, ch.Heights[:]), slices.Equal(got[i].Markers, s.Markers[:]))
		}
	}
	t.Logf("%d chunks, %d refused by both", len(cases), refused)
}

// A batch with one malformed payload is refused whole: the frames before
// it change nothing either.
func TestWorldAppliesABatchWholeOrNotAtAll(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := conformancePage(t)
	good := outbox.AppendAppearFrame(nil, 5, 1)
	good = outbox.AppendComponentFrame(good, 5, game.WirePosition, positionPayload(1, 2, 3))
	bad := outbox.AppendVanishFrame(nil, 5, interest.Gone)
	bad = outbox.AppendAppearFrame(bad, 6, 1)
	bad = outbox.AppendComponentFrame(bad, 6, game.WirePosition, positionPayload(4, 5, 6))
	bad = outbox.AppendComponentFrame(bad, 6, game.WireHealth, []byte{0x80, 0x00}) // a non-minimal varint
	var got struct {
		Outcome   string
		Unchanged bool
	}
	call(t, ctx, "atomic", []string{b64(good), b64(bad)}, &got)
	if got.Outcome != "refused" || !got.Unchanged {
		t.Errorf("a batch with a malformed health: %+v, want refused and the world unchanged", got)
	}
}

// unknownFields are fields of every wire type that no message of
// client.proto has, as a newer server could send them.
func unknownFields() []byte {
	var b []byte
	b = protowire.AppendTag(b, 90, protowire.VarintType)
	b = protowire.AppendVarint(b, math.MaxUint64)
	b = protowire.AppendTag(b, 91, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 7)
	b = protowire.AppendTag(b, 92, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 8)
	b = protowire.AppendTag(b, 93, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("later"))
	b = protowire.AppendTag(b, 94, protowire.StartGroupType)
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 5)
	b = protowire.AppendTag(b, 94, protowire.EndGroupType)
	return b
}

func withUnknown[M proto.Message](m M) M {
	m.ProtoReflect().SetUnknown(unknownFields())
	return m
}

// Every server message, marshalled by protobuf-go with unknown fields of
// every wire type inside and around it, decodes to its values; malformed
// ones are refused.
func TestServerMessagesDecodeAsProtobufWrites(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := conformancePage(t)
	msgs := []*clientpb.ServerMessage{
		{Body: &clientpb.ServerMessage_Welcome{Welcome: withUnknown(&clientpb.Welcome{Account: math.MaxUint64, SessionEpoch: 1 << 60, Gateway: "zone-é",
			World: withUnknown(&clientpb.World{SizeX: 128000, SizeY: 64000.5, ChunkEdge: 32}), TickHz: 20})}},
		{Body: &clientpb.ServerMessage_You{You: withUnknown(&clientpb.You{Master: math.MaxUint64, Pet: 1<<63 + 5})}},
		{Body: &clientpb.ServerMessage_You{You: &clientpb.You{}}},
		{Body: &clientpb.ServerMessage_Batch{Batch: withUnknown(&clientpb.Batch{Tick: 1 << 40, Frames: []byte{1, 2, 3}})}},
		{Body: &clientpb.ServerMessage_Terrain{Terrain: &clientpb.Terrain{Chunk: []byte{9}}}},
		{Body: &clientpb.ServerMessage_Error{Error: &clientpb.Error{Code: "GATEWAY.NOT_YOURS", Message: "no", InputSeq: math.MaxUint32}}},
		{Body: &clientpb.ServerMessage_Pong{Pong: &clientpb.Pong{Nonce: 1<<64 - 2, Tick: 3}}},
		{Body: &clientpb.ServerMessage_ResumeCredential{ResumeCredential: withUnknown(&clientpb.ResumeCredential{Credential: "AQ-_", WindowMs: 60000})}},
	}
	var enc []string
	for _, m := range msgs {
		withUnknown(m)
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		enc = append(enc, b64(b))
	}
	// You.master as a varint: protobuf-go keeps a known field of the wrong
	// wire type as an unknown one, and so must the client.
	enc = append(enc, b64([]byte{0x12, 0x02, 0x08, 0x01}))
	good := len(enc)
	you, _ := proto.Marshal(msgs[1])
	bad := [][]byte{
		you[:len(you)-1],               // truncated
		{0x12, 0x02, 0x09, 0x01},       // a fixed64 cut short
		{0x07},                         // wire type 7
		{0x00, 0x01},                   // field number 0
		{0x12, 0x01, 0x0c},             // an end group without a start
		bytes.Repeat([]byte{0xff}, 11), // a varint of 11 bytes
	}
	for _, b := range bad {
		var m clientpb.ServerMessage
		if proto.Unmarshal(b, &m) == nil {
			t.Fatalf("protobuf-go accepts % x: not a malformed case", b)
		}
		enc = append(enc, b64(b))
	}
	var got []map[string]any
	call(t, ctx, "server", enc, &got)
	wantJSON := []string{
		`{"kind":"welcome","value":{"account":"18446744073709551615","sessionEpoch":"1152921504606846976","gateway":"zone-é","world":{"sizeX":128000,"sizeY":64000.5,"chunkEdge":32},"tickHz":20}}`,
		`{"kind":"you","value":{"master":"18446744073709551615","pet":"9223372036854775813"}}`,
		`{"kind":"you","value":{"master":"0","pet":"0"}}`,
		`{"kind":"batch","value":{"tick":"1099511627776","frames":"AQID"}}`,
		`{"kind":"terrain","value":{"chunk":"CQ=="}}`,
		`{"kind":"error","value":{"code":"GATEWAY.NOT_YOURS","message":"no","inputSeq":4294967295}}`,
		`{"kind":"pong","value":{"nonce":"18446744073709551614","tick":"3"}}`,
		`{"kind":"resumeCredential","value":{"credential":"AQ-_","windowMs":60000}}`,
		`{"kind":"you","value":{"master":"0","pet":"0"}}`,
	}
	for i := range good {
		var want map[string]any
		if err := json.Unmarshal([]byte(wantJSON[i]), &want); err != nil {
			t.Fatal(err)
		}
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) {
			t.Errorf("message %d:\n client %s\n want   %s", i, g, w)
		}
	}
	for i := good; i < len(got); i++ {
		if got[i]["refused"] != true {
			t.Errorf("malformed case %d (% x): client %v, want a ProtoError", i-good, bad[i-good], got[i])
		}
	}
}

// Every client message the module encodes is what protobuf-go decodes,
// and byte for byte what it encodes (deterministic, defaults left out).
func TestClientMessagesEncodeAsProtobufReads(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := conformancePage(t)
	type in = map[string]any
	cases := []struct {
		js   in
		want *clientpb.ClientMessage
	}{
		{in{"login": in{"token": "v2.abc-é"}}, &clientpb.ClientMessage{Body: &clientpb.ClientMessage_Login{Login: &clientpb.Login{Token: "v2.abc-é"}}}},
		{in{"input": in{"seq": 4294967295, "entity": "18446744073709551615", "kind": 1, "point": in{"x": -1.25, "y": 1e9}}},
			&clientpb.ClientMessage{Body: &clientpb.ClientMessage_Input{Input: &clientpb.Input{Seq: math.MaxUint32, Entity: math.MaxUint64, Kind: 1, Point: &clientpb.Point{X: -1.25, Y: 1e9}}}}},
		{in{"input": in{"seq": 2, "entity": "9223372036854775809", "kind": 2, "target": "81985529216486895"}},
			&clientpb.ClientMessage{Body: &clientpb.ClientMessage_Input{Input: &clientpb.Input{Seq: 2, Entity: 1<<63 + 1, Kind: 2, Target: 0x0123_4567_89ab_cdef}}}},
		{in{"input": in{"seq": 3, "entity": "5", "kind": 1, "point": in{"x": 0, "y": 0}}},
			&clientpb.ClientMessage{Body: &clientpb.ClientMessage_Input{Input: &clientpb.Input{Seq: 3, Entity: 5, Kind: 1, Point: &clientpb.Point{}}}}},
		{in{"ping": in{"nonce": "18446744073709551615"}}, &clientpb.ClientMessage{Body: &clientpb.ClientMessage_Ping{Ping: &clientpb.Ping{Nonce: math.MaxUint64}}}},
		{in{"ping": in{"nonce": "0"}}, &clientpb.ClientMessage{Body: &clientpb.ClientMessage_Ping{Ping: &clientpb.Ping{}}}},
		{in{"logout": in{}}, &clientpb.ClientMessage{Body: &clientpb.ClientMessage_Logout{Logout: &clientpb.Logout{}}}},
		{in{"resume": in{"credential": "AQ-_x"}}, &clientpb.ClientMessage{Body: &clientpb.ClientMessage_Resume{Resume: &clientpb.Resume{Credential: "AQ-_x"}}}},
	}
	// JSON has no BigInt: the page turns the id strings into BigInts.
	var js []in
	for _, c := range cases {
		js = append(js, c.js)
	}
	a, _ := json.Marshal(js)
	var got []string
	browsertest.EvalJSON(t, ctx, fmt.Sprintf(`(() => {
		const ids = ["entity", "target", "nonce"];
		const fix = (m) => { for (const k of Object.keys(m)) for (const id of ids) if (typeof m[k][id] === "string") m[k][id] = BigInt(m[k][id]); return m; };
		return window.conf.client(%s.map(fix));
	})()`, a), &got)
	for i, c := range cases {
		b, _ := base64.StdEncoding.DecodeString(got[i])
		var m clientpb.ClientMessage
		if err := proto.Unmarshal(b, &m); err != nil {
			t.Errorf("case %d: protobuf-go refuses % x: %v", i, b, err)
			continue
		}
		if !proto.Equal(&m, c.want) {
			t.Errorf("case %d: decodes to %v, want %v", i, &m, c.want)
		}
		if wantB, _ := (proto.MarshalOptions{Deterministic: true}).Marshal(c.want); !bytes.Equal(b, wantB) {
			t.Errorf("case %d: % x, protobuf-go writes % x", i, b, wantB)
		}
	}
}

// httptestServer serves the client's files for the conformance page.
func httptestServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(webclient.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}
