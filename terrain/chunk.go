package terrain

import (
	"encoding/binary"
	"math"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/internal/binread"
)

// Version is the format version byte every chunk encoding starts with.
const Version = 1

// Limits DecodeChunk enforces; Check enforces the same. A count or length
// above its limit is malformed. They are the world store's
// (worldstore.MaxEditsPerChunk and MaxEditBytes), so every chunk the store
// holds can be sent.
const (
	MaxEdits    = 1024 // edits in one Chunk
	MaxEditData = 1024 // bytes of one Edit.Data
)

// MaxChunkBytes is the longest encoding there is (1 064 826 bytes): the
// longest column, revision and heights (3 bytes a sample), and MaxEdits
// edits of the longest kind, account and data. A client can size a buffer
// by it; DecodeChunk refuses anything longer before reading it.
const MaxChunkBytes = 1 + 5 + 5 + 10 + Side*Side*3 + 2 + MaxEdits*(3+10+2+MaxEditData)

// Chunk is a chunk column as a client receives it: the base heights, the
// edits on top in revision order, and the revision of the last of them.
type Chunk struct {
	// X and Y name the column (a normalised torus.ChunkPos without its
	// slab): each in [0, 2³¹).
	X, Y int32
	// Revision is the world store's revision of the column's edits (the
	// number of edits it has had). The format carries it uninterpreted; a
	// client keeps it to match later changes.
	Revision uint64
	Heights  Heights
	// Edits are the column's edits in revision order; nil when there are
	// none (a decoded Chunk never has an empty non-nil slice).
	Edits []Edit
}

// Smallest encodings, which bound a count by the bytes left.
const (
	minEdit   = 1 + 1 + 1          // kind, account, data length
	maxDelta  = 2 * math.MaxUint16 // zigzag(65535), the largest step between two int16
	minHeight = math.MinInt16
	maxHeight = math.MaxInt16
)

// Check reports whether DecodeChunk would accept c's encoding: an error
// matching ErrInvalid that names the first field outside the limits.
func (c *Chunk) Check() error {
	if c.X < 0 || c.Y < 0 {
		return ErrInvalid.Wrap("column (%d, %d) is not normalised", c.X, c.Y)
	}
	if len(c.Edits) > MaxEdits {
		return ErrInvalid.Wrap("%d edits exceed %d", len(c.Edits), MaxEdits)
	}
	for i, e := range c.Edits {
		switch {
		case e.Kind == 0:
			return ErrInvalid.Wrap("Edits[%d]: kind 0", i)
		case len(e.Data) > MaxEditData:
			return ErrInvalid.Wrap("Edits[%d]: %d bytes of data exceed %d", i, len(e.Data), MaxEditData)
		case e.Kind == KindMarker && len(e.Data) != MarkerDataLen:
			return ErrInvalid.Wrap("Edits[%d]: marker data of %d bytes, want %d", i, len(e.Data), MarkerDataLen)
		}
	}
	return nil
}

// size returns the length of c's encoding, at most MaxChunkBytes when c
// passes Check.
func (c *Chunk) size() int {
	n := 1 + uvarintLen(uint64(uint32(c.X))) + uvarintLen(uint64(uint32(c.Y))) + uvarintLen(c.Revision)
	for k := range c.Heights {
		n += uvarintLen(zigzag(int64(c.Heights[k]) - int64(predict(&c.Heights, k))))
	}
	n += uvarintLen(uint64(len(c.Edits)))
	for _, e := range c.Edits {
		n += uvarintLen(uint64(e.Kind)) + uvarintLen(uint64(e.Account)) + uvarintLen(uint64(len(e.Data))) + len(e.Data)
	}
	return n
}

