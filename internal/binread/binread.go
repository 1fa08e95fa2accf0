package binread

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/shardwise/shardwise/errcode"
)

// Reader decodes one payload; see the package doc for its invariants. The
// zero value is not usable: make one with New.
type Reader struct {
	// I and J are the indices of the element being read, rendered in place
	// of the first and second "[]" of a field name on failure. The decoder
	// sets them as it walks a list.
	I, J int
	// Suffix, when set, is rendered after the field name on failure ("X"
	// names "Chunk.X"), so a reader of a compound value need not build a
	// name on the happy path.
	Suffix string

	b         []byte
	off       int
	msg       string
	malformed *errcode.Sentinel
	err       error
}

// New returns a Reader of b, a payload of the message type msg ("Transfer"),
// whose errors wrap malformed.
func New(b []byte, msg string, malformed *errcode.Sentinel) Reader {
	return Reader{b: b, msg: msg, malformed: malformed}
}

// Version reads the leading format version byte and fails unless it is
// want.
func (r *Reader) Version(want byte) {
	if r.err != nil {
		return
	}
	switch {
	case r.Left() == 0:
		r.Fail("", "empty payload, no version byte")
	case r.b[r.off] != want:
		r.Fail("", "unknown version %d", r.b[r.off])
	default:
		r.off++
	}
}

// Fail records a failure of field (or of the message as a whole when field
// is "") at the current offset, unless one is recorded already.
func (r *Reader) Fail(field, format string, args ...any) {
	r.FailAt(r.off, field, format, args...)
}

// FailAt is Fail naming offset off: the start of an item that was read
// whole before it could be judged (a count over its limit, a name out of
// order).
func (r *Reader) FailAt(off int, field, format string, args ...any) {
	if r.err != nil {
		return
	}
	where := r.msg
	if field != "" {
		where += "." + r.render(field)
	}
	r.off = off
	r.err = r.malformed.Wrap("%s at byte %d: %s", where, off, fmt.Sprintf(format, args...))
}

func (r *Reader) render(field string) string {
	var s strings.Builder
	idx := [2]int{r.I, r.J}
	n := 0
	for {
		k := strings.Index(field, "[]")
		if k < 0 || n == len(idx) {
			s.WriteString(field)
			if r.Suffix != "" {
				s.WriteString("." + r.Suffix)
			}
			return s.String()
		}
		s.WriteString(field[:k+1])
		s.WriteString(strconv.Itoa(idx[n]))
		s.WriteByte(']')
		field = field[k+2:]
		n++
	}
}

// Finish fails if any bytes are left unread and returns the first failure,
// or nil.
func (r *Reader) Finish() error {
	if r.err == nil && r.off != len(r.b) {
		r.Fail("", "%d trailing bytes", len(r.b)-r.off)
	}
	return r.err
}

// Err returns the first failure so far, or nil.
func (r *Reader) Err() error { return r.err }

// Offset returns the offset of the next byte to read.
func (r *Reader) Offset() int { return r.off }

// Left returns how many bytes are left to read.
func (r *Reader) Left() int { return len(r.b) - r.off }

// Uvarint reads a minimal uvarint: encoders write only those, and refusing
// the others keeps the encoding canonical.
func (r *Reader) Uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	if r.off < len(r.b) && r.b[r.off] < 0x80 {
		// One byte, minimal: the common case (lengths, counts, epochs).
		v := uint64(r.b[r.off])
		r.off++
		return v
	}
	v, n := binary.Uvarint(r.b[r.off:])
	switch {
	case n == 0:
		r.Fail(field, "truncated varint")
		return 0
	case n < 0:
		r.Fail(field, "varint overflows 64 bits")
		return 0
	case n != uvarintLen(v):
		r.Fail(field, "non-minimal varint")
		return 0
	}
	r.off += n
	return v
}

// Byte reads one byte.
func (r *Reader) Byte(field string) byte {
	if r.err != nil {
		return 0
	}
	if r.Left() < 1 {
		r.Fail(field, "truncated")
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

// U32 reads a fixed 4-byte little-endian word.
func (r *Reader) U32(field string) uint32 {
	if r.err != nil {
		return 0
	}
	if r.Left() < 4 {
		r.Fail(field, "truncated: 4 bytes needed, %d left", r.Left())
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

// U64 reads a fixed 8-byte little-endian word.
func (r *Reader) U64(field string) uint64 {
	if r.err != nil {
		return 0
	}
	if r.Left() < 8 {
		r.Fail(field, "truncated: 8 bytes needed, %d left", r.Left())
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// Count reads a list length: at least least, at most limit, and at most
// what the bytes left could hold at minSize bytes an element, so a hostile
// count fails before anything is allocated for it (invariant 2). A failure
// names the offset of the count.
func (r *Reader) Count(field string, least, limit, minSize int) int {
	start := r.off
	c := r.Uvarint(field)
	if r.err != nil {
		return 0
	}
	if c < uint64(least) {
		r.FailAt(start, field, "count %d, at least %d needed", c, least)
		return 0
	}
	if c > uint64(limit) {
		r.FailAt(start, field, "count %d exceeds %d", c, limit)
		return 0
	}
	// Compared by division, so that limit*minSize cannot overflow the
	// check. With the formats' limits (at most 1<<16) need always fits;
	// the other message is for a caller with a limit that large.
	if left := r.Left(); minSize > 0 && c > uint64(left/minSize) {
		need := c * uint64(minSize)
		if need/uint64(minSize) != c {
			r.FailAt(start, field, "count %d of %d-byte elements overflows, %d left", c, minSize, left)
		} else {
			r.FailAt(start, field, "count %d needs at least %d more bytes, %d left", c, need, left)
		}
		return 0
	}
	return int(c)
}

// Span reads a length-prefixed byte string of at most limit bytes. The
// result aliases the input with its capacity clipped; empty is nil
// (invariant 3). A failure names the offset of the length.
func (r *Reader) Span(field string, limit int) []byte {
	start := r.off
	n := r.Uvarint(field)
	if r.err != nil {
		return nil
	}
	if n > uint64(limit) {
		r.FailAt(start, field, "%d bytes exceed %d", n, limit)
		return nil
	}
	if left := r.Left(); n > uint64(left) {
		r.FailAt(start, field, "%d bytes, %d left", n, left)
		return nil
	}
	if n == 0 {
		return nil
	}
	end := r.off + int(n)
	b := r.b[r.off:end:end]
	r.off = end
	return b
}

// uvarintLen returns the length of v's minimal uvarint encoding.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
