package handoff

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Smallest encodings of list elements, which bound a count by the bytes
// left (invariant 4 of the package doc).
const (
	minSnapshot  = 8 + 1 + 1 + 1 // entity, epoch, table, component count
	minComponent = 1 + 1 + 1     // name length, one name byte (names are not empty), data length
	minRef       = 8 + 1         // entity, epoch
)

// DecodeTransfer decodes a KindTransfer payload. Each Component.Data
// aliases b (nil when empty); a snapshot without components has nil
// Components.
func DecodeTransfer(b []byte) (Transfer, error) {
	r := newReader(b, "Transfer")
	var m Transfer
	if n := r.count("Entities", 1, MaxEntities, minSnapshot); n > 0 {
		m.Entities = make([]Snapshot, n)
		for i := range m.Entities {
			r.i = i
			r.snapshot(&m.Entities[i])
		}
	}
	if err := r.finish(); err != nil {
		return Transfer{}, err
	}
	return m, nil
}

// DecodeAck decodes a KindAck payload.
func DecodeAck(b []byte) (Ack, error) {
	r := newReader(b, "Ack")
	m := Ack{Entities: r.refs()}
	if err := r.finish(); err != nil {
		return Ack{}, err
	}
	return m, nil
}

// DecodeRefuse decodes a KindRefuse payload.
func DecodeRefuse(b []byte) (Refuse, error) {
	r := newReader(b, "Refuse")
	var m Refuse
	start := r.off
	m.Code = r.str("Code", MaxCodeLen)
	if why := codeProblem(m.Code); r.err == nil && why != "" {
		r.off = start
		r.fail("Code", "%q: %s", m.Code, why)
	}
	m.Entities = r.refs()
	if err := r.finish(); err != nil {
		return Refuse{}, err
	}
	return m, nil
}

// snapshot reads Entities[r.i] into s.
func (r *reader) snapshot(s *Snapshot) {
	start := r.off
	s.Entity = r.nonZeroU64("Entities[].Entity", "an entity id")
	s.Epoch = r.nonZeroUvarint("Entities[].Epoch", "an epoch")
	s.Table = r.uvarint("Entities[].Table")
	n := r.count("Entities[].Components", 0, MaxComponents, minComponent)
	if n == 0 {
		return
	}
	s.Components = make([]Component, n)
	for j := range s.Components {
		r.j = j
		c := &s.Components[j]
		nameAt := r.off
		c.Name = r.str("Entities[].Components[].Name", MaxNameLen)
		if r.err != nil {
			return
		}
		prev := ""
		if j > 0 {
			prev = s.Components[j-1].Name
		}
		if why := nameProblem(prev, c.Name, j > 0); why != "" {
			r.off = nameAt
			r.fail("Entities[].Components[].Name", "%q: %s", c.Name, why)
			return
		}
		c.Data = r.bytes("Entities[].Components[].Data", MaxComponentData)
	}
	if size := r.off - start; r.err == nil && size > MaxSnapshotBytes {
		r.off = start
		r.fail("Entities[]", "snapshot of %d bytes exceeds %d", size, MaxSnapshotBytes)
	}
}

// refs reads the Entities list of an Ack or a Refuse: at least one.
func (r *reader) refs() []Ref {
	n := r.count("Entities", 1, MaxRefs, minRef)
	if n == 0 {
		return nil
	}
	refs := make([]Ref, n)
	for i := range refs {
		r.i = i
		refs[i].Entity = r.nonZeroU64("Entities[].Entity", "an entity id")
		refs[i].Epoch = r.nonZeroUvarint("Entities[].Epoch", "an epoch")
	}
	return refs
}

// reader decodes one payload. The first failure sticks: every later read
// returns zero and consumes nothing, so a decoder reads straight through
// and checks r.finish once. A count read after a failure is 0, so nothing
// is allocated past the first error.
//
// Field names are static strings in which each "[]" stands for the index
// i, then j, of the element being read; they are rendered only on failure,
// so the happy path formats nothing.
type reader struct {
	b    []byte
	off  int
	msg  string
	i, j int
	err  error
}

