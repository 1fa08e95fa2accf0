package wire

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

// Version is the format version byte every payload starts with.
const Version = 1

// Control message kinds (the kind of a link control message).
const (
	KindSubscribe  uint32 = 0x5A01 // observer → simulating node: chunk subscription changes
	KindIntents    uint32 = 0x5A02 // intents addressed to entities the receiver simulates
	KindForward    uint32 = 0x5A03 // already-encoded frames for accounts routed to the receiver
	KindRoutes     uint32 = 0x5A04 // accounts whose messages the sender receives
	KindPlayer     uint32 = 0x5A05 // the gateway role: a player brought in, taken over, or not found
	KindTerrain    uint32 = 0x5A06 // a chunk column's edits reached a new revision
	KindIntentsAck uint32 = 0x5A07 // receiver of intents → their sender: how many it has taken
)

// Replication entry kinds (link.Entry.Kind).
const (
	EntryFence    uint32 = 1 // first entry of every batch: the sender's fence; Payload = Fence
	EntryUpdate   uint32 = 2 // Entity/Epoch/Sequence in the link.Entry; Payload = Update
	EntrySnapshot uint32 = 3 // Payload = Snapshot
)

// Limits the decoders enforce. A count above its limit is malformed.
const (
	MaxChunks          = 1 << 16  // chunks in each of Subscribe's lists
	MaxIntents         = 1 << 16  // intents in one Intents
	MaxIntentData      = 1 << 10  // bytes of one Intent.Data
	MaxFrames          = 1 << 16  // Forward.Frames, and indices in one AccountFrames
	MaxAccounts        = 1 << 16  // Forward.Accounts, and each of Routes' lists
	MaxSnapshotEntries = 1 << 16  // entries in one Snapshot
	MaxPlayerState     = 64 << 10 // bytes of one Player.State (worldstore.MaxStateBytes)
)

// CodeMalformed is the stable error code of bytes that are not a valid
// payload.
const CodeMalformed = "ZONE.WIRE_MALFORMED"

// ErrMalformed matches (errors.Is) every error a decoder returns. The
// wrapped message names the payload type, the field and the byte offset.
var ErrMalformed = errcode.New(CodeMalformed, "zone/wire: malformed payload")

// Fence names the sender and what allowed it to send: its coord lease and
// the region table version it held.
type Fence struct {
	Node  uint64 // the sender's node number (its coord id): its key as a node subscriber
	Lease int64  // the sender's coord lease id
	Table uint64 // the region table version the sender held
}

// Subscribe changes which chunks an observer receives from the node that
// simulates them.
type Subscribe struct {
	Fence  Fence
	Add    []torus.ChunkPos // start receiving these chunks
	Remove []torus.ChunkPos // stop receiving these chunks
	Resync []torus.ChunkPos // already subscribed, state suspect: send a snapshot of each
}

// Intent is one request addressed to an entity the receiver simulates.
type Intent struct {
	Kind   uint16 // module-defined
	Source uint64 // entity id of the requester
	Target uint64 // entity id the intent is addressed to
	// Epoch is the target's epoch as the sender knew it (its ghost's, or
	// its own if it handed the target on): a node that simulates the
	// target at a lower epoch is a stale owner and drops the intent.
	Epoch  uint64
	Amount int64
	Data   []byte // module-defined, may be empty, at most MaxIntentData bytes
}

// Intents carries the intents of one tick of the sender.
type Intents struct {
	Fence Fence
	Tick  uint64
	List  []Intent // at most MaxIntents
}

// PlayerOp says what a Player message asks or answers.
type PlayerOp uint8

// Player ops.
const (
	// PlayerSpawn (gateway → the owner of Pos): bring the account's player
	// in at Pos with the ids Master and Pet, its module State, for the
	// session Session.
	PlayerSpawn PlayerOp = 1
	// PlayerTakeover (a new session's gateway → every live node): session
	// Session is the account's newest; hand me its player if you are the
	// older session's gateway or simulate its master.
	PlayerTakeover PlayerOp = 2
	// PlayerTaken (answer): the player is Master and Pet, standing in
	// Chunk; it now answers to Session.
	PlayerTaken PlayerOp = 3
	// PlayerNotHere (answer): no player of the account here, and no save
	// of one still on its way to the world store.
	PlayerNotHere PlayerOp = 4
	// PlayerSaving (answer): the player logged out here and its record is
	// still on its way to the world store; a PlayerNotHere follows once it
	// has landed (or failed), and only then may the asker load it.
	PlayerSaving PlayerOp = 5
)

