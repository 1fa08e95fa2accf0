// Package handoff is the byte format of an entity handoff between zone
// nodes, and the checks on it.
//
// # What it owns
//
// The payloads of the three control messages of a handoff, sent on the
// link's reliable ordered control stream beside zone's own kinds
// (0x5A01..0x5A04): Transfer (KindTransfer), Ack (KindAck) and Refuse
// (KindRefuse); the Snapshot of an entity a Transfer carries; the limits on
// them; and the reason codes a Refuse names. Each message M has M.Append,
// which appends its encoding, DecodeM, which is strict: it accepts exactly
// the bytes Append writes for a value within the limits, and refuses
// everything else with an error matching ErrMalformed (code
// HANDOFF.MALFORMED) that names the field and byte offset that were wrong,
// and M.Check, which says before sending whether the receiver's decoder
// would accept the value (an error matching ErrInvalid, code
// HANDOFF.INVALID). NewSnapshot builds a checked Snapshot from a component
// set. AppendRawSnapshots checks a Transfer as DecodeTransfer does but
// keeps each snapshot as its bytes (RawSnapshot, decoded later by its
// Decode), for a holder of snapshots it may never use: a checkpoint's
// standby.
//
// It does not own the protocol (package zone: when to freeze, what to do on
// a Refuse, timeouts, retries), the component codecs whose bytes a
// Component carries (each component's zone.Codec; opaque here), nor the
// link. It does no I/O, starts no goroutines, keeps no state.
//
// # The handoff these messages serve
//
// The protocol lives in zone; the format is shaped by it:
//
//  1. The source freezes the entity (no system runs on it; intents for it
//     wait) and takes its Snapshot: every handed-over component through its
//     codec, at epoch e+1, where e is the epoch the entity had on the source.
//  2. The source sends a Transfer to the target on the ordered control
//     stream, so it arrives after every earlier message of the source about
//     that entity. One Transfer may carry several entities that move as a
//     unit (a master and its pet) or a batch (a region move).
//  3. The target, if it owns the entity's position under Snapshot.Table or a
//     later table and the id is not live there, creates the same entity id
//     at epoch e+1 from the snapshot, and answers with an Ack naming
//     (entity, e+1). Otherwise it answers with a Refuse naming (entity, e+1)
//     and a reason code; the entity stays the source's.
//  4. On the Ack the source evicts its copy (no destroy: the entity lives
//     on). On a Refuse it unfreezes it, still at epoch e.
//
// Every message names the entity's epoch, which rises by one per transfer,
// so an answer to an old Transfer can never be taken for an answer to a
// newer one, and replication entries older than the current owner's epoch
// are recognisably stale.
//
// # Format
//
// Every payload starts with the format version byte (Version, 1); an
// unknown version is malformed. The fields then follow in declaration
// order:
//
//	bytes     = len:uvarint data
//	list(T)   = count:uvarint T*count
//	ref       = entity:8 bytes little-endian epoch:uvarint
//
//	Transfer  = version entities:list(snapshot)      count ≥ 1
//	snapshot  = entity:8 bytes little-endian epoch:uvarint table:uvarint components:list(component)
//	component = name:bytes data:bytes
//	Ack       = version entities:list(ref)           count ≥ 1
//	Refuse    = version code:bytes entities:list(ref) count ≥ 1
//
// Entity ids are fixed 8 bytes: they are snowflake ids (package entityid)
// with the high bits set, so a varint would spend 9–10 bytes on them.
// Epochs and table versions are small and rise slowly: uvarints, 1–2 bytes.
//
// Ack and Refuse carry a list, not one entity each: a target answers a
// Transfer with one Ack naming every entity it created and one Refuse per
// reason for the rest, so a region move of thousands of entities costs one
// or two control messages back, not thousands, and the source can match an
// answer to its Transfer as a whole. Whether a unit (a master and its pet)
// may be taken in part is the protocol's rule, not the format's.
//
// # Limits
//
// MaxEntities snapshots in one Transfer, MaxComponents components in one
// snapshot, MaxNameLen bytes of a component name, MaxComponentData bytes of
// one component's data, MaxSnapshotBytes bytes of one encoded snapshot
// (Snapshot.Size), MaxRefs entities in an Ack or a Refuse and MaxCodeLen
// bytes of a reason code. MaxSnapshotBytes (256 KiB) is a ceiling against
// hostile or runaway input, not a budget: BigWorld warns when an entity's
// handoff data passes 10 KiB, and our goal is a player with its pet in
// at most 2 KiB together. The link caps the whole payload.
//
// # Invariants
//
//  1. The encoding is canonical. Varints must be minimal, names strictly
//     ascending, and there are no trailing bytes, so for every b a decoder
//     accepts, Append of the decoded value gives back b exactly. The fuzz
//     tests check this.
//  2. Decoded values are in canonical form: an empty Snapshot.Components
//     or Component.Data decodes as nil, never as an empty non-nil slice.
//     Append writes nil and empty alike.
//  3. Decoded byte slices (Component.Data) alias the input: nothing is
//     copied. Their capacity is clipped to their length, so appending to
//     one never writes into the input, but the caller must not modify the
//     input while it uses the decoded value, and must copy what it keeps
//     beyond the input's lifetime (a component codec that decodes into a
//     Go value already has). Names and the reason code are strings, so
//     they are copied.
//  4. A decoder never panics and never allocates more than a small multiple
//     of its input: a count is refused when it exceeds its limit or when
//     the bytes left could not hold that many of the smallest element,
//     before anything is allocated for it.
//  5. The decoder checks form, plus the rules that make a message
//     unreadable rather than unwelcome: entity ids and epochs are not 0,
//     component names are non-empty valid UTF-8, sorted and distinct (so a
//     component is never set twice), a list of entities is not empty, a
//     reason code is non-empty and spelled like an errcode code
//     ([A-Z0-9_.]). It does not check meaning: the same entity twice in
//     one Transfer, an unknown component name or reason code, an epoch or
//     table older than the receiver expects are the receiver's to judge.
//  6. Append does not check. A value outside the limits or rules is a
//     program error of the sender; Append encodes it anyway and the
//     receiver's decoder refuses it. A sender that builds values from
//     untrusted sizes (a component that can grow) calls Check, or builds
//     snapshots with NewSnapshot, which checks.
//
// Layer 0: imports only the standard library and errcode.
package handoff