func newReader(b []byte, msg string) *reader {
	r := &reader{b: b, msg: msg}
	if len(b) == 0 {
		r.fail("", "empty payload, no version byte")
	} else if b[0] != Version {
		r.fail("", "unknown version %d", b[0])
	} else {
		r.off = 1
	}
	return r
}

func (r *reader) fail(field, format string, args ...any) {
	if r.err != nil {
		return
	}
	where := r.msg
	if field != "" {
		where += "." + r.render(field)
	}
	r.err = ErrMalformed.Wrap("%s at byte %d: %s", where, r.off, fmt.Sprintf(format, args...))
}

func (r *reader) render(field string) string {
	var s strings.Builder
	idx := [2]int{r.i, r.j}
	n := 0
	for {
		k := strings.Index(field, "[]")
		if k < 0 || n == len(idx) {
			s.WriteString(field)
			return s.String()
		}
		s.WriteString(field[:k+1])
		s.WriteString(strconv.Itoa(idx[n]))
		s.WriteByte(']')
		field = field[k+2:]
		n++
	}
}

func (r *reader) finish() error {
	if r.err == nil && r.off != len(r.b) {
		r.fail("", "%d trailing bytes", len(r.b)-r.off)
	}
	return r.err
}

func (r *reader) left() int { return len(r.b) - r.off }

// uvarint reads a minimal uvarint: Append writes only those, and refusing
// the others keeps the encoding canonical.
func (r *reader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	switch {
	case n == 0:
		r.fail(field, "truncated varint")
		return 0
	case n < 0:
		r.fail(field, "varint overflows 64 bits")
		return 0
	case n != uvarintLen(v):
		r.fail(field, "non-minimal varint")
		return 0
	}
	r.off += n
	return v
}

// nonZeroUvarint reads a uvarint that may not be 0; what names the thing
// 0 is not ("an epoch").
func (r *reader) nonZeroUvarint(field, what string) uint64 {
	start := r.off
	v := r.uvarint(field)
	if r.err == nil && v == 0 {
		r.off = start
		r.fail(field, "0 is not %s", what)
	}
	return v
}

func (r *reader) u64(field string) uint64 {
	if r.err != nil {
		return 0
	}
	if r.left() < 8 {
		r.fail(field, "truncated: 8 bytes needed, %d left", r.left())
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *reader) nonZeroU64(field, what string) uint64 {
	start := r.off
	v := r.u64(field)
	if r.err == nil && v == 0 {
		r.off = start
		r.fail(field, "0 is not %s", what)
	}
	return v
}

// count reads a list length: at least least (1 for the lists of
// entities, which a message exists to carry), at most limit, and at most
// what the bytes left could hold at minSize bytes an element, so a hostile
// count fails before anything is allocated for it.
func (r *reader) count(field string, least, limit, minSize int) int {
	start := r.off
	c := r.uvarint(field)
	if r.err != nil {
		return 0
	}
	if c < uint64(least) {
		r.off = start
		r.fail(field, "count %d, at least %d needed", c, least)
		return 0
	}
	if c > uint64(limit) {
		r.off = start
		r.fail(field, "count %d exceeds %d", c, limit)
		return 0
	}
	// c ≤ limit ≤ 4096 and minSize is small: no overflow.
	if need, left := int(c)*minSize, r.left(); need > left {
		r.off = start
		r.fail(field, "count %d needs at least %d more bytes, %d left", c, need, left)
		return 0
	}
	return int(c)
}

// span reads a length-prefixed byte string of at most limit bytes and
// returns it aliasing the input with its capacity clipped (nil when
// empty).
func (r *reader) span(field string, limit int) []byte {
	start := r.off
	n := r.uvarint(field)
	if r.err != nil {
		return nil
	}
	if n > uint64(limit) {
		r.off = start
		r.fail(field, "%d bytes exceed %d", n, limit)
		return nil
	}
	if left := r.left(); n > uint64(left) {
		r.off = start
		r.fail(field, "%d bytes, %d left", n, left)
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

// bytes reads a byte string that aliases the input (invariant 3).
func (r *reader) bytes(field string, limit int) []byte { return r.span(field, limit) }

// str reads a string (copied: names and codes are short, and a string
// that aliased the input would break if the caller reused the buffer).
func (r *reader) str(field string, limit int) string { return string(r.span(field, limit)) }
