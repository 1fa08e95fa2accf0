// Package directory is the session directory: for each logged-in account
// (an account.ID; account.None is refused with ErrInvalidArgument), the
// gateway node that holds its socket, the node that simulates its master
// entity, the session epoch and the lease that keeps the entry alive.
//
// The directory is a cache, not a fence against two writers of an entity
// (that is the region table in etcd, package coord, deliberately another
// store). A stale entry costs one extra hop or one dropped message. What it
// does fence is the session: every new connection of an account gets a new,
// higher epoch, which displaces the previous connection, and every later
// write names the epoch that allowed it, so a write from a displaced gateway
// is refused (ErrStaleEpoch), never applied.
//
// It owns:
//   - the Directory port (Connect, Renew, SetMaster, Lookup, Release,
//     ClaimToken, the cluster's single-use record of login tokens, and
//     ArmResume, Resume and RevokeResume, the sessions' resume
//     credentials: the hash of each session's latest secret, spent by a
//     compare-and-set on the session epoch);
//   - Memory, the in-process implementation for one machine (injected
//     clock); package directory/redisdir is the Valkey/Redis one, and
//     directory/dirtest the contract suite both pass;
//   - Instrument, the wrapper that counts operations and stale refusals
//     in Prometheus collectors the user registers.
//
// It does not own sockets, telling a displaced gateway to close, or token
// signatures (package logintoken; the directory only remembers used ids).
//
// Invariants:
//  1. Epochs of an account strictly increase for as long as the store keeps
//     its data: each Connect takes max(previous+1, store time in µs), read
//     and written in one atomic step. The time floor keeps them increasing
//     across a loss of the store's data too, as long as its clock does not
//     go back further than the gap (see the directory section of docs/decisions.md).
//  2. Renew, SetMaster and Release apply only when the caller's epoch is the
//     entry's current epoch; otherwise they change nothing and return
//     ErrStaleEpoch (with the current epoch) or ErrNotFound (no live entry).
//  3. The master route version of an account never goes backwards while the
//     store keeps its data: SetMaster applies only a higher version (or
//     repeats the same node at the same version), and a new session starts
//     with no master but the previous version as its floor.
//  4. A lookup never returns an entry whose lease has run out.
//  5. ClaimToken succeeds once per token id until the given time.
//  6. A store failure is returned as an error (ErrUnavailable), never as a
//     success or a stale answer.
//  7. A resume credential works at most once and only for the account's
//     newest epoch: Resume checks the epoch, the hash and the window and
//     issues the next epoch in one atomic step, so of two resumes (or a
//     resume and a login) racing anywhere in the cluster at most one
//     continues the session. Its window restarts at ArmResume and at each
//     Renew of its epoch; it outlives the session's lease and Release (a
//     dropped socket), not RevokeResume (a logout).
package directory
