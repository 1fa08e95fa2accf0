package worldstore

import (
	"context"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/torus"
)

// Limits every implementation enforces (invariant 4).
const (
	// MaxStateBytes caps Player.State: a module's per-player record
	// (experience, inventory, a pet) is small; a larger one is a bug or an
	// attack, and every save rewrites it whole.
	MaxStateBytes = 64 << 10
	// MaxEditBytes caps Edit.Data: an edit is one change to a chunk (a
	// marker, a block), not a blob.
	MaxEditBytes = 1 << 10
	// MaxEditsPerChunk caps a chunk's revision (see the package doc).
	MaxEditsPerChunk = 1024
	// MaxEpoch is the largest session epoch a player record takes, so that
	// every store can compare epochs as signed 64-bit integers. Session
	// epochs are microsecond timestamps (package directory), far below it.
	MaxEpoch = math.MaxInt64
)

// Player is the durable record of one account.
type Player struct {
	Account account.ID
	// Epoch is the session epoch (a directory.Epoch's value) of the session
	// that wrote the record: 1 to MaxEpoch. It fences the write
	// (invariant 1).
	Epoch uint64
	// Pos is where the player was, as the zone had it; finite, not
	// necessarily normalised (the store knows no world size).
	Pos torus.Pos
	// State is the game module's opaque record, at most MaxStateBytes.
	State []byte
	// Final marks the last save of its session: the one its logout
	// writes. Once a final record of epoch e is stored, every later save
	// of epoch e is refused (invariant 1): a node that saves the session
	// again after it ended (the standby that adopted the master from a
	// checkpoint older than the logout) cannot put older progress over
	// the logout's.
	Final bool
	// Saved is when the store wrote the record, by the store's clock. It
	// is ignored on SavePlayer.
	Saved time.Time
}

// Edit is one player edit of a chunk.
type Edit struct {
	// Kind is the module's edit type; 0 is refused, so a zero Edit is never
	// stored by mistake.
	Kind uint16
	// Data is the module's encoding of the edit, at most MaxEditBytes.
	Data []byte
	// Account made the edit; account.None for an edit of the world itself
	// (a module's scripted change).
	Account account.ID
}

// RevEdit is an edit as stored: its revision in its chunk and when it was
// written, by the store's clock.
type RevEdit struct {
	Rev   uint64
	Edit  Edit
	Saved time.Time
}

// Players is the player half of the store.
type Players interface {
	// LoadPlayer returns account's last saved record, or an error matching
	// ErrNotFound when it was never saved.
	LoadPlayer(ctx context.Context, account account.ID) (Player, error)
	// SavePlayer writes p unless a record with a higher epoch, or a final
	// record of the same epoch, is stored (then a *StaleEpochError); see
	// invariant 1.
	SavePlayer(ctx context.Context, p Player) error
}

// ChunkEdits is the terrain-edit half of the store. A chunk is a normalised
// torus.ChunkPos (torus.World.ChunkOf or NormaliseChunk): the store cannot
// normalise it without the world's size, so two spellings of one chunk
// would be two logs; negative X or Y is refused as not normalised.
type ChunkEdits interface {
	// AppendEdit writes e as the chunk's edit expectRev+1 and returns that
	// revision, if the chunk's revision is expectRev (0: no edits yet);
	// otherwise a *ConflictError with the current revision. A full chunk
	// gives ErrChunkFull.
	AppendEdit(ctx context.Context, chunk torus.ChunkPos, expectRev uint64, e Edit) (rev uint64, err error)
	// Edits returns the chunk's current revision and its edits with
	// revision > sinceRev, in revision order (none when sinceRev ≥ rev; a
	// caller that finds rev < sinceRev holds edits the store no longer
	// has, for example after a restore from backup). A chunk never edited
	// has revision 0.
	Edits(ctx context.Context, chunk torus.ChunkPos, sinceRev uint64) (rev uint64, edits []RevEdit, err error)
}

// Store is the world store: both halves and Close, which is idempotent and
// makes every later call return ErrClosed.
type Store interface {
	Players
	ChunkEdits
	io.Closer
}

// ValidateAccount refuses account.None, which names no player.
func ValidateAccount(field string, id account.ID) error {
	if !id.Valid() {
		return invalid(field, "is 0 (account.None), not an account")
	}
	return nil
}

// ValidatePlayer reports the first field of p a store refuses. Saved is not
// checked: the store sets it.
func ValidatePlayer(p Player) error {
	if err := ValidateAccount("Player.Account", p.Account); err != nil {
		return err
	}
	if p.Epoch == 0 {
		return invalid("Player.Epoch", "is 0; session epochs start at 1")
	}
	if p.Epoch > MaxEpoch {
		return invalid("Player.Epoch", "is "+strconv.FormatUint(p.Epoch, 10)+", above MaxEpoch (2^63-1)")
	}
	if !p.Pos.Finite() {
		return invalid("Player.Pos", "is "+formatPos(p.Pos)+", not finite")
	}
	if len(p.State) > MaxStateBytes {
		return invalid("Player.State", "is "+strconv.Itoa(len(p.State))+" bytes, more than MaxStateBytes ("+strconv.Itoa(MaxStateBytes)+")")
	}
	return nil
}

// ValidateChunk refuses a chunk that is not normalised on x or y.
func ValidateChunk(c torus.ChunkPos) error {
	if c.X < 0 || c.Y < 0 {
		return invalid("chunk", "is "+formatChunk(c)+", not normalised (X and Y must be ≥ 0; use torus.World.NormaliseChunk)")
	}
	return nil
}

// ValidateEdit reports the first field of e a store refuses.
func ValidateEdit(e Edit) error {
	if e.Kind == 0 {
		return invalid("Edit.Kind", "is 0, which is reserved")
	}
	if len(e.Data) > MaxEditBytes {
		return invalid("Edit.Data", "is "+strconv.Itoa(len(e.Data))+" bytes, more than MaxEditBytes ("+strconv.Itoa(MaxEditBytes)+")")
	}
	return nil
}

func formatPos(p torus.Pos) string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return "(" + f(p.X) + ", " + f(p.Y) + ", " + f(p.Z) + ")"
}

func formatChunk(c torus.ChunkPos) string {
	return "(" + strconv.Itoa(int(c.X)) + ", " + strconv.Itoa(int(c.Y)) + ", slab " + strconv.Itoa(int(c.Slab)) + ")"
}
