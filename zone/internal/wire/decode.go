package wire

import (
	"math"
	"strings"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/internal/binread"
	"github.com/shardwise/shardwise/torus"
)

// Smallest encodings of list elements, which bound a count by the bytes
// left (invariant 4 of the package doc).
const (
	minChunk         = 3                     // three one-byte varints
	minIntent        = 1 + 8 + 8 + 1 + 1 + 1 // kind, source, target, epoch, amount, data length
	minFrame         = 1                     // an empty frame's length
	minAccountFrames = 1 + 1                 // account, index count
	minAccount       = 1
	minIndex         = 1
	minSnapshotEntry = 8 + 1 + 1 + 1 // entity, epoch, seq, frames length
)

// DecodeFence decodes an EntryFence payload.
func DecodeFence(b []byte) (Fence, error) {
	r := newReader(b, "Fence")
	f := r.fence("Lease", "Table")
	return f, r.Finish()
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
	if err := r.Finish(); err != nil {
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
	m.Tick = r.Uvarint("Tick")
	if n := r.Count("List", 0, MaxIntents, minIntent); n > 0 {
		m.List = make([]Intent, n)
		for i := range m.List {
			r.I = i
			in := &m.List[i]
			kind := r.Uvarint("List[].Kind")
			if kind > math.MaxUint16 {
				r.Fail("List[].Kind", "%d exceeds %d", kind, math.MaxUint16)
			}
			in.Kind = uint16(kind)
			in.Source = r.U64("List[].Source")
			in.Target = r.U64("List[].Target")
			in.Epoch = r.Uvarint("List[].Epoch")
			in.Amount = r.varint("List[].Amount")
			in.Data = r.Span("List[].Data", MaxIntentData)
		}
	}
	if err := r.Finish(); err != nil {
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
	m.Tick = r.Uvarint("Tick")
	if n := r.Count("Frames", 0, MaxFrames, minFrame); n > 0 {
		m.Frames = make([][]byte, n)
		for i := range m.Frames {
			r.I = i
			// A frame is bounded by the input only: the link caps the
			// whole payload.
			m.Frames[i] = r.Span("Frames[]", math.MaxInt)
		}
	}
	if n := r.Count("Accounts", 0, MaxAccounts, minAccountFrames); n > 0 {
		m.Accounts = make([]AccountFrames, n)
		for i := range m.Accounts {
			r.I = i
			a := &m.Accounts[i]
			a.Account = r.account("Accounts[].Account")
			if k := r.Count("Accounts[].Frames", 0, MaxFrames, minIndex); k > 0 {
				a.Frames = make([]uint32, k)
				for j := range a.Frames {
					r.J = j
					// Read as a uvarint and compared before the
					// conversion, so no index wraps into range.
					idx := r.Uvarint("Accounts[].Frames[]")
					if idx >= uint64(len(m.Frames)) {
						r.Fail("Accounts[].Frames[]", "frame index %d, only %d frames", idx, len(m.Frames))
					}
					a.Frames[j] = uint32(idx)
				}
			}
		}
	}
	if err := r.Finish(); err != nil {
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
	m.Version = r.Uvarint("Version")
	m.Full = r.bool("Full")
	m.Set = r.accounts("Set", "Set[]")
	m.Unset = r.accounts("Unset", "Unset[]")
	if m.Full && len(m.Unset) > 0 {
		// Full already forgets everything outside Set; an Unset beside it
		// could only be a sender bug, and which one it meant is unknown.
		r.Fail("Unset", "%d accounts in a full Routes", len(m.Unset))
	}
	if err := r.Finish(); err != nil {
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
	m.Frames = r.Span("Frames", math.MaxInt)
	if err := r.Finish(); err != nil {
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
	if n := r.Count("Entries", 0, MaxSnapshotEntries, minSnapshotEntry); n > 0 {
		m.Entries = make([]SnapshotEntry, n)
		for i := range m.Entries {
			r.I = i
			e := &m.Entries[i]
			e.Entity = r.U64("Entries[].Entity")
			e.Epoch = r.Uvarint("Entries[].Epoch")
			e.Seq = r.Uvarint("Entries[].Seq")
			e.Frames = r.Span("Entries[].Frames", math.MaxInt)
		}
	}
	if err := r.Finish(); err != nil {
		return Snapshot{}, err
	}
	return m, nil
}

// DecodeTerrain decodes a KindTerrain payload.
func DecodeTerrain(b []byte) (Terrain, error) {
	r := newReader(b, "Terrain")
	var m Terrain
	m.Fence = r.fence("Fence.Lease", "Fence.Table")
	m.Chunk = r.chunk("Chunk")
	m.Rev = r.Uvarint("Rev")
	if err := r.Finish(); err != nil {
		return Terrain{}, err
	}
	return m, nil
}

// DecodeIntentsAck decodes a KindIntentsAck payload.
func DecodeIntentsAck(b []byte) (IntentsAck, error) {
	r := newReader(b, "IntentsAck")
	var m IntentsAck
	m.Fence = r.fence("Fence.Lease", "Fence.Table")
	m.For = int64(r.U64("For"))
	m.Taken = r.Uvarint("Taken")
	if err := r.Finish(); err != nil {
		return IntentsAck{}, err
	}
	return m, nil
}

// DecodePlayer decodes a KindPlayer payload. State aliases b (nil when
// empty).
func DecodePlayer(b []byte) (Player, error) {
	r := newReader(b, "Player")
	var m Player
	m.Fence = r.fence("Fence.Lease", "Fence.Table")
	start := r.Offset()
	m.Op = PlayerOp(r.Byte("Op"))
	if r.Err() == nil && (m.Op < PlayerSpawn || m.Op > PlayerSaving) {
		r.FailAt(start, "Op", "unknown op %d", m.Op)
	}
	m.Account = r.account("Account")
	m.Session = r.Uvarint("Session")
	m.Master = r.U64("Master")
	m.Pet = r.U64("Pet")
	start = r.Offset()
	m.Pos = torus.Pos{
		X: math.Float64frombits(r.U64("Pos.X")),
		Y: math.Float64frombits(r.U64("Pos.Y")),
		Z: math.Float64frombits(r.U64("Pos.Z")),
	}
	if r.Err() == nil && !m.Pos.Finite() {
		r.FailAt(start, "Pos", "%v is not finite", m.Pos)
	}
	m.Chunk = r.chunk("Chunk")
	m.State = r.Span("State", MaxPlayerState)
	if err := r.Finish(); err != nil {
		return Player{}, err
	}
	return m, nil
}

// reader decodes one payload: binread.Reader (the first failure sticks,
// counts are checked before allocation, errors name field and offset)
// with this format's types on top. Lists set I, then J, for the "[]" of
// their field names.
type reader struct {
	binread.Reader
}

// newReader returns the reader by value: a decoder keeps it on its stack
// (one heap allocation per decoded payload, otherwise, on the replication
// path's every entry).
func newReader(b []byte, msg string) reader {
	r := reader{binread.New(b, msg, ErrMalformed)}
	r.Version(Version)
	return r
}

// varint reads a minimal zigzag varint.
func (r *reader) varint(field string) int64 {
	u := r.Uvarint(field)
	return int64(u>>1) ^ -int64(u&1)
}

func (r *reader) bool(field string) bool {
	start := r.Offset()
	v := r.Byte(field)
	if r.Err() == nil && v > 1 {
		r.FailAt(start, field, "bool byte %d, not 0 or 1", v)
		return false
	}
	return v == 1
}

// int32 reads a zigzag varint within int32. axis is rendered after field
// only on failure, so the happy path builds no name.
func (r *reader) int32(field, axis string) int32 {
	r.Suffix = axis
	start := r.Offset()
	v := r.varint(field)
	if r.Err() == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		r.FailAt(start, field, "%d overflows int32", v)
		v = 0
	}
	r.Suffix = ""
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
	n := r.Count(field, 0, MaxChunks, minChunk)
	if n == 0 {
		return nil
	}
	cs := make([]torus.ChunkPos, n)
	for i := range cs {
		r.I = i
		cs[i] = r.chunk(elem)
	}
	return cs
}

func (r *reader) account(field string) account.ID {
	start := r.Offset()
	id := account.ID(r.Uvarint(field))
	if r.Err() == nil && !id.Valid() {
		r.FailAt(start, field, "account %d is not valid", id)
	}
	return id
}

// accounts reads a list of valid accounts; elem is field+"[]" (see chunks).
func (r *reader) accounts(field, elem string) []account.ID {
	n := r.Count(field, 0, MaxAccounts, minAccount)
	if n == 0 {
		return nil
	}
	ids := make([]account.ID, n)
	for i := range ids {
		r.I = i
		ids[i] = r.account(elem)
	}
	return ids
}

// fence reads a Fence; the field names are the caller's, so that a bare
// Fence payload names "Fence.Lease" rather than "Fence.Fence.Lease".
func (r *reader) fence(lease, table string) Fence {
	return Fence{
		Node:  r.Uvarint(strings.TrimSuffix(lease, "Lease") + "Node"),
		Lease: int64(r.U64(lease)),
		Table: r.Uvarint(table),
	}
}
