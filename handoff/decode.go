package handoff

import (
	"encoding/binary"

	"github.com/shardwise/shardwise/internal/binread"
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
	if n := r.Count("Entities", 1, MaxEntities, minSnapshot); n > 0 {
		m.Entities = make([]Snapshot, n)
		for i := range m.Entities {
			r.I = i
			r.snapshot(&m.Entities[i], true)
		}
	}
	if err := r.Finish(); err != nil {
		return Transfer{}, err
	}
	return m, nil
}

// DecodeAck decodes a KindAck payload.
func DecodeAck(b []byte) (Ack, error) {
	r := newReader(b, "Ack")
	m := Ack{Entities: r.refs()}
	if err := r.Finish(); err != nil {
		return Ack{}, err
	}
	return m, nil
}

// DecodeRefuse decodes a KindRefuse payload.
func DecodeRefuse(b []byte) (Refuse, error) {
	r := newReader(b, "Refuse")
	var m Refuse
	start := r.Offset()
	m.Code = r.str("Code", MaxCodeLen)
	if why := codeProblem(m.Code); r.Err() == nil && why != "" {
		r.FailAt(start, "Code", "%q: %s", m.Code, why)
	}
	m.Entities = r.refs()
	if err := r.Finish(); err != nil {
		return Refuse{}, err
	}
	return m, nil
}

// snapshot reads Entities[r.I] into s, its components only when keep
// (AppendRawSnapshots checks them and keeps the bytes).
func (r *reader) snapshot(s *Snapshot, keep bool) {
	start := r.Offset()
	s.Entity = r.nonZeroU64("Entities[].Entity", "an entity id")
	s.Epoch = r.nonZeroUvarint("Entities[].Epoch", "an epoch")
	s.Table = r.Uvarint("Entities[].Table")
	n := r.Count("Entities[].Components", 0, MaxComponents, minComponent)
	if n == 0 {
		return
	}
	if keep {
		s.Components = make([]Component, n)
	}
	prev := ""
	for j := range n {
		r.J = j
		nameAt := r.Offset()
		name := r.name(j, r.Span("Entities[].Components[].Name", MaxNameLen))
		if r.Err() != nil {
			return
		}
		if why := nameProblem(prev, name, j > 0); why != "" {
			r.FailAt(nameAt, "Entities[].Components[].Name", "%q: %s", name, why)
			return
		}
		data := r.bytes("Entities[].Components[].Data", MaxComponentData)
		if keep {
			s.Components[j] = Component{Name: name, Data: data}
		}
		prev = name
	}
	if size := r.Offset() - start; r.Err() == nil && size > MaxSnapshotBytes {
		r.FailAt(start, "Entities[]", "snapshot of %d bytes exceeds %d", size, MaxSnapshotBytes)
	}
}

// RawSnapshot is one snapshot of a Transfer as it was encoded, checked
// but not decoded: its entity and epoch, and its bytes (Snapshot.Append's
// output, Snapshot.Size of them). A holder that keeps snapshots it may
// never use (a standby's checkpoint records) keeps these, and decodes
// one only when it needs it.
type RawSnapshot struct {
	Entity, Epoch uint64
	Bytes         []byte
}

// AppendRawSnapshots checks a KindTransfer payload exactly as
// DecodeTransfer does (it accepts and refuses the same bytes, with the
// same errors) and appends its snapshots to dst as RawSnapshots whose
// Bytes alias b, capacity clipped. It allocates nothing per snapshot
// beyond dst's growth. On an error dst is returned as it was.
func AppendRawSnapshots(dst []RawSnapshot, b []byte) ([]RawSnapshot, error) {
	r := newReader(b, "Transfer")
	n0 := len(dst)
	if n := r.Count("Entities", 1, MaxEntities, minSnapshot); n > 0 {
		for i := range n {
			r.I = i
			start := r.Offset()
			var s Snapshot
			r.snapshot(&s, false)
			if r.Err() != nil {
				break
			}
			end := r.Offset()
			dst = append(dst, RawSnapshot{Entity: s.Entity, Epoch: s.Epoch, Bytes: b[start:end:end]})
		}
	}
	if err := r.Finish(); err != nil {
		clear(dst[n0:])
		return dst[:n0], err
	}
	return dst, nil
}

