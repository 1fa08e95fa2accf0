package handoff

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"github.com/shardwise/shardwise/internal/binread/codectest"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/internal/testseed"
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
	r := rand.New(rand.NewPCG(seed, seed^0x5A10))
	for _, c := range codecs() {
		for range 2000 {
			roundTrip(t, c, c.Random(r))
		}
	}
}

// The format written out by hand, so a change to it is a visible change to
// this test.
func TestFormatByHand(t *testing.T) {
	m := Transfer{Entities: []Snapshot{{Entity: 0x0102030405060708, Epoch: 300, Table: 5,
		Components: []Component{{Name: "hp", Data: []byte{9}}, {Name: "x"}}}}}
	want := []byte{
		Version, 1, // one snapshot
		8, 7, 6, 5, 4, 3, 2, 1, // entity, little-endian
		0xac, 0x02, // epoch 300
		5,                 // table
		2,                 // two components
		2, 'h', 'p', 1, 9, // "hp" = [9]
		1, 'x', 0, // "x" = nothing
	}
	if got := m.Append(nil); !bytes.Equal(got, want) {
		t.Fatalf("Transfer encodes as %x, want %x", got, want)
	}
	if got, want := m.Entities[0].Size(), len(want)-2; got != want {
		t.Fatalf("Size = %d, want %d", got, want)
	}
	ack := Ack{Entities: []Ref{{Entity: 1, Epoch: 2}}}
	if got, want := ack.Append(nil), []byte{Version, 1, 1, 0, 0, 0, 0, 0, 0, 0, 2}; !bytes.Equal(got, want) {
		t.Fatalf("Ack encodes as %x, want %x", got, want)
	}
	ref := Refuse{Code: "A.B", Entities: []Ref{{Entity: 1, Epoch: 2}}}
	if got, want := ref.Append(nil), []byte{Version, 3, 'A', '.', 'B', 1, 1, 0, 0, 0, 0, 0, 0, 0, 2}; !bytes.Equal(got, want) {
		t.Fatalf("Refuse encodes as %x, want %x", got, want)
	}
}

// Size is exactly the snapshot's share of a Transfer's encoding.
func TestSizeIsTheEncodedSize(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, seed^0x512e))
	for range 2000 {
		s := randSnapshot(r)
		one := len(Transfer{Entities: []Snapshot{s}}.Append(nil))
		two := len(Transfer{Entities: []Snapshot{s, s}}.Append(nil))
		if got, want := s.Size(), two-one; got != want {
			t.Fatalf("Size of %+v = %d, encoding takes %d", s, got, want)
		}
	}
}

// The benchmark goal of the package doc: a player with its pet, as one
// Transfer, in at most 2 KiB.
func TestPlayerAndPetFitInTwoKiB(t *testing.T) {
	b := Transfer{Entities: []Snapshot{player(), pet()}}.Append(nil)
	t.Logf("player %d bytes, pet %d bytes, Transfer %d bytes", player().Size(), pet().Size(), len(b))
	if len(b) > 2<<10 {
		t.Fatalf("player and pet take %d bytes, goal 2048", len(b))
	}
}

// Empty and nil slices encode alike and decode as nil (invariant 2).
func TestEmptySlicesEncodeAsNil(t *testing.T) {
	empty := Transfer{Entities: []Snapshot{{Entity: 1, Epoch: 1, Components: []Component{}}, {Entity: 2, Epoch: 1, Components: []Component{{Name: "a", Data: []byte{}}}}}}
	canonical := Transfer{Entities: []Snapshot{{Entity: 1, Epoch: 1}, {Entity: 2, Epoch: 1, Components: []Component{{Name: "a"}}}}}
	if a, b := empty.Append(nil), canonical.Append(nil); !bytes.Equal(a, b) {
		t.Fatalf("%+v encodes as %x, %+v as %x", empty, a, canonical, b)
	}
	roundTrip(t, codecNamed(t, "Transfer"), canonical)
}

// Every proper prefix of a valid encoding, and the encoding with a byte
// after it, is refused: each decoder knows where its payload ends.
func TestRefusesTruncationsAndTrailingBytes(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, seed^0x7a11))
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
					if !strings.Contains(err.Error(), "trailing") {
						t.Errorf("%s: error %q does not say trailing", c.Name, err)
					}
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

