package terrain

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/binread/codectest"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/torus"
)

// chunkMsg is a Chunk as codectest wants it: a value with Append and Check.
type chunkMsg struct{ Chunk }

func (m chunkMsg) Append(dst []byte) []byte { return AppendChunk(dst, &m.Chunk) }
func (m chunkMsg) Check() error             { return m.Chunk.Check() }

func decodeMsg(b []byte) (chunkMsg, error) {
	c, err := DecodeChunk(b)
	return chunkMsg{c}, err
}

// sampleChunks are hand-made chunks in canonical decoded form: the
// boundaries of every field.
func sampleChunks(tb testing.TB) []chunkMsg {
	g := mustGenerator(tb, 99, torus.Default())
	var jagged Heights // the largest deltas there are
	for k := range jagged {
		jagged[k] = math.MaxInt16
		if k%2 == 1 {
			jagged[k] = math.MinInt16
		}
	}
	return []chunkMsg{
		{},
		{Chunk{X: 3999, Y: 3999, Revision: 1, Heights: g.Base(torus.ChunkPos{X: 3999, Y: 3999}),
			Edits: []Edit{mustMarker(tb, 0, 0, 1, 42)}}},
		{Chunk{X: math.MaxInt32, Y: math.MaxInt32, Revision: math.MaxUint64, Heights: jagged, Edits: []Edit{
			{Kind: math.MaxUint16, Account: math.MaxUint64, Data: bytes.Repeat([]byte{0xAB}, MaxEditData)},
			{Kind: FirstGameKind}, // no data: nil
			mustMarker(tb, 15, 15, 255, account.None),
		}}},
	}
}

func randomChunkMsg(r *rand.Rand) chunkMsg {
	c := Chunk{X: r.Int32(), Y: r.Int32(), Revision: r.Uint64() >> r.IntN(64)}
	if r.IntN(2) == 0 {
		for k := range c.Heights {
			c.Heights[k] = int16(r.Uint32())
		}
	} else {
		g, _ := New(r.Uint64(), torus.Default())
		c.Heights = g.Base(torus.ChunkPos{X: c.X, Y: c.Y})
	}
	for range r.IntN(20) {
		if r.IntN(2) == 0 {
			e, _ := Marker{X: uint8(r.IntN(Cells)), Y: uint8(r.IntN(Cells)), Type: uint8(r.Uint32())}.Edit(account.ID(r.Uint64() >> r.IntN(64)))
			c.Edits = append(c.Edits, e)
			continue
		}
		e := Edit{Kind: FirstGameKind + uint16(r.IntN(1000)), Account: account.ID(r.Uint64())}
		if n := r.IntN(40); n > 0 {
			e.Data = make([]byte, n)
			for i := range e.Data {
				e.Data[i] = byte(r.Uint32())
			}
		}
		c.Edits = append(c.Edits, e)
	}
	return chunkMsg{c}
}

func chunkCodec(tb testing.TB) codectest.Codec[chunkMsg] {
	return codectest.Codec[chunkMsg]{
		Name: "Chunk", Decode: decodeMsg, Samples: sampleChunks(tb), Random: randomChunkMsg,
	}
}

func checkMalformed(tb testing.TB, err error) {
	tb.Helper()
	if !errors.Is(err, ErrMalformed) {
		tb.Fatalf("error %v does not match ErrMalformed", err)
	}
	if code := errcode.Of(err); code != CodeMalformed {
		tb.Fatalf("error %v has code %q, want %s", err, code, CodeMalformed)
	}
}

func TestChunkRoundTrip(t *testing.T) {
	c := chunkCodec(t)
	for _, m := range c.Samples {
		codectest.RoundTrip(t, c, m)
	}
	r := rand.New(rand.NewPCG(testseed.Seed(t), 5))
	for range 500 {
		codectest.RoundTrip(t, c, randomChunkMsg(r))
	}
}

// TestChunkSize checks that size (which Check uses) is the length Append
// writes.
func TestChunkSize(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 6))
	for _, m := range append(sampleChunks(t), randomChunkMsg(r), randomChunkMsg(r)) {
		if got, want := m.size(), len(AppendChunk(nil, &m.Chunk)); got != want {
			t.Fatalf("size %d, Append writes %d", got, want)
		}
	}
}

