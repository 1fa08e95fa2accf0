package handoff

import "github.com/shardwise/shardwise/internal/binread"

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
			r.snapshot(&m.Entities[i])
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

// snapshot reads Entities[r.I] into s.
func (r *reader) snapshot(s *Snapshot) {
	start := r.Offset()
	s.Entity = r.nonZeroU64("Entities[].Entity", "an entity id")
	s.Epoch = r.nonZeroUvarint("Entities[].Epoch", "an epoch")
	s.Table = r.Uvarint("Entities[].Table")
	n := r.Count("Entities[].Components", 0, MaxComponents, minComponent)
	if n == 0 {
		return
	}
	s.Components = make([]Component, n)
	for j := range s.Components {
		r.J = j
		c := &s.Components[j]
		nameAt := r.Offset()
		c.Name = r.str("Entities[].Components[].Name", MaxNameLen)
		if r.Err() != nil {
			return
		}
		prev := ""
		if j > 0 {
			prev = s.Components[j-1].Name
		}
		if why := nameProblem(prev, c.Name, j > 0); why != "" {
			r.FailAt(nameAt, "Entities[].Components[].Name", "%q: %s", c.Name, why)
			return
		}
		c.Data = r.bytes("Entities[].Components[].Data", MaxComponentData)
	}
	if size := r.Offset() - start; r.Err() == nil && size > MaxSnapshotBytes {
		r.FailAt(start, "Entities[]", "snapshot of %d bytes exceeds %d", size, MaxSnapshotBytes)
	}
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
}

func newReader(b []byte, msg string) *reader {
	r := &reader{binread.New(b, msg, ErrMalformed)}
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