func uv(b []byte, vs ...uint64) []byte {
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

func u64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// snap starts a Transfer of one snapshot of entity 1, epoch 1, table 0,
// with the given component count; the components follow.
func snap(components uint64) []byte { return uv(u64([]byte{Version, 1}, 1), 1, 0, components) }

func comp(b []byte, name string, data ...byte) []byte {
	return append(uv(append(uv(b, uint64(len(name))), name...), uint64(len(data))), data...)
}

// Hand-made malformed payloads, each with the field and offset its error
// must name.
func TestRefusesMalformed(t *testing.T) {
	zeros := func(n int) []byte { return make([]byte, n) }
	tr, ack, ref := adapt(DecodeTransfer), adapt(DecodeAck), adapt(DecodeRefuse)
	cases := []struct {
		name   string
		decode func([]byte) (message, error)
		in     []byte
		want   string
	}{
		{"empty", tr, nil, "Transfer at byte 0: empty"},
		{"no entities", tr, []byte{Version, 0}, "Transfer.Entities at byte 1: count 0"},
		{"entities over the limit", tr, append(uv([]byte{Version}, MaxEntities+1), zeros(minSnapshot*(MaxEntities+1))...), "Transfer.Entities at byte 1: count 4097 exceeds 4096"},
		{"entities beyond the bytes", tr, append(uv([]byte{Version}, 3), zeros(2*minSnapshot)...), "Transfer.Entities at byte 1: count 3 needs"},
		{"non-minimal count", tr, append([]byte{Version, 0x81, 0x00}, snap(0)[2:]...), "Transfer.Entities at byte 1: non-minimal"},
		{"entity 0", tr, uv(u64([]byte{Version, 1}, 0), 1, 0, 0), "Transfer.Entities[0].Entity at byte 2: 0 is not an entity id"},
		{"entity truncated", tr, []byte{Version, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}[:9], "Transfer.Entities at byte 1: count 1 needs"},
		{"epoch 0", tr, uv(u64([]byte{Version, 1}, 1), 0, 0, 0), "Transfer.Entities[0].Epoch at byte 10: 0 is not an epoch"},
		{"non-minimal epoch", tr, append(u64([]byte{Version, 1}, 1), 0x81, 0x00, 0, 0), "Transfer.Entities[0].Epoch at byte 10: non-minimal"},
		{"non-minimal table", tr, append(uv(u64([]byte{Version, 1}, 1), 1), 0x80, 0x00, 0), "Transfer.Entities[0].Table at byte 11: non-minimal"},
		{"table over 64 bits", tr, append(uv(u64([]byte{Version, 1}, 1), 1), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0), "Transfer.Entities[0].Table at byte 11: varint overflows"},
		{"components over the limit", tr, append(snap(MaxComponents+1), zeros(3*(MaxComponents+1))...), "Transfer.Entities[0].Components at byte 12: count 257 exceeds 256"},
		{"components beyond the bytes", tr, append(snap(2), 1, 'a', 0), "Transfer.Entities[0].Components at byte 12: count 2 needs at least 6 more bytes, 3 left"},
		{"empty name", tr, append(snap(1), 0, 0, 0), "Transfer.Entities[0].Components[0].Name at byte 13: \"\": empty"},
		{"name too long", tr, comp(snap(1), strings.Repeat("n", MaxNameLen+1)), "Transfer.Entities[0].Components[0].Name at byte 13: 129 bytes exceed 128"},
		{"name not UTF-8", tr, comp(snap(1), "a\xff"), "Transfer.Entities[0].Components[0].Name at byte 13: \"a\\xff\": not valid UTF-8"},
		{"name cut mid-rune", tr, comp(snap(1), "宠"[:2]), "Components[0].Name at byte 13: \"\\xe5\\xae\": not valid UTF-8"},
		{"duplicate name", tr, comp(comp(snap(2), "hp", 1), "hp", 2), "Transfer.Entities[0].Components[1].Name at byte 18: \"hp\": duplicate"},
		{"unsorted names", tr, comp(comp(snap(2), "hp"), "ab"), "Transfer.Entities[0].Components[1].Name at byte 17: \"ab\": not sorted: after \"hp\""},
		{"name length non-minimal", tr, append(snap(1), 0x81, 0x00, 'a', 0), "Components[0].Name at byte 13: non-minimal"},
		{"name beyond the bytes", tr, append(snap(1), 5, 'a', 0), "Components[0].Name at byte 13: 5 bytes, 2 left"},
		{"data over the limit", tr, append(uv(append(snap(1), 1, 'a'), MaxComponentData+1), zeros(MaxComponentData+1)...), "Transfer.Entities[0].Components[0].Data at byte 15: 65537 bytes exceed 65536"},
		{"data beyond the bytes", tr, append(snap(1), 1, 'a', 3, 1), "Components[0].Data at byte 15: 3 bytes, 1 left"},
		{"second snapshot bad", tr, uv(u64(uv(u64([]byte{Version, 2}, 1), 1, 0, 0), 2), 0, 0, 0), "Transfer.Entities[1].Epoch at byte 21: 0 is not an epoch"},

		{"ack empty", ack, []byte{Version, 0}, "Ack.Entities at byte 1: count 0"},
		{"ack over the limit", ack, append(uv([]byte{Version}, MaxRefs+1), zeros(minRef*(MaxRefs+1))...), "Ack.Entities at byte 1: count 4097 exceeds 4096"},
		{"ack beyond the bytes", ack, append(uv([]byte{Version}, 2), zeros(10)...), "Ack.Entities at byte 1: count 2 needs at least 18 more bytes, 10 left"},
		{"ack entity 0", ack, uv(u64([]byte{Version, 1}, 0), 1), "Ack.Entities[0].Entity at byte 2: 0 is not an entity id"},
		{"ack epoch 0", ack, uv(u64(uv(u64([]byte{Version, 2}, 7), 1), 7), 0), "Ack.Entities[1].Epoch at byte 19: 0 is not an epoch"},
		{"ack epoch non-minimal", ack, append(u64([]byte{Version, 1}, 7), 0x82, 0x00), "Ack.Entities[0].Epoch at byte 10: non-minimal"},

		{"refuse empty code", ref, uv(u64([]byte{Version, 0, 1}, 1), 1), "Refuse.Code at byte 1: \"\": empty"},
		{"refuse lower-case code", ref, uv(u64([]byte{Version, 3, 'A', '.', 'b', 1}, 1), 1), "Refuse.Code at byte 1: \"A.b\": byte 2 is 'b'"},
		{"refuse code too long", ref, append(uv([]byte{Version}, MaxCodeLen+1), strings.Repeat("A", MaxCodeLen+1)...), "Refuse.Code at byte 1: 65 bytes exceed 64"},
		{"refuse code beyond the bytes", ref, []byte{Version, 4, 'A'}, "Refuse.Code at byte 1: 4 bytes, 1 left"},
		{"refuse no entities", ref, []byte{Version, 1, 'A', 0}, "Refuse.Entities at byte 3: count 0"},
		{"refuse entity 0", ref, uv(u64([]byte{Version, 1, 'A', 1}, 0), 1), "Refuse.Entities[0].Entity at byte 4: 0 is not an entity id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.decode(tc.in)
			if err == nil {
				t.Fatalf("accepted %x as %+v", tc.in, m)
			}
			checkMalformed(t, err)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// named returns n components named c0000, c0001, … (sorted), each of
// size bytes.
func named(n, size int) []Component {
	cs := make([]Component, n)
	for i := range cs {
		cs[i] = Component{Name: fmt.Sprintf("c%04d", i)}
		if size > 0 {
			cs[i].Data = make([]byte, size)
		}
	}
	return cs
}

// Each limit at its edge round-trips and passes Check; one past it, Check
// refuses with ErrInvalid and, Append not checking (invariant 6), the
// decoder refuses the encoding with ErrMalformed.
func TestLimitsAtAndOverTheEdge(t *testing.T) {
	one := func(s Snapshot) Transfer { return Transfer{Entities: []Snapshot{s}} }
	comps := func(cs []Component) Transfer { return one(Snapshot{Entity: 1, Epoch: 1, Components: cs}) }
	snaps := func(n int) Transfer {
		m := Transfer{Entities: make([]Snapshot, n)}
		for i := range m.Entities {
			m.Entities[i] = Snapshot{Entity: uint64(i + 1), Epoch: 1}
		}
		return m
	}
	refs := func(n int) []Ref {
		rs := make([]Ref, n)
		for i := range rs {
			rs[i] = Ref{Entity: uint64(i + 1), Epoch: 1}
		}
		return rs
	}
	// MaxSnapshotBytes can only be passed with several big components:
	// one is at most MaxComponentData.
	bigAt := named(4, MaxComponentData)
	last := &bigAt[3]
	probe := Snapshot{Entity: 1, Epoch: 1, Components: bigAt}
	last.Data = last.Data[:len(last.Data)-(probe.Size()-MaxSnapshotBytes)]
	bigOver := named(4, MaxComponentData)
	bigOver[3].Data = bigOver[3].Data[:len(last.Data)+1]
	cases := []struct {
		name      string
		codec     string
		at, after message
	}{
		{"MaxEntities", "Transfer", snaps(MaxEntities), snaps(MaxEntities + 1)},
		{"MaxComponents", "Transfer", comps(named(MaxComponents, 0)), comps(named(MaxComponents+1, 0))},
		{"MaxNameLen", "Transfer", comps([]Component{{Name: strings.Repeat("n", MaxNameLen)}}), comps([]Component{{Name: strings.Repeat("n", MaxNameLen+1)}})},
		{"MaxComponentData", "Transfer", comps([]Component{{Name: "a", Data: make([]byte, MaxComponentData)}}), comps([]Component{{Name: "a", Data: make([]byte, MaxComponentData+1)}})},
		{"MaxSnapshotBytes", "Transfer", comps(bigAt), comps(bigOver)},
		{"MaxRefs ack", "Ack", Ack{Entities: refs(MaxRefs)}, Ack{Entities: refs(MaxRefs + 1)}},
		{"MaxRefs refuse", "Refuse", Refuse{Code: "A", Entities: refs(MaxRefs)}, Refuse{Code: "A", Entities: refs(MaxRefs + 1)}},
		{"MaxCodeLen", "Refuse", Refuse{Code: strings.Repeat("A", MaxCodeLen), Entities: refs(1)}, Refuse{Code: strings.Repeat("A", MaxCodeLen+1), Entities: refs(1)}},
		{"empty Transfer", "Transfer", snaps(1), Transfer{}},
		{"empty Ack", "Ack", Ack{Entities: refs(1)}, Ack{}},
		{"empty Refuse", "Refuse", Refuse{Code: "A", Entities: refs(1)}, Refuse{Code: "A"}},
		{"entity 0", "Transfer", one(Snapshot{Entity: 1, Epoch: 1}), one(Snapshot{Epoch: 1})},
		{"epoch 0", "Ack", Ack{Entities: []Ref{{Entity: 1, Epoch: 1}}}, Ack{Entities: []Ref{{Entity: 1}}}},
		{"unsorted", "Transfer", comps([]Component{{Name: "a"}, {Name: "b"}}), comps([]Component{{Name: "b"}, {Name: "a"}})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := codecNamed(t, tc.codec)
			roundTrip(t, c, tc.at)
			checkInvalid(t, tc.after.Check())
			b := tc.after.Append(nil)
			if m, err := c.Decode(b); err == nil {
				t.Fatalf("accepted %.200v", m)
			} else {
				checkMalformed(t, err)
			}
		})
	}
	if n := (Snapshot{Entity: 1, Epoch: 1, Components: bigAt}).Size(); n != MaxSnapshotBytes {
		t.Errorf("the snapshot at the edge is %d bytes, not MaxSnapshotBytes", n)
	}
}

// Check is the decoder's judgement without encoding: over random values,
// each broken in one random way or not at all, Check passes exactly when
// the decoder accepts the encoding.
func TestCheckAgreesWithTheDecoder(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, seed^0xc4ec))
	breakSnapshot := func(s *Snapshot) {
		switch r.IntN(7) {
		case 0:
			s.Entity = 0
		case 1:
			s.Epoch = 0
		case 2:
			if len(s.Components) > 1 {
				s.Components[0], s.Components[1] = s.Components[1], s.Components[0]
			}
		case 3:
			if len(s.Components) > 1 {
				s.Components[1].Name = s.Components[0].Name
			}
		case 4:
			if len(s.Components) > 0 {
				s.Components[r.IntN(len(s.Components))].Name = []string{"", "\xc3", strings.Repeat("x", MaxNameLen+1)}[r.IntN(3)]
			}
		case 5:
			if len(s.Components) > 0 {
				s.Components[r.IntN(len(s.Components))].Data = make([]byte, MaxComponentData+r.IntN(2))
			}
		}
	}
	breakRefs := func(refs []Ref) []Ref {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			refs[r.IntN(len(refs))].Entity = 0
		case 2:
			refs[r.IntN(len(refs))].Epoch = 0
		}
		return refs
	}
	for _, c := range codecs() {
		for range 3000 {
			var m message
			switch v := c.Random(r).(type) {
			case Transfer:
				if r.IntN(8) == 0 {
					v.Entities = nil
				}
				for i := range v.Entities {
					if r.IntN(3) == 0 {
						breakSnapshot(&v.Entities[i])
					}
				}
				m = v
			case Ack:
				v.Entities = breakRefs(v.Entities)
				m = v
			case Refuse:
				v.Entities = breakRefs(v.Entities)
				if r.IntN(4) == 0 {
					v.Code = []string{"", "a", "A B", strings.Repeat("A", MaxCodeLen+1), "É"}[r.IntN(5)]
				}
				m = v
			}
			checkErr := m.Check()
			_, decErr := c.Decode(m.Append(nil))
			if (checkErr == nil) != (decErr == nil) {
				t.Fatalf("%s %.300v: Check says %v, the decoder %v", c.Name, m, checkErr, decErr)
			}
			if checkErr != nil {
				checkInvalid(t, checkErr)
				checkMalformed(t, decErr)
			}
		}
	}
}

