package wire

import (
	"bytes"
	"encoding/binary"
	"github.com/shardwise/shardwise/internal/binread/codectest"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/torus"
)

// roundTrip is codectest.RoundTrip: encode after a prefix, decode,
// compare, canonical form (and Check), re-encode.
func roundTrip(t *testing.T, c codec, m message) []byte {
	t.Helper()
	return codectest.RoundTrip(t, c, m)
}

func TestRoundTripSamples(t *testing.T) {
	for _, c := range codecs() {
		for _, m := range c.Samples {
			roundTrip(t, c, m)
		}
	}
}

func TestRoundTripRandom(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, seed^0x5A))
	for _, c := range codecs() {
		for range 2000 {
			roundTrip(t, c, c.Random(r))
		}
	}
}

// Empty and nil slices encode alike and decode as nil (invariant 2).
func TestEmptySlicesEncodeAsNil(t *testing.T) {
	cases := []struct{ empty, canonical message }{
		{Subscribe{Add: []torus.ChunkPos{}, Remove: []torus.ChunkPos{}, Resync: []torus.ChunkPos{}}, Subscribe{}},
		{Intents{List: []Intent{}}, Intents{}},
		{Intents{List: []Intent{{Data: []byte{}}}}, Intents{List: []Intent{{}}}},
		{Forward{Frames: [][]byte{{}}, Accounts: []AccountFrames{{Account: 1, Frames: []uint32{}}}},
			Forward{Frames: [][]byte{nil}, Accounts: []AccountFrames{{Account: 1}}}},
		{Routes{Set: []account.ID{}, Unset: []account.ID{}}, Routes{}},
		{Update{Frames: []byte{}}, Update{}},
		{Snapshot{Entries: []SnapshotEntry{}}, Snapshot{}},
		{Snapshot{Entries: []SnapshotEntry{{Frames: []byte{}}}}, Snapshot{Entries: []SnapshotEntry{{}}}},
	}
	for _, tc := range cases {
		if a, b := tc.empty.Append(nil), tc.canonical.Append(nil); !bytes.Equal(a, b) {
			t.Errorf("%+v encodes as %x, %+v as %x", tc.empty, a, tc.canonical, b)
		}
	}
	for _, c := range codecs() {
		for _, tc := range cases {
			if reflect.TypeOf(tc.canonical) == reflect.TypeOf(c.Samples[0]) {
				roundTrip(t, c, tc.canonical)
			}
		}
	}
}

// Every proper prefix of a valid encoding, and the encoding with a byte
// after it, is refused: each decoder knows where its payload ends.
func TestRefusesTruncationsAndTrailingBytes(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, seed^0x5A))
	for _, c := range codecs() {
		ms := c.Samples
		for range 50 {
			ms = append(ms, c.Random(r))
		}
		for _, m := range ms {
			b := m.Append(nil)
			for _, k := range codectest.Truncations(r, len(b)) {
				if _, err := c.Decode(b[:k]); err == nil {
					t.Fatalf("%s: accepted %x, the first %d of %d bytes of %+v", c.Name, b[:k], k, len(b), m)
				} else {
					checkMalformed(t, err)
				}
			}
			for _, extra := range []byte{0, 1, 0xff} {
				if _, err := c.Decode(append(bytes.Clone(b), extra)); err == nil {
					t.Fatalf("%s: accepted %x with a trailing byte %#x", c.Name, b, extra)
				} else {
					checkMalformed(t, err)
				}
			}
		}
	}
}

func TestRefusesUnknownVersion(t *testing.T) {
	for _, c := range codecs() {
		for _, v := range []byte{0, 2, 0xff} {
			b := c.Samples[0].Append(nil)
			b[0] = v
			_, err := c.Decode(b)
			if err == nil {
				t.Fatalf("%s: accepted version %d", c.Name, v)
			}
			checkMalformed(t, err)
			if !strings.Contains(err.Error(), "version") {
				t.Errorf("%s: error %q does not name the version", c.Name, err)
			}
		}
	}
}

