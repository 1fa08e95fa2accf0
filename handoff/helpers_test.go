package handoff

import (
	"errors"
	"github.com/shardwise/shardwise/internal/binread/codectest"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/errcode"
)

// message is what every payload type implements (Check is run by
// codectest).
type message interface {
	Append(dst []byte) []byte
	Check() error
}

// codec is one payload type under test (codectest.Codec).
type codec = codectest.Codec[message]

func adapt[T message](decode func([]byte) (T, error)) func([]byte) (message, error) {
	return codectest.Adapt[message](decode)
}

// player and pet are a representative master and pet: the zone's own
// components and the reference game's, at their fixed sizes, and a bag
// the size a real inventory might grow to.
func player() Snapshot {
	s, err := NewSnapshot(1<<62|0x1234_5678, 2, 17, map[string][]byte{
		"zone.position": make([]byte, 24),
		"zone.owner":    make([]byte, 8),
		"visual":        make([]byte, 8),
		"path":          make([]byte, 48),
		"speed":         make([]byte, 8),
		"health":        make([]byte, 16),
		"exp":           make([]byte, 16),
		"motion":        make([]byte, 32),
		"master":        make([]byte, 8),
		"bag":           make([]byte, 1024),
	})
	if err != nil {
		panic(err)
	}
	return s
}

func pet() Snapshot {
	s, err := NewSnapshot(1<<62|0x1234_5679, 2, 17, map[string][]byte{
		"zone.position": make([]byte, 24),
		"zone.owner":    make([]byte, 8),
		"visual":        make([]byte, 8),
		"speed":         make([]byte, 8),
		"health":        make([]byte, 16),
		"motion":        make([]byte, 32),
		"pet":           make([]byte, 8),
	})
	if err != nil {
		panic(err)
	}
	return s
}

func codecs() []codec {
	return []codec{
		{
			Name:   "Transfer",
			Decode: adapt(DecodeTransfer),
			Samples: []message{
				Transfer{Entities: []Snapshot{{Entity: 1, Epoch: 1}}},
				Transfer{Entities: []Snapshot{player(), pet()}},
				Transfer{Entities: []Snapshot{
					{Entity: math.MaxUint64, Epoch: math.MaxUint64, Table: math.MaxUint64, Components: []Component{
						{Name: "a"}, {Name: "b", Data: []byte{0}}, {Name: "é", Data: []byte("x")}, {Name: "宠物"},
					}},
					{Entity: 128, Epoch: 128, Table: 128, Components: []Component{{Name: "Z"}, {Name: "a"}, {Name: "aa"}}},
				}},
			},
			Random: func(r *rand.Rand) message {
				var m Transfer
				for range 1 + randLen(r) {
					m.Entities = append(m.Entities, randSnapshot(r))
				}
				return m
			},
		},
		{
			Name:   "Ack",
			Decode: adapt(DecodeAck),
			Samples: []message{
				Ack{Entities: []Ref{{Entity: 1, Epoch: 1}}},
				Ack{Entities: []Ref{{Entity: math.MaxUint64, Epoch: math.MaxUint64}, {Entity: 1 << 63, Epoch: 128}}},
			},
			Random: func(r *rand.Rand) message { return Ack{Entities: randRefs(r)} },
		},
		{
			Name:   "Refuse",
			Decode: adapt(DecodeRefuse),
			Samples: []message{
				Refuse{Code: ReasonNotOwner, Entities: []Ref{{Entity: 1, Epoch: 2}}},
				Refuse{Code: "A", Entities: []Ref{{Entity: 9, Epoch: 3}, {Entity: 9, Epoch: 3}}},
				Refuse{Code: strings.Repeat("Z", MaxCodeLen), Entities: []Ref{{Entity: math.MaxUint64, Epoch: math.MaxUint64}}},
			},
			Random: func(r *rand.Rand) message { return Refuse{Code: randCode(r), Entities: randRefs(r)} },
		},
	}
}