func TestNewSnapshot(t *testing.T) {
	s, err := NewSnapshot(7, 2, 3, map[string][]byte{"b": {2}, "a": {}, "宠": {1}, "B": {3}})
	if err != nil {
		t.Fatal(err)
	}
	want := Snapshot{Entity: 7, Epoch: 2, Table: 3, Components: []Component{
		{Name: "B", Data: []byte{3}}, {Name: "a"}, {Name: "b", Data: []byte{2}}, {Name: "宠", Data: []byte{1}},
	}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("NewSnapshot = %+v, want %+v", s, want)
	}
	if s, err := NewSnapshot(7, 2, 0, nil); err != nil || s.Components != nil {
		t.Fatalf("no components: %+v, %v", s, err)
	}
	many := map[string][]byte{}
	for _, c := range named(MaxComponents+1, 0) {
		many[c.Name] = nil
	}
	for name, tc := range map[string]struct {
		entity, epoch uint64
		comps         map[string][]byte
		want          string
	}{
		"entity 0":      {0, 1, nil, "Entity"},
		"epoch 0":       {1, 0, nil, "Epoch"},
		"empty name":    {1, 1, map[string][]byte{"": nil}, `Components[0].Name "": empty`},
		"bad UTF-8":     {1, 1, map[string][]byte{"a": nil, "b\xff": nil}, `Components[1].Name "b\xff": not valid UTF-8`},
		"long name":     {1, 1, map[string][]byte{strings.Repeat("n", MaxNameLen+1): nil}, "129 bytes exceed 128"},
		"big component": {1, 1, map[string][]byte{"bag": make([]byte, MaxComponentData+1)}, `Components[0].Data ("bag"): 65537 bytes exceed 65536`},
		"too many":      {1, 1, many, "Components: 257 exceed 256"},
		"whole too big": {1, 1, map[string][]byte{"a": make([]byte, MaxComponentData), "b": make([]byte, MaxComponentData), "c": make([]byte, MaxComponentData), "d": make([]byte, MaxComponentData)}, "Size: 262175 bytes exceed 262144"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewSnapshot(tc.entity, tc.epoch, 0, tc.comps)
			checkInvalid(t, err)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// Decoded data aliases the input with its capacity clipped; names are
// copies (invariant 3).
func TestDecodedBytesAliasTheInput(t *testing.T) {
	b := Transfer{Entities: []Snapshot{{Entity: 1, Epoch: 1, Components: []Component{
		{Name: "a", Data: []byte("ab")}, {Name: "b", Data: []byte("cd")},
	}}}}.Append(nil)
	m, err := DecodeTransfer(b)
	if err != nil {
		t.Fatal(err)
	}
	d := m.Entities[0].Components[0].Data
	if cap(d) != len(d) {
		t.Fatalf("Data has capacity %d, length %d", cap(d), len(d))
	}
	if i := bytes.Index(b, []byte("ab")); &b[i] != &d[0] {
		t.Fatal("Data does not alias the input")
	}
	_ = append(d, 'X')
	if m.Entities[0].Components[1].Data[0] != 'c' {
		t.Fatal("appending to one Data overwrote the next")
	}
	b[bytes.IndexByte(b, 'b')-2] = 'z' // the name "b", after "ab"'s data
	if m.Entities[0].Components[1].Name != "b" {
		t.Fatal("a decoded name changed with the input")
	}
}

// A hostile count is refused before its slice is allocated (invariant 4).
func TestHostileCountsAllocateNothing(t *testing.T) {
	lies := map[string]func() error{
		"Transfer":   func() error { _, err := DecodeTransfer(uv([]byte{Version}, MaxEntities)); return err },
		"Components": func() error { _, err := DecodeTransfer(snap(MaxComponents)); return err },
		"Ack":        func() error { _, err := DecodeAck(uv([]byte{Version}, MaxRefs)); return err },
		"Refuse":     func() error { _, err := DecodeRefuse(uv([]byte{Version, 1, 'A'}, MaxRefs)); return err },
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
