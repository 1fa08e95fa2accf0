package handoff

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/shardwise/shardwise/errcode"
)

// Version is the format version byte every payload starts with.
const Version = 1

// Control message kinds (the kind of a link control message), next to
// zone's 0x5A01..0x5A04.
const (
	KindTransfer uint32 = 0x5A10 // source → target: the entities, frozen, at epoch e+1
	KindAck      uint32 = 0x5A11 // target → source: created at that epoch
	KindRefuse   uint32 = 0x5A12 // target → source: not taken, with the reason
)

// Limits the decoders enforce; Check enforces the same. A count or length
// above its limit is malformed.
const (
	MaxEntities      = 4096      // snapshots in one Transfer
	MaxComponents    = 256       // components in one Snapshot
	MaxNameLen       = 128       // bytes of one Component.Name
	MaxComponentData = 64 << 10  // bytes of one Component.Data
	MaxSnapshotBytes = 256 << 10 // bytes of one encoded Snapshot (Snapshot.Size); see the package doc
	MaxRefs          = MaxEntities
	MaxCodeLen       = 64 // bytes of Refuse.Code
)

// Error codes.
const (
	// CodeMalformed is the code of bytes that are not a valid payload,
	// and the reason a target names when it refuses such a Transfer.
	CodeMalformed = "HANDOFF.MALFORMED"
	// CodeInvalid is the code of a value Check refuses: encoded, it
	// would be malformed.
	CodeInvalid = "HANDOFF.INVALID"
)

// Reason codes of a Refuse that the zone protocol names. A decoder accepts
// any well-formed code (a newer node may know more reasons); these are the
// ones every node understands.
const (
	// ReasonNotOwner: the target does not own the entity's position
	// (any more, or not yet under the table it holds).
	ReasonNotOwner = "HANDOFF.NOT_OWNER"
	// ReasonLive: the entity id is already live on the target.
	ReasonLive = "HANDOFF.ID_LIVE"
	// ReasonUnknownComponent: a component name is not registered on the
	// target (the nodes run different builds).
	ReasonUnknownComponent = "HANDOFF.UNKNOWN_COMPONENT"
	// ReasonMalformed: the snapshot decoded, but a component's codec
	// refused its data. A Transfer that does not decode at all names no
	// entity a Refuse could list: that is a sender bug for the protocol to
	// handle, not a Refuse.
	ReasonMalformed = CodeMalformed
)

// ErrMalformed matches (errors.Is) every error a decoder returns. The
// wrapped message names the payload type, the field and the byte offset.
var ErrMalformed = errcode.New(CodeMalformed, "handoff: malformed payload")

// ErrInvalid matches every error Check and NewSnapshot return. The wrapped
// message names the field and the offending value.
var ErrInvalid = errcode.New(CodeInvalid, "handoff: invalid value")

// Component is one handed-over component of an entity: the registered
// component name and the bytes of its handoff codec.
type Component struct {
	Name string // registered component name: non-empty UTF-8, at most MaxNameLen bytes
	Data []byte // the component's handoff codec output, at most MaxComponentData bytes; may be empty
}

// Snapshot is an entity as it travels: everything the next owner needs to
// go on simulating it.
type Snapshot struct {
	Entity     uint64      // the entity id, kept by the target; not 0
	Epoch      uint64      // the epoch the entity has on the target (the source's + 1); not 0
	Table      uint64      // the region-table version that made the target its owner
	Components []Component // sorted by Name, names distinct; at most MaxComponents
}

// Transfer hands entities from the source to the target. One message may
// carry several: a master and its pet move as a unit, a region move
// batches.
type Transfer struct {
	Entities []Snapshot // at least 1, at most MaxEntities
}

// Ref names an entity at an epoch.
type Ref struct {
	Entity uint64 // not 0
	Epoch  uint64 // the epoch of the Transfer's snapshot; not 0
}

// Ack tells the source that the target created these entities at these
// epochs: the source may evict them.
type Ack struct {
	Entities []Ref // at least 1, at most MaxRefs
}

// Refuse tells the source that the target did not take these entities, for
// one reason: they stay the source's.
type Refuse struct {
	Code     string // stable reason code (ReasonNotOwner …): [A-Z0-9_.], 1 to MaxCodeLen bytes
	Entities []Ref  // at least 1, at most MaxRefs
}

// NewSnapshot returns the snapshot of entity at epoch under table with the
// components comps (name → codec bytes), sorted by name, or an error
// matching ErrInvalid when the result would not decode: a zero entity or
// epoch, a bad name, or a limit passed. The Data slices alias comps' values
// (an empty one becomes nil).
func NewSnapshot(entity, epoch, table uint64, comps map[string][]byte) (Snapshot, error) {
	s := Snapshot{Entity: entity, Epoch: epoch, Table: table}
	if len(comps) > MaxComponents {
		// Refused before sorting a hostile map.
		return Snapshot{}, ErrInvalid.Wrap("Components: %d exceed %d", len(comps), MaxComponents)
	}
	if len(comps) > 0 {
		s.Components = make([]Component, 0, len(comps))
		for _, name := range slices.Sorted(maps.Keys(comps)) {
			data := comps[name]
			if len(data) == 0 {
				data = nil
			}
			s.Components = append(s.Components, Component{Name: name, Data: data})
		}
	}
	if err := s.Check(); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}

// Check returns nil when s is one the decoder accepts: entity and epoch
// not 0, names valid, sorted and distinct, every limit kept. Otherwise it
// returns an error matching ErrInvalid that names the field.
func (s Snapshot) Check() error {
	if msg := s.problem(); msg != "" {
		return ErrInvalid.Wrap("%s", msg)
	}
	return nil
}

