package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/torus"
)

// Smallest encodings of list elements, which bound a count by the bytes
// left (invariant 4 of the package doc).
const (
	minChunk         = 3                 // three one-byte varints
	minIntent        = 1 + 8 + 8 + 1 + 1 // kind, source, target, amount, data length
	minFrame         = 1                 // an empty frame's length
	minAccountFrames = 1 + 1             // account, index count
	minAccount       = 1
	minIndex         = 1
	minSnapshotEntry = 8 + 1 + 1 + 1 // entity, epoch, seq, frames length
)

// DecodeFence decodes an EntryFence payload.
func DecodeFence(b []byte) (Fence, error) {
	r := newReader(b, "Fence")
	f := r.fence("Lease", "Table")
	return f, r.finish()
}

// DecodeSubscribe decodes a KindSubscribe payload. Empty lists decode as
// nil.
func DecodeSubscribe(b []byte) (Subscribe, error) {
	r := newReader(b, "Subscribe")
	var m Subscribe
	m.Fence = r.fence("Fence.Lease", "Fence.Table")
	m.Add = r.chunks("Add", "Add[]")
	m.Remove = r.chunks("Remove", "Remove[]")
	m.Resync = r.chunks("Resync", "Resync[]")
	if err := r.finish(); err != nil {
		return Subscribe{}, err
	}
	return m, nil
}

// DecodeIntents decodes a KindIntents payload. Each Intent.Data aliases b
// (nil when empty); an empty List decodes as nil.
func DecodeIntents(b []byte) (Intents, error) {
	r := newReader(b, "Intents")
	var m Intents
	m.Fence = r.fence("Fence.Lease", "Fence.Table")
	m.Tick = r.uvarint("Tick")
	if n := r.count("List", MaxIntents, minIntent); n > 0 {
		m.List = make([]Intent, n)
		for i := range m.List {
			r.i = i
			in := &m.List[i]
			kind := r.uvarint("List[].Kind")
			if kind > math.MaxUint16 {
				r.fail("List[].Kind", "%d exceeds %d", kind, math.MaxUint16)
			}
			in.Kind = uint16(kind)
			in.Source = r.u64("List[].Source")
			in.Target = r.u64("List[].Target")
			in.Amount = r.varint("List[].Amount")
			in.Data = r.bytes("List[].Data", MaxIntentData)
		}
	}
	if err := r.finish(); err != nil {
		return Intents{}, err
	}
	return m, nil
}

// DecodeForward decodes a KindForward payload. Each of Frames aliases b
// (nil when empty); empty lists decode as nil. Every frame index is below
// len(Frames) and every account is valid.
func DecodeForward(b []byte) (Forward, error) {
	r := newReader(b, "Forward")
	var m Forward
	m.Fence = r.fence("Fence.Lease", "Fence.Table")
	m.Tick = r.uvarint("Tick")
	if n := r.count("Frames", MaxFrames, minFrame); n > 0 {
		m.Frames = make([][]byte, n)
		for i := range m.Frames {
			r.i = i
			// A frame is bounded by the input only: the link caps the
			// whole payload.
			m.Frames[i] = r.bytes("Frames[]", math.MaxInt)
		}
	}
	if n := r.count("Accounts", MaxAccounts, minAccountFrames); n > 0 {
		m.Accounts = make([]AccountFrames, n)
		for i := range m.Accounts {
			r.i = i
			a := &m.Accounts[i]
			a.Account = r.account("Accounts[].Account")
			if k := r.count("Accounts[].Frames", MaxFrames, minIndex); k > 0 {
				a.Frames = make([]uint32, k)
				for j := range a.Frames {
					r.j = j
					// Read as a uvarint and compared before the
					// conversion, so no index wraps into range.
					idx := r.uvarint("Accounts[].Frames[]")
					if idx >= uint64(len(m.Frames)) {
						r.fail("Accounts[].Frames[]", "frame index %d, only %d frames", idx, len(m.Frames))
					}
					a.Frames[j] = uint32(idx)
				}
			}
		}
	}
	if err := r.finish(); err != nil {
		return Forward{}, err
	}
	return m, nil
}

// DecodeRoutes decodes a KindRoutes payload. Empty lists decode as nil;
// every account is valid, and a full Routes has no Unset.
func DecodeRoutes(b []byte) (Routes, error) {
	r := newReader(b, "Routes")
	var m Routes
	m.Fence = r.fence("Fence.Lease", "Fence.Table")
	m.Version = r.uvarint("Version")
	m.Full = r.bool("Full")
	m.Set = r.accounts("Set", "Set[]")
	m.Unset = r.accounts("Unset", "Unset[]")
	if m.Full && len(m.Unset) > 0 {
		// Full already forgets everything outside Set; an Unset beside it
		// could only be a sender bug, and which one it meant is unknown.
		r.fail("Unset", "%d accounts in a full Routes", len(m.Unset))
	}
	if err := r.finish(); err != nil {
		return Routes{}, err
	}
	return m, nil
}