func codecNamed(tb testing.TB, name string) codec {
	tb.Helper()
	return codectest.Named(tb, codecs(), name)
}

// randLen is a list length: often 0, sometimes a few, rarely dozens.
func randLen(r *rand.Rand) int {
	switch r.IntN(4) {
	case 0:
		return 0
	case 3:
		return r.IntN(40)
	}
	return 1 + r.IntN(4)
}

// randU64 favours the edges of the varint lengths.
func randU64(r *rand.Rand) uint64 {
	switch r.IntN(6) {
	case 0:
		return []uint64{0, 1, 127, 128, 16383, 16384, math.MaxUint32, math.MaxUint64}[r.IntN(8)]
	case 1:
		return r.Uint64N(1 << 14)
	}
	return r.Uint64() >> r.IntN(64)
}

func randNonZero(r *rand.Rand) uint64 { return max(1, randU64(r)) }

// nameRunes are what random names are made of: ASCII, the dot zone uses,
// and multi-byte runes, so sorting is by bytes, not runes.
var nameRunes = []rune("abcxyzAZ09._-éß宠物🐉")

func randName(r *rand.Rand) string {
	n := 1 + r.IntN(12)
	if r.IntN(30) == 0 {
		n = MaxNameLen // ASCII below keeps it within bytes
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(r.IntN(26))
		}
		return string(b)
	}
	var s strings.Builder
	for s.Len() < n {
		s.WriteRune(nameRunes[r.IntN(len(nameRunes))])
	}
	return s.String() // at most 12+3 bytes: within MaxNameLen
}

// randBytes returns nil or 1 to limit random bytes (canonical form).
func randBytes(r *rand.Rand, limit int) []byte {
	n := r.IntN(min(limit, 64) + 1)
	if r.IntN(200) == 0 {
		n = limit
	}
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randSnapshot(r *rand.Rand) Snapshot {
	s := Snapshot{Entity: randNonZero(r), Epoch: randNonZero(r), Table: randU64(r)}
	names := map[string]bool{}
	for range randLen(r) {
		names[randName(r)] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		// A few large components at most, so the snapshot stays within
		// MaxSnapshotBytes.
		s.Components = append(s.Components, Component{Name: name, Data: randBytes(r, MaxComponentData/16)})
	}
	return s
}

func randRefs(r *rand.Rand) []Ref {
	refs := make([]Ref, 1+randLen(r))
	for i := range refs {
		refs[i] = Ref{Entity: randNonZero(r), Epoch: randNonZero(r)}
	}
	return refs
}

const codeBytes = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."

func randCode(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return []string{ReasonNotOwner, ReasonLive, ReasonUnknownComponent, ReasonMalformed}[r.IntN(4)]
	}
	b := make([]byte, 1+r.IntN(MaxCodeLen))
	for i := range b {
		b[i] = codeBytes[r.IntN(len(codeBytes))]
	}
	return string(b)
}

// checkMalformed fails unless err is a decoder refusal as the package
// promises it: matching ErrMalformed, with code HANDOFF.MALFORMED.
func checkMalformed(tb testing.TB, err error) {
	tb.Helper()
	if !errors.Is(err, ErrMalformed) {
		tb.Fatalf("error %v does not match ErrMalformed", err)
	}
	if code := errcode.Of(err); code != "HANDOFF.MALFORMED" {
		tb.Fatalf("error %v has code %q, want HANDOFF.MALFORMED", err, code)
	}
}

// checkInvalid fails unless err is a Check refusal: matching ErrInvalid,
// with code HANDOFF.INVALID.
func checkInvalid(tb testing.TB, err error) {
	tb.Helper()
	if !errors.Is(err, ErrInvalid) {
		tb.Fatalf("error %v does not match ErrInvalid", err)
	}
	if code := errcode.Of(err); code != "HANDOFF.INVALID" {
		tb.Fatalf("error %v has code %q, want HANDOFF.INVALID", err, code)
	}
}
