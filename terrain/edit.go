package terrain

import (
	"fmt"

	"github.com/shardwise/shardwise/account"
)

// Edit kinds. Kind 0 is never valid. Kinds below FirstGameKind are
// terrain's (KindMarker is the only one so far); a game module numbers its
// own from FirstGameKind up. Apply and every decoder carry kinds they do
// not know through unchanged, so a game can add kinds without a new
// format version.
const (
	KindMarker    uint16 = 1
	FirstGameKind uint16 = 0x100
)

// Edit is one player edit of a chunk column, as the world store keeps it
// and a client receives it: a kind, the kind's data, and the account that
// made it (account.None for the game itself). Its fields are those of the
// world store's edit, so one converts to the other.
type Edit struct {
	Kind    uint16
	Data    []byte
	Account account.ID
}

// MarkerDataLen is the length of a marker edit's Data.
const MarkerDataLen = 2

// Marker is the reference edit kind (KindMarker): a marker of a small type
// on the ground of one heightmap cell. Cell (X, Y) is the square between
// samples (X, Y) and (X+1, Y+1); X and Y are in [0, Cells).
//
// A marker replaces whatever marker its cell had; Type 0 removes it. So a
// cell shows the marker of its last edit in revision order, and removal
// needs no kind of its own.
type Marker struct {
	X, Y uint8
	Type uint8
}

// Check reports whether m can be encoded: an error matching ErrInvalid
// when X or Y is outside [0, Cells).
func (m Marker) Check() error {
	if m.X >= Cells || m.Y >= Cells {
		return ErrInvalid.Wrap("marker cell (%d, %d) outside [0, %d)", m.X, m.Y, Cells)
	}
	return nil
}

// AppendData appends m's Data (see the package doc's format) to dst. It
// does not check m: a cell outside [0, Cells) wraps into it.
func (m Marker) AppendData(dst []byte) []byte {
	// Cells is 16, so a cell coordinate is a nibble.
	return append(dst, m.Y<<4|m.X&0x0F, m.Type)
}

// Edit returns m as an edit by author, after Check.
func (m Marker) Edit(author account.ID) (Edit, error) {
	if err := m.Check(); err != nil {
		return Edit{}, err
	}
	return Edit{Kind: KindMarker, Data: m.AppendData(make([]byte, 0, MarkerDataLen)), Account: author}, nil
}

// DecodeMarker decodes the Data of a KindMarker edit: exactly
// MarkerDataLen bytes, all of whose values are valid.
func DecodeMarker(data []byte) (Marker, error) {
	if len(data) != MarkerDataLen {
		return Marker{}, ErrMalformed.Wrap("marker data of %d bytes, want %d", len(data), MarkerDataLen)
	}
	return Marker{X: data[0] & 0x0F, Y: data[0] >> 4, Type: data[1]}, nil
}

// Surface is a chunk column as a client shows it: the base heights with
// the edits applied.
type Surface struct {
	Heights Heights
	// Markers holds the type of the marker on cell (x, y) at y*Cells + x;
	// 0 is no marker.
	Markers [Cells * Cells]uint8
}

// MarkerAt returns the type of the marker on cell (x, y), 0 for none.
func (s *Surface) MarkerAt(x, y int) uint8 { return s.Markers[y*Cells+x] }

// Apply returns the surface a client sees: base with edits applied in
// order (the world store's revision order). Markers replace the marker of
// their cell (type 0 removes it); kinds other than KindMarker are the
// game's and are skipped, to be applied by the game's own code on top. An
// error (matching ErrMalformed, naming the edit) means a marker's Data does
// not decode; the edits of a decoded Chunk always do.
func Apply(base Heights, edits []Edit) (Surface, error) {
	s := Surface{Heights: base}
	for i, e := range edits {
		if e.Kind != KindMarker {
			continue
		}
		m, err := DecodeMarker(e.Data)
		if err != nil {
			return Surface{}, fmt.Errorf("edit %d: %w", i, err)
		}
		s.Markers[int(m.Y)*Cells+int(m.X)] = m.Type
	}
	return s, nil
}