// fenceBytes is a version byte and a Fence of lease 0, table 0.
func fenceBytes() []byte { return Fence{}.Append(nil) }

func uv(b []byte, vs ...uint64) []byte {
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// Hand-made malformed payloads, each with the field its error must name.
func TestRefusesMalformed(t *testing.T) {
	zeros := func(n int) []byte { return make([]byte, n) }
	cases := []struct {
		name   string
		decode func([]byte) (message, error)
		in     []byte
		field  string
	}{
		{"empty", adapt(DecodeFence), nil, "Fence at byte 0: empty"},
		{"non-minimal table", adapt(DecodeFence), append(fenceBytes()[:10], 0x80, 0x00), "Fence.Table"},
		{"non-minimal zero", adapt(DecodeFence), append(fenceBytes()[:9], 0x80, 0x80, 0x00), "Fence.Table"},
		{"varint over 64 bits", adapt(DecodeFence), append(fenceBytes()[:10], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02), "Fence.Table"},
		{"varint of 11 bytes", adapt(DecodeFence), append(fenceBytes()[:10], 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00), "Fence.Table"},
		{"lease truncated", adapt(DecodeFence), []byte{Version, 0, 1, 2, 3}, "Fence.Lease"},

		{"chunk count beyond the bytes", adapt(DecodeSubscribe), uv(fenceBytes(), 1<<16), "Subscribe.Add at byte 11"},
		{"chunk count over the limit", adapt(DecodeSubscribe), append(uv(fenceBytes(), MaxChunks+1), zeros(3*(MaxChunks+1))...), "Subscribe.Add"},
		{"chunk X over int32", adapt(DecodeSubscribe), append(binary.AppendVarint(uv(fenceBytes(), 1), math.MaxInt32+1), 0, 0, 0, 0), "Subscribe.Add[0].X"},
		{"chunk Slab under int32", adapt(DecodeSubscribe), append(binary.AppendVarint(uv(fenceBytes(), 0, 1, 0, 0), math.MinInt32-1), 0), "Subscribe.Remove[0].Slab"},
		{"resync chunk truncated", adapt(DecodeSubscribe), uv(fenceBytes(), 0, 0, 2, 128, 0, 0, 0, 0), "Subscribe.Resync[1].Slab"},

		{"intent kind over 16 bits", adapt(DecodeIntents), append(uv(fenceBytes(), 0, 1, 1<<16), zeros(18)...), "Intents.List[0].Kind"},
		{"intent count beyond the bytes", adapt(DecodeIntents), append(uv(fenceBytes(), 0, 2), zeros(37)...), "Intents.List at"},
		{"intent data over the limit", adapt(DecodeIntents), append(uv(append(uv(fenceBytes(), 0, 1, 0), zeros(18)...), MaxIntentData+1), zeros(MaxIntentData+1)...), "Intents.List[0].Data"},
		{"intent data beyond the bytes", adapt(DecodeIntents), append(uv(append(uv(fenceBytes(), 0, 1, 0), zeros(18)...), 5), 1, 2), "Intents.List[0].Data"},

		{"frame beyond the bytes", adapt(DecodeForward), uv(fenceBytes(), 0, 1, 3, 1, 1), "Forward.Frames[0]"},
		{"frame index out of range", adapt(DecodeForward), uv(fenceBytes(), 0, 1, 0, 2, 1, 1, 0, 2, 2, 0, 1), "Forward.Accounts[1].Frames[1]"},
		{"frame index wrapping uint32", adapt(DecodeForward), uv(fenceBytes(), 0, 1, 0, 1, 1, 1, 1<<32), "Forward.Accounts[0].Frames[0]"},
		{"account zero", adapt(DecodeForward), uv(fenceBytes(), 0, 0, 1, 0, 0), "Forward.Accounts[0].Account"},
		{"index count beyond the bytes", adapt(DecodeForward), uv(fenceBytes(), 0, 1, 0, 1, 1, 3, 0, 0), "Forward.Accounts[0].Frames"},

		{"full byte 2", adapt(DecodeRoutes), uv(fenceBytes(), 0, 2, 0, 0), "Routes.Full"},
		{"full byte missing", adapt(DecodeRoutes), uv(fenceBytes(), 0), "Routes.Full"},
		{"full with unset", adapt(DecodeRoutes), uv(fenceBytes(), 0, 1, 0, 1, 5), "Routes.Unset"},
		{"set account zero", adapt(DecodeRoutes), uv(fenceBytes(), 0, 0, 2, 1, 0, 0), "Routes.Set[1]"},
		{"unset account zero", adapt(DecodeRoutes), uv(fenceBytes(), 0, 0, 0, 1, 0), "Routes.Unset[0]"},

		{"update frames beyond the bytes", adapt(DecodeUpdate), uv([]byte{Version}, 0, 0, 0, 2, 1), "Update.Frames"},
		{"update chunk truncated", adapt(DecodeUpdate), []byte{Version, 0, 0x80}, "Update.Chunk.Y"},
		{"snapshot entry truncated", adapt(DecodeSnapshot), append(uv([]byte{Version}, 0, 0, 0, 1), zeros(8)...), "Snapshot.Entries"},
		{"snapshot frames beyond the bytes", adapt(DecodeSnapshot), append(uv(append(uv([]byte{Version}, 0, 0, 0, 1), zeros(8)...), 0, 0), 9, 0), "Snapshot.Entries[0].Frames"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.decode(tc.in)
			if err == nil {
				t.Fatalf("accepted %x as %+v", tc.in, m)
			}
			checkMalformed(t, err)
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
		})
	}
}

