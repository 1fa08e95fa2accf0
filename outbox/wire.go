package outbox

import (
	"encoding/binary"
	"fmt"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/interest"
)

// Wire format of a batch (everything one subscriber receives in one tick):
//
//	batch = *frame
//	frame = uvarint(len(body)) body
//	body  = kind:u8 entity:u64 (little endian) rest
//
//	KindComponent  rest = type:uvarint payload:bytes (to the end of the body)
//	KindAppear     rest = components:uvarint — the next `components` frames
//	                      are KindComponent frames of the same entity (its burst)
//	KindVanish     rest = reason:u8
//
// Varints are canonical (shortest form); the decoder refuses any other, so
// decoding and re-encoding a valid batch gives back the same bytes. Entity
// ids are fixed 8 bytes: snowflakes have their high bits set, so a varint
// would spend 9–10 bytes on them.

// Kind is the type of a frame.
type Kind uint8

// Frame kinds.
const (
	KindComponent Kind = 1
	KindAppear    Kind = 2
	KindVanish    Kind = 3
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case KindComponent:
		return "component"
	case KindAppear:
		return "appear"
	case KindVanish:
		return "vanish"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ComponentType identifies a synced component type on the wire.
type ComponentType uint16

// MaxFrameBody caps the body of one frame; a longer length prefix is
// malformed (protects a decoder from a hostile length).
const MaxFrameBody = 1 << 20

// MaxBurstLen caps the component count of an appear head. A burst carries
// at most one frame per component type (Outbox.Register refuses a type
// twice) and types are 16 bits, so a larger count is malformed. The cap is
// what lets ReadFrame judge a head on its own: it need not see the burst's
// frames to refuse a hostile count.
const MaxBurstLen = 1 << 16

// ErrMalformed is returned (wrapped, with detail) for bytes that are not a
// valid batch. Code OUTBOX.MALFORMED.
var ErrMalformed = errcode.New("OUTBOX.MALFORMED", "malformed outbox frame")

// Message is one decoded frame. Payload aliases the decoded bytes.
type Message struct {
	Kind      Kind
	Entity    uint64
	Component ComponentType         // KindComponent
	Payload   []byte                // KindComponent
	BurstLen  int                   // KindAppear: component frames that follow
	Reason    interest.VanishReason // KindVanish
}

const entityBytes = 8

// minComponentFrame is the smallest component frame: a one-byte length,
// the kind, the entity and a one-byte type, with no payload.
const minComponentFrame = 1 + 1 + entityBytes + 1

// AppendComponentFrame appends a component frame.
func AppendComponentFrame(dst []byte, entity uint64, t ComponentType, payload []byte) []byte {
	body := 1 + entityBytes + uvarintLen(uint64(t)) + len(payload)
	dst = binary.AppendUvarint(dst, uint64(body))
	dst = append(dst, byte(KindComponent))
	dst = binary.LittleEndian.AppendUint64(dst, entity)
	dst = binary.AppendUvarint(dst, uint64(t))
	return append(dst, payload...)
}

// AppendAppearFrame appends the head of an appear burst of n components.
func AppendAppearFrame(dst []byte, entity uint64, n int) []byte {
	body := 1 + entityBytes + uvarintLen(uint64(n))
	dst = binary.AppendUvarint(dst, uint64(body))
	dst = append(dst, byte(KindAppear))
	dst = binary.LittleEndian.AppendUint64(dst, entity)
	return binary.AppendUvarint(dst, uint64(n))
}

// AppendVanishFrame appends a vanish frame.
func AppendVanishFrame(dst []byte, entity uint64, reason interest.VanishReason) []byte {
	dst = binary.AppendUvarint(dst, 1+entityBytes+1)
	dst = append(dst, byte(KindVanish))
	dst = binary.LittleEndian.AppendUint64(dst, entity)
	return append(dst, byte(reason))
}

// AppendMessage appends m as a frame.
func AppendMessage(dst []byte, m Message) []byte {
	switch m.Kind {
	case KindComponent:
		return AppendComponentFrame(dst, m.Entity, m.Component, m.Payload)
	case KindAppear:
		return AppendAppearFrame(dst, m.Entity, m.BurstLen)
	case KindVanish:
		return AppendVanishFrame(dst, m.Entity, m.Reason)
	}
	panic(fmt.Sprintf("outbox: AppendMessage of unknown kind %d", m.Kind))
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// readUvarint reads a canonical uvarint.
func readUvarint(b []byte) (uint64, int, bool) {
	if len(b) > 0 && b[0] < 0x80 {
		// One byte, minimal (most lengths and every component type): what
		// binary.Uvarint and the minimality check below would find.
		return uint64(b[0]), 1, true
	}
	v, n := binary.Uvarint(b)
	if n <= 0 || n != uvarintLen(v) {
		return 0, 0, false
	}
	return v, n, true
}

func malformed(off int, format string, args ...any) error {
	return ErrMalformed.Wrap("at byte %d: %s", off, fmt.Sprintf(format, args...))
}

// ReadFrame decodes the first frame of b and returns it with the bytes
// after it. It checks one frame in isolation: whether it accepts the frame
// and what it decodes never depend on the bytes after it, so a reader that
// takes frames one at a time (a replica fed entry by entry) can consume an
// appear head before the burst's component frames have arrived. Whether a
// burst is complete is a property of a sequence of frames: DecodeBatch
// checks it for a whole batch, and a frame-at-a-time reader checks it
// itself (Message.BurstLen says how many component frames it is owed).
func ReadFrame(b []byte) (Message, []byte, error) {
	return readFrame(b, 0)
}

func readFrame(b []byte, off int) (Message, []byte, error) {
	size, n, ok := readUvarint(b)
	if !ok {
		return Message{}, nil, malformed(off, "bad length prefix")
	}
	if size > MaxFrameBody {
		return Message{}, nil, malformed(off, "frame body of %d bytes exceeds %d", size, MaxFrameBody)
	}
	if size > uint64(len(b)-n) {
		return Message{}, nil, malformed(off, "frame body of %d bytes, %d left", size, len(b)-n)
	}
	body, rest := b[n:n+int(size)], b[n+int(size):]
	off += n
	if len(body) < 1+entityBytes {
		return Message{}, nil, malformed(off, "body of %d bytes too short", len(body))
	}
	m := Message{Kind: Kind(body[0]), Entity: binary.LittleEndian.Uint64(body[1:])}
	tail := body[1+entityBytes:]
	off += 1 + entityBytes
	switch m.Kind {
	case KindComponent:
		t, k, ok := readUvarint(tail)
		if !ok || t > 0xFFFF {
			return Message{}, nil, malformed(off, "bad component type")
		}
		m.Component = ComponentType(t)
		m.Payload = tail[k:len(tail):len(tail)]
	case KindAppear:
		c, k, ok := readUvarint(tail)
		if !ok || k != len(tail) {
			return Message{}, nil, malformed(off, "bad appear burst length")
		}
		// Judged against a fixed cap, never against len(rest): the head
		// must be acceptable alone (see ReadFrame).
		if c > MaxBurstLen {
			return Message{}, nil, malformed(off, "burst of %d frames exceeds %d", c, MaxBurstLen)
		}
		m.BurstLen = int(c)
	case KindVanish:
		if len(tail) != 1 || tail[0] > byte(interest.Death) {
			return Message{}, nil, malformed(off, "bad vanish reason")
		}
		m.Reason = interest.VanishReason(tail[0])
	default:
		return Message{}, nil, malformed(off-1-entityBytes, "unknown frame kind %d", body[0])
	}
	return m, rest, nil
}

// DecodeBatch decodes every frame of batch in order and calls fn with each.
// It stops at the first malformed frame or the first error fn returns. An
// appear burst must be followed by exactly its count of component frames of
// the same entity: a batch is the unit that holds whole bursts, so this is
// checked here and not by ReadFrame. A burst longer than the bytes left is
// refused at its head, before fn sees it.
func DecodeBatch(batch []byte, fn func(Message) error) error {
	var burstEntity uint64
	burstLeft := 0
	off := 0
	for len(batch) > 0 {
		m, rest, err := readFrame(batch, off)
		if err != nil {
			return err
		}
		if burstLeft > 0 {
			if m.Kind != KindComponent || m.Entity != burstEntity {
				return malformed(off, "appear burst of entity %d cut short by a %s frame", burstEntity, m.Kind)
			}
			burstLeft--
		} else if m.Kind == KindAppear {
			// A count the bytes left cannot hold can never be met: refuse
			// it before fn runs.
			if m.BurstLen*minComponentFrame > len(rest) {
				return malformed(off, "burst of %d frames, %d bytes left", m.BurstLen, len(rest))
			}
			burstEntity, burstLeft = m.Entity, m.BurstLen
		}
		if err := fn(m); err != nil {
			return err
		}
		off += len(batch) - len(rest)
		batch = rest
	}
	if burstLeft > 0 {
		return malformed(off, "batch ends inside an appear burst of entity %d", burstEntity)
	}
	return nil
}
