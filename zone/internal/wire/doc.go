// Package wire is the byte encoding of the messages zone nodes exchange over
// the node link (package link).
//
// # What it owns
//
// The payloads only: the control messages a zone node sends on the link's
// reliable ordered control stream (Subscribe, Intents, Forward, Routes; the
// link's kind is KindSubscribe …), and the payloads of the entries of the
// lossy replication stream (Fence, Update, Snapshot; link.Entry.Kind is
// EntryFence …). Each message M has M.Append, which appends its encoding,
// and DecodeM, which is strict: it accepts exactly the bytes Append writes
// for a value within the limits, and refuses everything else with an error
// matching ErrMalformed (code ZONE.WIRE_MALFORMED) that names the field and
// byte offset that were wrong.
//
// It does not own what the messages mean (the zone runtime: who may send a
// Subscribe, whether a Fence is current, what an intent does), the outbox
// frames that Forward, Update and Snapshot carry (package outbox; opaque
// here), nor the link itself. It does no I/O, starts no goroutines, keeps no
// state.
//
// # Format
//
// Every payload starts with the format version byte (Version, 1); an
// unknown version is malformed. The fields then follow in declaration order
// (Routes' seq is Routes.Version):
//
//	fence    = node:uvarint lease:8 bytes little-endian (int64 bits) table:uvarint
//	chunk    = x:zigzag y:zigzag slab:zigzag   each within int32
//	bytes    = len:uvarint data
//	list(T)  = count:uvarint T*count
//	bool     = one byte, 0 or 1
//	account  = uvarint, never 0 (account.None)
//
//	Fence    = version fence
//	Subscribe= version fence add:list(chunk) remove:list(chunk) resync:list(chunk)
//	Intents  = version fence tick:uvarint list(intent)
//	intent   = kind:uvarint (≤ 0xFFFF) source:8 target:8 epoch:uvarint amount:zigzag data:bytes
//	IntentsAck = version fence for:8 taken:uvarint
//	Forward  = version fence tick:uvarint frames:list(bytes) accounts:list(account frames:list(uvarint))
//	Routes   = version fence seq:uvarint full:bool set:list(account) unset:list(account)
//	Update   = version chunk frames:bytes
//	Snapshot = version chunk list(entity:8 epoch:uvarint seq:uvarint frames:bytes)
//
// Entity ids (Intent.Source and Target, SnapshotEntry.Entity) and the
// lease are fixed 8 bytes: snowflake ids and etcd lease ids have their high
// bits set, so a varint would spend 9–10 bytes on them. Account ids are
// uvarints.
//
// # Invariants
//
//  1. The encoding is canonical. Varints must be minimal, a bool is 0 or 1,
//     and there are no trailing bytes, so for every b a decoder accepts,
//     Append of the decoded value gives back b exactly. The fuzz tests check
//     this.
//  2. Decoded values are in canonical form: every empty slice (list or byte
//     string) decodes as nil, never as an empty non-nil slice. Append writes
//     nil and empty alike, so a value round-trips to reflect.DeepEqual once
//     its empty slices are nil.
//  3. Decoded byte slices (Intent.Data, Forward.Frames, Update.Frames,
//     SnapshotEntry.Frames) alias the input: nothing is copied. Their
//     capacity is clipped to their length, so appending to one never writes
//     into the input, but the caller must not modify the input while it
//     uses the decoded value, and must copy what it keeps beyond the
//     input's lifetime.
//  4. A decoder never panics and never allocates more than a small multiple
//     of its input: a count is refused when it exceeds its limit (MaxChunks
//     …) or when the bytes left could not hold that many of the smallest
//     element, before anything is allocated for it.
//  5. The decoder checks form, plus the few rules that make a message
//     unreadable rather than merely unwelcome: a Forward frame index below
//     len(Frames), account ids valid (not account.None), a full Routes with
//     no Unset. It does not check meaning: duplicate chunks or accounts, a
//     chunk in both Add and Remove, frames nobody is sent, an old Fence are
//     the receiver's to judge.
//  6. Append does not check limits or those rules. A value outside them is
//     a program error of the sender, which must split what it sends; Append
//     encodes such a value anyway and the receiver's decoder refuses it
//     (the tests check each case). Checking in Append would cost every
//     message a second pass and an error return for what only a bug can
//     cause.
//
// Layer: imports only the standard library, account, errcode and torus.
package wire