// Append does not check (invariant 6): a value at a limit round-trips, one
// past it encodes and the decoder refuses it.
func TestAppendOutsideTheLimitsIsRefused(t *testing.T) {
	chunks := func(n int) []torus.ChunkPos { return make([]torus.ChunkPos, n) }
	frames := func(n int) [][]byte { return make([][]byte, n) }
	accounts := func(n int) []account.ID {
		ids := make([]account.ID, n)
		for i := range ids {
			ids[i] = account.ID(i + 1)
		}
		return ids
	}
	indices := func(n int) []uint32 { return make([]uint32, n) }
	accountFrames := func(n int) []AccountFrames {
		as := make([]AccountFrames, n)
		for i := range as {
			as[i].Account = account.ID(i + 1)
		}
		return as
	}
	entries := func(n int) []SnapshotEntry { return make([]SnapshotEntry, n) }
	intents := func(n int) []Intent { return make([]Intent, n) }
	cases := []struct {
		name      string
		codec     string
		at, after message
	}{
		{"Add", "Subscribe", Subscribe{Add: chunks(MaxChunks)}, Subscribe{Add: chunks(MaxChunks + 1)}},
		{"Remove", "Subscribe", Subscribe{Remove: chunks(MaxChunks)}, Subscribe{Remove: chunks(MaxChunks + 1)}},
		{"Resync", "Subscribe", Subscribe{Resync: chunks(MaxChunks)}, Subscribe{Resync: chunks(MaxChunks + 1)}},
		{"List", "Intents", Intents{List: intents(MaxIntents)}, Intents{List: intents(MaxIntents + 1)}},
		{"Data", "Intents",
			Intents{List: []Intent{{Data: make([]byte, MaxIntentData)}}},
			Intents{List: []Intent{{Data: make([]byte, MaxIntentData+1)}}}},
		{"Frames", "Forward", Forward{Frames: frames(MaxFrames)}, Forward{Frames: frames(MaxFrames + 1)}},
		{"Accounts", "Forward",
			Forward{Accounts: accountFrames(MaxAccounts)},
			Forward{Accounts: accountFrames(MaxAccounts + 1)}},
		{"account indices", "Forward",
			Forward{Frames: frames(1), Accounts: []AccountFrames{{Account: 1, Frames: indices(MaxFrames)}}},
			Forward{Frames: frames(1), Accounts: []AccountFrames{{Account: 1, Frames: indices(MaxFrames + 1)}}}},
		{"frame index", "Forward",
			Forward{Frames: frames(3), Accounts: []AccountFrames{{Account: 1, Frames: []uint32{2}}}},
			Forward{Frames: frames(3), Accounts: []AccountFrames{{Account: 1, Frames: []uint32{3}}}}},
		{"forward account", "Forward",
			Forward{Accounts: []AccountFrames{{Account: 1}}},
			Forward{Accounts: []AccountFrames{{Account: account.None}}}},
		{"Set", "Routes", Routes{Set: accounts(MaxAccounts)}, Routes{Set: accounts(MaxAccounts + 1)}},
		{"Unset", "Routes", Routes{Unset: accounts(MaxAccounts)}, Routes{Unset: accounts(MaxAccounts + 1)}},
		{"set account", "Routes", Routes{Set: []account.ID{1}}, Routes{Set: []account.ID{account.None}}},
		{"full unset", "Routes", Routes{Full: true, Set: []account.ID{1}}, Routes{Full: true, Unset: []account.ID{1}}},
		{"Entries", "Snapshot", Snapshot{Entries: entries(MaxSnapshotEntries)}, Snapshot{Entries: entries(MaxSnapshotEntries + 1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := codecNamed(t, tc.codec)
			roundTrip(t, c, tc.at)
			b := tc.after.Append(nil)
			if m, err := c.Decode(b); err == nil {
				t.Fatalf("accepted %+v", m)
			} else {
				checkMalformed(t, err)
			}
		})
	}
}

// Decoded byte strings alias the input with their capacity clipped
// (invariant 3).
func TestDecodedBytesAliasTheInput(t *testing.T) {
	b := Intents{List: []Intent{{Data: []byte("ab")}, {Data: []byte("cd")}}}.Append(nil)
	m, err := DecodeIntents(b)
	if err != nil {
		t.Fatal(err)
	}
	d := m.List[0].Data
	if cap(d) != len(d) {
		t.Fatalf("Data has capacity %d, length %d", cap(d), len(d))
	}
	i := bytes.Index(b, []byte("ab"))
	if &b[i] != &d[0] {
		t.Fatal("Data does not alias the input")
	}
	_ = append(d, 'X')
	if m.List[1].Data[0] != 'c' {
		t.Fatal("appending to one Data overwrote the next")
	}
}

// A hostile count is refused before its slice is allocated (invariant 4):
// decoding the short lies below allocates about as little as the error.
func TestHostileCountsAllocateNothing(t *testing.T) {
	lies := map[string]func() error{
		"Subscribe": func() error { _, err := DecodeSubscribe(uv(fenceBytes(), MaxChunks)); return err },
		"Intents":   func() error { _, err := DecodeIntents(uv(fenceBytes(), 0, MaxIntents)); return err },
		"Forward frames": func() error {
			_, err := DecodeForward(uv(fenceBytes(), 0, MaxFrames))
			return err
		},
		"Forward indices": func() error {
			_, err := DecodeForward(uv(fenceBytes(), 0, 0, 1, 1, MaxFrames))
			return err
		},
		"Routes":   func() error { _, err := DecodeRoutes(uv(fenceBytes(), 0, 0, MaxAccounts)); return err },
		"Snapshot": func() error { _, err := DecodeSnapshot(uv([]byte{Version}, 0, 0, 0, MaxSnapshotEntries)); return err },
	}
	for name, decode := range lies {
		const runs = 100
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			if err := decode(); err == nil {
				t.Fatalf("%s: accepted a hostile count", name)
			}
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 2048 {
			t.Errorf("%s: refusing a hostile count allocates %d bytes", name, per)
		}
	}
}
