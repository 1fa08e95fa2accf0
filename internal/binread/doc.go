// Package binread is the reader the binary payload decoders share
// (handoff, zone/internal/wire and the client input inside zone's
// reserved intents): a cursor over one payload that names the field and
// the byte offset of the first thing wrong with it.
//
// It owns the primitives the formats are built from: a leading version
// byte, minimal uvarints, fixed 4- and 8-byte little-endian words, list
// counts and length-prefixed spans, and the trailing-bytes check. It does not own any
// message layout, limit or sentinel: each decoder package embeds a Reader
// in its own reader type, adds the readers of its own types on top, and
// passes in the sentinel its errors wrap, so its ErrMalformed and error
// code stay its own. It imports only the standard library and errcode.
//
// Invariants a Reader keeps:
//
//  1. The first failure sticks. Every later read returns zero and consumes
//     nothing, so a decoder reads straight through and checks Finish once.
//  2. A count is checked against its limit and against the bytes left
//     (minSize bytes an element) before it is returned, and is 0 after a
//     failure, so a hostile count allocates nothing.
//  3. A span aliases the input with its capacity clipped, so appending to
//     it cannot write over the rest of the payload; an empty span is nil.
//  4. Errors read "<sentinel message>: <Msg>.<field> at byte <offset>:
//     <detail>", where each "[]" in the field stands for I, then J, and
//     Suffix (when set) follows the field after a dot. Field names are
//     rendered only on failure, so the happy path formats nothing. The
//     offset is where the failing item starts.
package binread