// Player is one message of the gateway role about an account's player.
// Every field is always encoded; those an op does not use are zero.
type Player struct {
	Fence       Fence
	Op          PlayerOp   // one of the Player* ops
	Account     account.ID // valid
	Session     uint64
	Master, Pet uint64
	Pos         torus.Pos // finite
	Chunk       torus.ChunkPos
	State       []byte // at most MaxPlayerState bytes
}

// Terrain tells the receiver that the edits of the column Chunk (its X and
// Y; Slab 0) reached revision Rev in the world store.
type Terrain struct {
	Fence Fence
	Chunk torus.ChunkPos
	Rev   uint64
}

// IntentsAck confirms to a node the intents it sent: Taken is how many
// of them the acking node has taken in, over the life of the receiver's
// lease For (cumulative, so a lost or late ack is made good by the next).
type IntentsAck struct {
	Fence Fence
	For   int64 // the lease of the node the count is for
	Taken uint64
}

// Forward carries already-encoded frames for accounts routed to the
// receiver. A frame several accounts receive is sent once.
type Forward struct {
	Fence    Fence
	Tick     uint64
	Frames   [][]byte        // distinct frames, each sent once per message; at most MaxFrames
	Accounts []AccountFrames // who gets which; at most MaxAccounts
}

// AccountFrames says which frames of a Forward one account receives.
type AccountFrames struct {
	Account account.ID // valid (not account.None)
	Frames  []uint32   // indices into Forward.Frames, in delivery order; at most MaxFrames
}

// Routes tells the receiver which accounts' messages the sender receives.
type Routes struct {
	Fence   Fence
	Version uint64       // rises with each Routes the sender sends
	Full    bool         // Set is the whole set; forget everything else from this sender
	Set     []account.ID // now routed to the sender; at most MaxAccounts, each valid
	Unset   []account.ID // no longer routed to the sender; empty when Full
}

// Update is the payload of an EntryUpdate: the outbox frames of one entity
// (named by the link.Entry) in one chunk.
type Update struct {
	Chunk  torus.ChunkPos
	Frames []byte // outbox frames of one entity (opaque here)
}

// Snapshot is the payload of an EntrySnapshot: the whole state of one chunk.
type Snapshot struct {
	Chunk   torus.ChunkPos
	Entries []SnapshotEntry // at most MaxSnapshotEntries
}

// SnapshotEntry is one entity of a Snapshot.
type SnapshotEntry struct {
	Entity uint64
	Epoch  uint64
	Seq    uint64
	Frames []byte // outbox frames of the entity (opaque here)
}

// Append appends the encoding of f as a replication payload (EntryFence).
func (f Fence) Append(dst []byte) []byte {
	return appendFence(append(dst, Version), f)
}

// Append appends the encoding of m. It does not check limits (see the
// package doc, invariant 6).
func (m Subscribe) Append(dst []byte) []byte {
	dst = appendFence(append(dst, Version), m.Fence)
	dst = appendChunks(dst, m.Add)
	dst = appendChunks(dst, m.Remove)
	return appendChunks(dst, m.Resync)
}

// Append appends the encoding of m. It does not check limits (see the
// package doc, invariant 6).
func (m Intents) Append(dst []byte) []byte {
	dst = appendFence(append(dst, Version), m.Fence)
	dst = binary.AppendUvarint(dst, m.Tick)
	dst = binary.AppendUvarint(dst, uint64(len(m.List)))
	for _, in := range m.List {
		dst = binary.AppendUvarint(dst, uint64(in.Kind))
		dst = binary.LittleEndian.AppendUint64(dst, in.Source)
		dst = binary.LittleEndian.AppendUint64(dst, in.Target)
		dst = binary.AppendUvarint(dst, in.Epoch)
		dst = binary.AppendVarint(dst, in.Amount)
		dst = appendBytes(dst, in.Data)
	}
	return dst
}

// Append appends the encoding of m. It does not check limits or frame
// indices (see the package doc, invariant 6).
func (m Forward) Append(dst []byte) []byte {
	dst = appendFence(append(dst, Version), m.Fence)
	dst = binary.AppendUvarint(dst, m.Tick)
	dst = binary.AppendUvarint(dst, uint64(len(m.Frames)))
	for _, f := range m.Frames {
		dst = appendBytes(dst, f)
	}
	dst = binary.AppendUvarint(dst, uint64(len(m.Accounts)))
	for _, a := range m.Accounts {
		dst = binary.AppendUvarint(dst, uint64(a.Account))
		dst = binary.AppendUvarint(dst, uint64(len(a.Frames)))
		for _, i := range a.Frames {
			dst = binary.AppendUvarint(dst, uint64(i))
		}
	}
	return dst
}