// Decode decodes s.Bytes, one snapshot, as DecodeTransfer decodes each
// (Component.Data aliases s.Bytes); an error matches ErrMalformed.
func (s RawSnapshot) Decode() (Snapshot, error) {
	r := &reader{Reader: binread.New(s.Bytes, "Snapshot", ErrMalformed)}
	var out Snapshot
	r.snapshot(&out, true)
	if err := r.Finish(); err != nil {
		return Snapshot{}, err
	}
	return out, nil
}

// Component returns the data of s's component name (aliasing s.Bytes,
// nil when empty), without decoding the others; ok is false when s has
// no such component, or its bytes are not a snapshot.
func (s RawSnapshot) Component(name string) (data []byte, ok bool) {
	b := s.Bytes
	if len(b) < 8 {
		return nil, false
	}
	b = b[8:]
	var n uint64
	for range 2 { // epoch, table
		if _, b, ok = skipUvarint(b); !ok {
			return nil, false
		}
	}
	if n, b, ok = skipUvarint(b); !ok {
		return nil, false
	}
	for range n {
		var c []byte
		if c, b, ok = span(b); !ok {
			return nil, false
		}
		match := string(c) == name
		if c, b, ok = span(b); !ok {
			return nil, false
		}
		if match {
			if len(c) == 0 {
				c = nil
			}
			return c[:len(c):len(c)], true
		}
	}
	return nil, false
}

func skipUvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

func span(b []byte) (s, rest []byte, ok bool) {
	n, b, ok := skipUvarint(b)
	if !ok || n > uint64(len(b)) {
		return nil, nil, false
	}
	return b[:n], b[n:], true
}

// refs reads the Entities list of an Ack or a Refuse: at least one.
func (r *reader) refs() []Ref {
	n := r.Count("Entities", 1, MaxRefs, minRef)
	if n == 0 {
		return nil
	}
	refs := make([]Ref, n)
	for i := range refs {
		r.I = i
		refs[i].Entity = r.nonZeroU64("Entities[].Entity", "an entity id")
		refs[i].Epoch = r.nonZeroUvarint("Entities[].Epoch", "an epoch")
	}
	return refs
}

// reader decodes one payload: binread.Reader (the first failure sticks,
// counts are checked before allocation, errors name field and offset)
// with this format's types on top. Lists set I, then J, for the "[]" of
// their field names.
type reader struct {
	binread.Reader
	// names are the component names read so far, by index: the
	// snapshots of one Transfer mostly repeat them, and a name equal to
	// the one before at its index is that string again, not a new one.
	names []string
}

// name is b as a string, the one read before at index j if equal.
func (r *reader) name(j int, b []byte) string {
	if j < len(r.names) && r.names[j] == string(b) {
		return r.names[j]
	}
	s := string(b)
	switch {
	case j < len(r.names):
		r.names[j] = s
	case j == len(r.names):
		r.names = append(r.names, s)
	}
	return s
}

func newReader(b []byte, msg string) *reader {
	r := &reader{Reader: binread.New(b, msg, ErrMalformed)}
	r.Version(Version)
	return r
}

// nonZeroUvarint reads a uvarint that may not be 0; what names the thing
// 0 is not ("an epoch").
func (r *reader) nonZeroUvarint(field, what string) uint64 {
	start := r.Offset()
	v := r.Uvarint(field)
	if r.Err() == nil && v == 0 {
		r.FailAt(start, field, "0 is not %s", what)
	}
	return v
}

func (r *reader) nonZeroU64(field, what string) uint64 {
	start := r.Offset()
	v := r.U64(field)
	if r.Err() == nil && v == 0 {
		r.FailAt(start, field, "0 is not %s", what)
	}
	return v
}

// bytes reads a byte string that aliases the input (invariant 3).
func (r *reader) bytes(field string, limit int) []byte { return r.Span(field, limit) }

// str reads a string (copied: names and codes are short, and a string
// that aliased the input would break if the caller reused the buffer).
func (r *reader) str(field string, limit int) string { return string(r.Span(field, limit)) }
