package terrain

import "github.com/shardwise/shardwise/errcode"

// Error codes: stable, safe to put on the wire (package errcode).
const (
	// CodeMalformed is the code of bytes that are not a valid chunk
	// encoding or edit data.
	CodeMalformed = "TERRAIN.MALFORMED"
	// CodeInvalid is the code of a value that Check refuses: encoded, it
	// would be malformed.
	CodeInvalid = "TERRAIN.INVALID"
)

var (
	// ErrMalformed matches every error of DecodeChunk, DecodeMarker and
	// Apply. Its detail names the field and, for a chunk, the byte offset.
	ErrMalformed = errcode.New(CodeMalformed, "terrain: malformed")
	// ErrInvalid matches every error of Chunk.Check and Marker.Check.
	ErrInvalid = errcode.New(CodeInvalid, "terrain: invalid")
)