// Append appends the encoding of m. It does not check limits, account
// validity or that a full Routes has no Unset (see the package doc,
// invariant 6).
func (m Routes) Append(dst []byte) []byte {
	dst = appendFence(append(dst, Version), m.Fence)
	dst = binary.AppendUvarint(dst, m.Version)
	full := byte(0)
	if m.Full {
		full = 1
	}
	dst = append(dst, full)
	dst = appendAccounts(dst, m.Set)
	return appendAccounts(dst, m.Unset)
}

// Append appends the encoding of m.
func (m Update) Append(dst []byte) []byte {
	return append(AppendUpdateHead(dst, m.Chunk, len(m.Frames)), m.Frames...)
}

// MaxUpdateHead is the most bytes AppendUpdateHead appends.
const MaxUpdateHead = 1 + 3*binary.MaxVarintLen64 + binary.MaxVarintLen64

// AppendUpdateHead appends what precedes an Update's frames: followed by
// framesLen bytes of frames, it is the Update's encoding. A publisher
// that gathers an entity's frames from a flush writes them after it in
// place, without building the Update first.
func AppendUpdateHead(dst []byte, chunk torus.ChunkPos, framesLen int) []byte {
	dst = appendChunk(append(dst, Version), chunk)
	return binary.AppendUvarint(dst, uint64(framesLen))
}

// Append appends the encoding of m. It does not check limits (see the
// package doc, invariant 6).
func (m Snapshot) Append(dst []byte) []byte {
	// Room for all of it at once: a snapshot is encoded for every chunk
	// a peer subscribes to, and growing it entry by entry was most of a
	// run's allocations. An upper bound: the head, then per entry the id,
	// two varints and the frames' length and bytes.
	n := 1 + 3*binary.MaxVarintLen64 + binary.MaxVarintLen64
	for _, e := range m.Entries {
		n += 8 + 3*binary.MaxVarintLen64 + len(e.Frames)
	}
	dst = slices.Grow(dst, n)
	dst = appendChunk(append(dst, Version), m.Chunk)
	dst = binary.AppendUvarint(dst, uint64(len(m.Entries)))
	for _, e := range m.Entries {
		dst = binary.LittleEndian.AppendUint64(dst, e.Entity)
		dst = binary.AppendUvarint(dst, e.Epoch)
		dst = binary.AppendUvarint(dst, e.Seq)
		dst = appendBytes(dst, e.Frames)
	}
	return dst
}

// Append appends the encoding of m. It does not check it (see the
// package doc, invariant 6).
func (m Player) Append(dst []byte) []byte {
	dst = appendFence(append(dst, Version), m.Fence)
	dst = append(dst, byte(m.Op))
	dst = binary.AppendUvarint(dst, uint64(m.Account))
	dst = binary.AppendUvarint(dst, m.Session)
	dst = binary.LittleEndian.AppendUint64(dst, m.Master)
	dst = binary.LittleEndian.AppendUint64(dst, m.Pet)
	for _, v := range [3]float64{m.Pos.X, m.Pos.Y, m.Pos.Z} {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
	}
	dst = appendChunk(dst, m.Chunk)
	return appendBytes(dst, m.State)
}

// Append appends the encoding of m.
func (m Terrain) Append(dst []byte) []byte {
	dst = appendChunk(appendFence(append(dst, Version), m.Fence), m.Chunk)
	return binary.AppendUvarint(dst, m.Rev)
}

// Append appends the encoding of m.
func (m IntentsAck) Append(dst []byte) []byte {
	dst = appendFence(append(dst, Version), m.Fence)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(m.For))
	return binary.AppendUvarint(dst, m.Taken)
}

func appendFence(dst []byte, f Fence) []byte {
	dst = binary.AppendUvarint(dst, f.Node)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.Lease))
	return binary.AppendUvarint(dst, f.Table)
}

func appendChunk(dst []byte, c torus.ChunkPos) []byte {
	dst = binary.AppendVarint(dst, int64(c.X))
	dst = binary.AppendVarint(dst, int64(c.Y))
	return binary.AppendVarint(dst, int64(c.Slab))
}

func appendChunks(dst []byte, cs []torus.ChunkPos) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(cs)))
	for _, c := range cs {
		dst = appendChunk(dst, c)
	}
	return dst
}

func appendAccounts(dst []byte, ids []account.ID) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		dst = binary.AppendUvarint(dst, uint64(id))
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}