// TestMaxChunkBytes checks that MaxChunkBytes is the longest encoding of
// a chunk that passes Check, and that DecodeChunk accepts it.
func TestMaxChunkBytes(t *testing.T) {
	c := sampleChunks(t)[2].Chunk // the longest column, revision and heights
	data := bytes.Repeat([]byte{0xFF}, MaxEditData)
	c.Edits = make([]Edit, MaxEdits)
	for i := range c.Edits {
		c.Edits[i] = Edit{Kind: math.MaxUint16, Account: math.MaxUint64, Data: data}
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	b := AppendChunk(nil, &c)
	if len(b) != MaxChunkBytes {
		t.Fatalf("the longest chunk is %d bytes, MaxChunkBytes %d", len(b), MaxChunkBytes)
	}
	if _, err := DecodeChunk(b); err != nil {
		t.Fatal(err)
	}
}

// TestChunkGolden pins the byte format the package doc describes, which
// clients in other languages decode.
func TestChunkGolden(t *testing.T) {
	var h Heights
	h[1], h[Side] = -1, 2 // sample (1, 0) one below its west neighbour; (0, 1) two above the one below it
	c := Chunk{X: 300, Y: 1, Revision: 2, Heights: h, Edits: []Edit{mustMarker(t, 3, 15, 9, 7)}}
	want := []byte{
		0x01,       // version
		0xAC, 0x02, // x = 300
		0x01, // y = 1
		0x02, // revision = 2
	}
	heights := make([]byte, Side*Side)
	heights[1] = 0x01      // zigzag(−1): sample (1, 0) against (0, 0)
	heights[2] = 0x02      // zigzag(+1): sample (2, 0) (0) against (1, 0) (−1)
	heights[Side] = 0x04   // zigzag(+2): sample (0, 1) against (0, 0)
	heights[Side+1] = 0x03 // zigzag(−2): sample (1, 1) (0) against (0, 1) (2)
	heights[2*Side] = 0x03 // zigzag(−2): sample (0, 2) (0) against (0, 1) (2)
	want = append(want, heights...)
	want = append(want,
		0x01,       // one edit
		0x01,       // kind KindMarker
		0x07,       // account 7
		0x02,       // two bytes of data
		0xF3, 0x09, // cell (3, 15), type 9
	)
	if got := AppendChunk(nil, &c); !bytes.Equal(got, want) {
		t.Fatalf("AppendChunk =\n%x\nwant\n%x", got, want)
	}
}

// header is a valid chunk up to its edit count: column (0, 0), revision
// 0, flat heights.
func header() []byte {
	return append([]byte{Version, 0, 0, 0}, make([]byte, Side*Side)...)
}

func uv(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func TestDecodeChunkRefuses(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want string // the start of the error's detail
	}{
		{"empty", nil, "Chunk at byte 0: empty payload"},
		{"unknown version", []byte{2}, "Chunk at byte 0: unknown version 2"},
		{"too long", make([]byte, MaxChunkBytes+1), "Chunk at byte 0: 1064827 bytes exceed 1064826"},
		{"x beyond int32", uv([]byte{Version}, 1<<31), "Chunk.X at byte 1: 2147483648 exceeds"},
		{"y non-minimal", []byte{Version, 0, 0x80, 0x00}, "Chunk.Y at byte 2: non-minimal varint"},
		{"revision truncated", []byte{Version, 0, 0, 0x80}, "Chunk.Revision at byte 3: truncated varint"},
		{"heights truncated", []byte{Version, 0, 0, 0, 0}, "Chunk.Heights[1] at byte 5: truncated"},
		{"delta beyond any two heights", uv([]byte{Version, 0, 0, 0}, maxDelta+1), "Chunk.Heights[0] at byte 4: delta"},
		{"height above int16", uv([]byte{Version, 0, 0, 0}, zigzag(math.MaxInt16+1)), "Chunk.Heights[0] at byte 4: height 32768"},
		{"height below int16", append(uv([]byte{Version, 0, 0, 0}, zigzag(math.MinInt16)), 1), "Chunk.Heights[1] at byte 7: height -32769"},
		{"no edit count", header(), "Chunk.Edits at byte 293: truncated"},
		{"edits over the limit", append(uv(header(), MaxEdits+1), make([]byte, minEdit*(MaxEdits+1))...),
			"Chunk.Edits at byte 293: count 1025 exceeds 1024"},
		{"edits beyond the bytes", append(uv(header(), 3), make([]byte, 2*minEdit)...),
			"Chunk.Edits at byte 293: count 3 needs"},
		{"kind 0", append(uv(header(), 1), 0, 0, 0), "Chunk.Edits[0].Kind at byte 294: kind 0"},
		{"kind beyond uint16", append(uv(uv(header(), 1), 1<<16), 0, 0), "Chunk.Edits[0].Kind at byte 294: kind 65536"},
		{"data over the limit", append(uv(append(uv(header(), 1), 0x80, 0x02, 0), MaxEditData+1), make([]byte, MaxEditData+1)...),
			"Chunk.Edits[0].Data at byte 297: 1025 bytes exceed 1024"},
		{"data beyond the bytes", append(uv(header(), 1), 0x80, 0x02, 0, 3, 1), "Chunk.Edits[0].Data at byte 297: 3 bytes, 1 left"},
		{"marker data short", append(uv(header(), 1), 1, 0, 1, 0), "Chunk.Edits[0].Data at byte 296: marker data of 1 bytes"},
		{"second edit bad", append(uv(header(), 2), 1, 0, 2, 0, 0, 1, 0, 3, 0, 0, 0),
			"Chunk.Edits[1].Data at byte 301: marker data of 3 bytes"},
		{"trailing bytes", append(uv(header(), 0), 0), "Chunk at byte 294: 1 trailing bytes"},
	}
	for _, c := range cases {
		_, err := DecodeChunk(c.in)
		if err == nil {
			t.Errorf("%s: accepted %x", c.name, c.in)
			continue
		}
		checkMalformed(t, err)
		if detail, _ := strings.CutPrefix(err.Error(), ErrMalformed.Error()+": "); !strings.HasPrefix(detail, c.want) {
			t.Errorf("%s: error %q, want it to start %q", c.name, detail, c.want)
		}
	}
}

func TestChunkCheck(t *testing.T) {
	big := bytes.Repeat([]byte{1}, MaxEditData)
	cases := []struct {
		name string
		c    Chunk
	}{
		{"negative x", Chunk{X: -1}},
		{"negative y", Chunk{Y: -1}},
		{"too many edits", Chunk{Edits: make([]Edit, MaxEdits+1)}},
		{"kind 0", Chunk{Edits: []Edit{{Kind: 0}}}},
		{"data too long", Chunk{Edits: []Edit{{Kind: FirstGameKind, Data: append(big, 1)}}}},
		{"marker data wrong", Chunk{Edits: []Edit{{Kind: KindMarker, Data: []byte{1}}}}},
	}
	for _, c := range cases {
		err := c.c.Check()
		if !errors.Is(err, ErrInvalid) || errcode.Of(err) != CodeInvalid {
			t.Errorf("%s: Check = %v, want %s", c.name, err, CodeInvalid)
			continue
		}
		// What Check refuses, the decoder refuses.
		if _, derr := DecodeChunk(AppendChunk(nil, &c.c)); derr == nil {
			t.Errorf("%s: Check refuses (%v) but DecodeChunk accepts", c.name, err)
		}
	}
}

// TestDecodedEditsApply checks the promise of Apply's doc: the edits of
// any decoded chunk apply without error.
func TestDecodedEditsApply(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 7))
	for range 200 {
		m := randomChunkMsg(r)
		c, err := DecodeChunk(AppendChunk(nil, &m.Chunk))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Apply(c.Heights, c.Edits); err != nil {
			t.Fatalf("Apply of decoded edits: %v", err)
		}
	}
}

func TestDecodeChunkAllocatesOnlyTheEdits(t *testing.T) {
	b := AppendChunk(nil, &sampleChunks(t)[2].Chunk)
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeChunk(b) }); n != 1 {
		t.Fatalf("DecodeChunk allocates %.0f times, want 1 (the edits)", n)
	}
}