// problem is Check's rule, worded for a message that names the field.
func (s Snapshot) problem() string {
	switch {
	case s.Entity == 0:
		return "Entity: 0 is not an entity id"
	case s.Epoch == 0:
		return "Epoch: 0 is not an epoch"
	case len(s.Components) > MaxComponents:
		return fmt.Sprintf("Components: %d exceed %d", len(s.Components), MaxComponents)
	}
	prev := ""
	for i, c := range s.Components {
		if why := nameProblem(prev, c.Name, i > 0); why != "" {
			return fmt.Sprintf("Components[%d].Name %q: %s", i, c.Name, why)
		}
		if len(c.Data) > MaxComponentData {
			return fmt.Sprintf("Components[%d].Data (%q): %d bytes exceed %d", i, c.Name, len(c.Data), MaxComponentData)
		}
		prev = c.Name
	}
	if n := s.Size(); n > MaxSnapshotBytes {
		return fmt.Sprintf("Size: %d bytes exceed %d", n, MaxSnapshotBytes)
	}
	return ""
}

// nameProblem says why name may not follow prev (when hasPrev), or "".
// The decoder and Check share it, so they cannot disagree.
func nameProblem(prev, name string, hasPrev bool) string {
	switch {
	case name == "":
		return "empty"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("%d bytes exceed %d", len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return "not valid UTF-8"
	case hasPrev && name == prev:
		return "duplicate"
	case hasPrev && name < prev:
		return fmt.Sprintf("not sorted: after %q", prev)
	}
	return ""
}

// codeProblem says why code is not a valid reason code, or "".
func codeProblem(code string) string {
	switch {
	case code == "":
		return "empty"
	case len(code) > MaxCodeLen:
		return fmt.Sprintf("%d bytes exceed %d", len(code), MaxCodeLen)
	}
	for i := range len(code) {
		if c := code[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return fmt.Sprintf("byte %d is %q, not one of [A-Z0-9_.]", i, c)
		}
	}
	return ""
}

// Size is the number of bytes s takes in a Transfer (its part of
// Transfer.Append's output), the size MaxSnapshotBytes limits.
func (s Snapshot) Size() int {
	n := 8 + uvarintLen(s.Epoch) + uvarintLen(s.Table) + uvarintLen(uint64(len(s.Components)))
	for _, c := range s.Components {
		n += uvarintLen(uint64(len(c.Name))) + len(c.Name) + uvarintLen(uint64(len(c.Data))) + len(c.Data)
	}
	return n
}

// Check returns nil when m is one DecodeTransfer accepts, and otherwise an
// error matching ErrInvalid that names the entity and field.
func (m Transfer) Check() error {
	if err := checkCount("Entities", len(m.Entities), MaxEntities); err != nil {
		return err
	}
	for i, s := range m.Entities {
		if msg := s.problem(); msg != "" {
			return ErrInvalid.Wrap("Entities[%d] (entity %d): %s", i, s.Entity, msg)
		}
	}
	return nil
}

// Check returns nil when m is one DecodeAck accepts, and otherwise an
// error matching ErrInvalid that names the field.
func (m Ack) Check() error { return checkRefs(m.Entities) }

// Check returns nil when m is one DecodeRefuse accepts, and otherwise an
// error matching ErrInvalid that names the field.
func (m Refuse) Check() error {
	if why := codeProblem(m.Code); why != "" {
		return ErrInvalid.Wrap("Code %q: %s", m.Code, why)
	}
	return checkRefs(m.Entities)
}

func checkCount(field string, n, limit int) error {
	switch {
	case n == 0:
		return ErrInvalid.Wrap("%s: empty, at least 1 needed", field)
	case n > limit:
		return ErrInvalid.Wrap("%s: %d exceed %d", field, n, limit)
	}
	return nil
}

func checkRefs(refs []Ref) error {
	if err := checkCount("Entities", len(refs), MaxRefs); err != nil {
		return err
	}
	for i, r := range refs {
		switch {
		case r.Entity == 0:
			return ErrInvalid.Wrap("Entities[%d].Entity: 0 is not an entity id", i)
		case r.Epoch == 0:
			return ErrInvalid.Wrap("Entities[%d].Epoch: 0 is not an epoch", i)
		}
	}
	return nil
}

// Append appends the encoding of m. It does not check (see the package
// doc, invariant 6; Check does).
func (m Transfer) Append(dst []byte) []byte {
	dst = binary.AppendUvarint(append(dst, Version), uint64(len(m.Entities)))
	for _, s := range m.Entities {
		dst = s.Append(dst)
	}
	return dst
}

// Append appends s as an element of a Transfer: Size bytes, the bytes a
// RawSnapshot holds. It does not check (invariant 6).
func (s Snapshot) Append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, s.Entity)
	dst = binary.AppendUvarint(dst, s.Epoch)
	dst = binary.AppendUvarint(dst, s.Table)
	dst = binary.AppendUvarint(dst, uint64(len(s.Components)))
	for _, c := range s.Components {
		dst = appendString(dst, c.Name)
		dst = appendBytes(dst, c.Data)
	}
	return dst
}

// Append appends the encoding of m. It does not check (invariant 6).
func (m Ack) Append(dst []byte) []byte {
	return appendRefs(append(dst, Version), m.Entities)
}

// Append appends the encoding of m. It does not check (invariant 6).
func (m Refuse) Append(dst []byte) []byte {
	dst = appendString(append(dst, Version), m.Code)
	return appendRefs(dst, m.Entities)
}

func appendRefs(dst []byte, refs []Ref) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(refs)))
	for _, r := range refs {
		dst = binary.LittleEndian.AppendUint64(dst, r.Entity)
		dst = binary.AppendUvarint(dst, r.Epoch)
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