// DecodeUpdate decodes an EntryUpdate payload. Frames aliases b (nil when
// empty).
func DecodeUpdate(b []byte) (Update, error) {
	r := newReader(b, "Update")
	var m Update
	m.Chunk = r.chunk("Chunk")
	m.Frames = r.bytes("Frames", math.MaxInt)
	if err := r.finish(); err != nil {
		return Update{}, err
	}
	return m, nil
}

// DecodeSnapshot decodes an EntrySnapshot payload. Each entry's Frames
// aliases b (nil when empty); no entries decode as nil.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	r := newReader(b, "Snapshot")
	var m Snapshot
	m.Chunk = r.chunk("Chunk")
	if n := r.count("Entries", MaxSnapshotEntries, minSnapshotEntry); n > 0 {
		m.Entries = make([]SnapshotEntry, n)
		for i := range m.Entries {
			r.i = i
			e := &m.Entries[i]
			e.Entity = r.u64("Entries[].Entity")
			e.Epoch = r.uvarint("Entries[].Epoch")
			e.Seq = r.uvarint("Entries[].Seq")
			e.Frames = r.bytes("Entries[].Frames", math.MaxInt)
		}
	}
	if err := r.finish(); err != nil {
		return Snapshot{}, err
	}
	return m, nil
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
	axis string // rendered after the field when set (see int32)
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
			if r.axis != "" {
				s.WriteString("." + r.axis)
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

// varint reads a minimal zigzag varint.
func (r *reader) varint(field string) int64 {
	u := r.uvarint(field)
	return int64(u>>1) ^ -int64(u&1)
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

func (r *reader) bool(field string) bool {
	if r.err != nil {
		return false
	}
	if r.left() < 1 {
		r.fail(field, "truncated")
		return false
	}
	v := r.b[r.off]
	if v > 1 {
		r.fail(field, "bool byte %d, not 0 or 1", v)
		return false
	}
	r.off++
	return v == 1
}

// count reads a list length: at most limit, and at most what the bytes
// left could hold at minSize bytes an element, so a hostile count fails
// before anything is allocated for it.
func (r *reader) count(field string, limit, minSize int) int {
	start := r.off
	c := r.uvarint(field)
	if r.err != nil {
		return 0
	}
	if c > uint64(limit) {
		r.off = start
		r.fail(field, "count %d exceeds %d", c, limit)
		return 0
	}
	// c ≤ limit ≤ 1<<16 and minSize is small: no overflow.
	if need, left := int(c)*minSize, r.left(); need > left {
		r.off = start
		r.fail(field, "count %d needs at least %d more bytes, %d left", c, need, left)
		return 0
	}
	return int(c)
}

// bytes reads a length-prefixed byte string of at most limit bytes. The
// result aliases the input with its capacity clipped; empty is nil.
func (r *reader) bytes(field string, limit int) []byte {
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

// int32 reads a zigzag varint within int32. axis is rendered after field
// only on failure, so the happy path builds no name.
func (r *reader) int32(field, axis string) int32 {
	r.axis = axis
	start := r.off
	v := r.varint(field)
	if r.err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		r.off = start
		r.fail(field, "%d overflows int32", v)
		v = 0
	}
	r.axis = ""
	return int32(v)
}

func (r *reader) chunk(field string) torus.ChunkPos {
	return torus.ChunkPos{
		X:    r.int32(field, "X"),
		Y:    r.int32(field, "Y"),
		Slab: r.int32(field, "Slab"),
	}
}

// chunks reads a list of chunks; elem is field+"[]", spelled out by the
// caller so that no name is built on the happy path.
func (r *reader) chunks(field, elem string) []torus.ChunkPos {
	n := r.count(field, MaxChunks, minChunk)
	if n == 0 {
		return nil
	}
	cs := make([]torus.ChunkPos, n)
	for i := range cs {
		r.i = i
		cs[i] = r.chunk(elem)
	}
	return cs
}

func (r *reader) account(field string) account.ID {
	start := r.off
	id := account.ID(r.uvarint(field))
	if r.err == nil && !id.Valid() {
		r.off = start
		r.fail(field, "account %d is not valid", id)
	}
	return id
}

// accounts reads a list of valid accounts; elem is field+"[]" (see chunks).
func (r *reader) accounts(field, elem string) []account.ID {
	n := r.count(field, MaxAccounts, minAccount)
	if n == 0 {
		return nil
	}
	ids := make([]account.ID, n)
	for i := range ids {
		r.i = i
		ids[i] = r.account(elem)
	}
	return ids
}

// fence reads a Fence; the field names are the caller's, so that a bare
// Fence payload names "Fence.Lease" rather than "Fence.Fence.Lease".
func (r *reader) fence(lease, table string) Fence {
	return Fence{
		Node:  r.uvarint(strings.TrimSuffix(lease, "Lease") + "Node"),
		Lease: int64(r.u64(lease)),
		Table: r.uvarint(table),
	}
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