// AppendChunk appends the encoding of c (see the package doc) to dst. It
// does not check c: a sender that builds chunks from untrusted sizes calls
// Check first, or the receiver's decoder refuses them.
func AppendChunk(dst []byte, c *Chunk) []byte {
	dst = append(dst, Version)
	dst = binary.AppendUvarint(dst, uint64(uint32(c.X)))
	dst = binary.AppendUvarint(dst, uint64(uint32(c.Y)))
	dst = binary.AppendUvarint(dst, c.Revision)
	for j := range Side {
		row := c.Heights[j*Side : j*Side+Side]
		prev := int64(predict(&c.Heights, j*Side))
		for _, v := range row {
			u := zigzag(int64(v) - prev)
			prev = int64(v)
			if u < 0x80 { // the common case on smooth ground: one byte
				dst = append(dst, byte(u))
				continue
			}
			dst = binary.AppendUvarint(dst, u)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(c.Edits)))
	for _, e := range c.Edits {
		dst = binary.AppendUvarint(dst, uint64(e.Kind))
		dst = binary.AppendUvarint(dst, uint64(e.Account))
		dst = binary.AppendUvarint(dst, uint64(len(e.Data)))
		dst = append(dst, e.Data...)
	}
	return dst
}

// DecodeChunk decodes a chunk encoding. It is strict: it accepts exactly
// the bytes AppendChunk writes for a Chunk that passes Check, and refuses
// everything else with an error matching ErrMalformed (code
// TERRAIN.MALFORMED) that names the field and byte offset. Each Edit.Data
// aliases b (nil when empty), with its capacity clipped.
func DecodeChunk(b []byte) (Chunk, error) {
	var c Chunk
	r := binread.New(b, "Chunk", ErrMalformed)
	if len(b) > MaxChunkBytes {
		r.Fail("", "%d bytes exceed %d", len(b), MaxChunkBytes)
		return Chunk{}, r.Err()
	}
	r.Version(Version)
	c.X = column(&r, "X")
	c.Y = column(&r, "Y")
	c.Revision = r.Uvarint("Revision")
	for k := range c.Heights {
		if r.Err() != nil {
			break
		}
		r.I = k
		at := r.Offset()
		u := r.Uvarint("Heights[]")
		if u > maxDelta {
			r.FailAt(at, "Heights[]", "delta of %d dm exceeds any two heights", unzigzag(u))
			break
		}
		v := int64(predict(&c.Heights, k)) + unzigzag(u)
		if v < minHeight || v > maxHeight {
			r.FailAt(at, "Heights[]", "height %d dm outside int16", v)
			break
		}
		c.Heights[k] = int16(v)
	}
	if n := r.Count("Edits", 0, MaxEdits, minEdit); n > 0 {
		c.Edits = make([]Edit, n)
		for i := range c.Edits {
			r.I = i
			edit(&r, &c.Edits[i])
		}
	}
	if err := r.Finish(); err != nil {
		return Chunk{}, err
	}
	return c, nil
}

// column reads a chunk coordinate: at most 2³¹ − 1.
func column(r *binread.Reader, field string) int32 {
	at := r.Offset()
	v := r.Uvarint(field)
	if v > math.MaxInt32 {
		r.FailAt(at, field, "%d exceeds 2^31-1", v)
		return 0
	}
	return int32(v)
}

// edit reads Edits[r.I] into e.
func edit(r *binread.Reader, e *Edit) {
	at := r.Offset()
	kind := r.Uvarint("Edits[].Kind")
	switch {
	case r.Err() != nil:
		return
	case kind == 0:
		r.FailAt(at, "Edits[].Kind", "kind 0")
		return
	case kind > math.MaxUint16:
		r.FailAt(at, "Edits[].Kind", "kind %d exceeds 65535", kind)
		return
	}
	e.Kind = uint16(kind)
	e.Account = account.ID(r.Uvarint("Edits[].Account"))
	at = r.Offset()
	e.Data = r.Span("Edits[].Data", MaxEditData)
	if r.Err() == nil && e.Kind == KindMarker && len(e.Data) != MarkerDataLen {
		r.FailAt(at, "Edits[].Data", "marker data of %d bytes, want %d", len(e.Data), MarkerDataLen)
	}
}

// predict returns the height sample k is encoded against: its west
// neighbour, or for the first sample of a row the first of the row below,
// or 0 for the first sample of all.
func predict(h *Heights, k int) int16 {
	switch {
	case k%Side != 0:
		return h[k-1]
	case k != 0:
		return h[k-Side]
	}
	return 0
}

// zigzag maps a signed delta onto an unsigned one, small magnitudes to
// small values: 0, −1, 1, −2, … → 0, 1, 2, 3, …
func zigzag(d int64) uint64 { return uint64(d<<1) ^ uint64(d>>63) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// uvarintLen returns the length of v's uvarint encoding.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
