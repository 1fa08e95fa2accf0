// Package netting records economic movements into single-writer sessions
// and settles each session's net effect into the ledger in a few postings.
//
// It owns: sessions (one scope, one epoch, one writer), the hash-chained
// journal, reservations against the shared counter, settle (net in chunks
// with a clearing leg; on a refusal compensate and replay each movement),
// recovery, the ClusterNode (ownership by rendezvous placement, epoch
// rotation, the orphan sweep, ReconcileReservations), netting for a single
// process outside a cluster (OpenLocalNode: a node of one over any Store,
// its reservations a process-local registry, LocalReservations, rebuilt
// from the store's unsettled journals when it opens; local.go), and the provable
// ledger: the hash of a chained posting (PostingHash) and the proof of a
// store's ledger (VerifyLedger, ledgerchain.go). It does not own
// storage: everything durable goes through the small Store port (store.go),
// implemented by MemStore here and by netting/sqlstore on SQLite and
// PostgreSQL, all checked by the one contract suite in netting/storetest.
// It does not own transport: a caller reaches the owning node by its own
// means: package econ keeps a ClusterNode in step with etcd membership and
// serves it over gRPC, with a client that routes by scope.
//
// # Structure
//
// The session core is pure, in the style of etcd-io/raft's Ready/Advance:
// it decides, the caller does the I/O and reports the results back. It
// does no I/O, reads no clock (time is an input), takes no lock and starts
// no goroutine, and table tests cover every branch of it with no store.
//
//   - core.go: the state a session keeps between calls (sessionState) and
//     the pure functions of netting (positions, chunks, compensations,
//     replay postings, reservation deltas).
//   - commitcore.go: one group commit (commitStep). It asks for one
//     ReserveAndAppend with the rows its build function chains; on a key
//     conflict for the lookups of the keys journaled elsewhere and a
//     rewrite of the rest; on an error that leaves the outcome unknown for
//     a read-back of the journal (do not guess). It ends with the answers
//     to give, the rows committed and whether the session closes.
//   - settlecore.go: one Settle call (settleStep): flush, read, claim,
//     post chunks or fall back to replay, renew the claim once half its
//     lease has passed, release, finish — one named call at a time.
//
// session.go is the driver: it makes the calls the steps name against the
// Store and applies their results (and owns the group commit's queue and
// the committer hand-off). cluster.go and sweep.go compose sessions into a
// node. The node starts no goroutines.
//
// # Settle
//
//  1. Flush pending Records. A session object that knows no journaled
//     rows reads the journal first: an empty one reports "netted" with no
//     postings, is not claimed, and an unsealed session stays open.
//  2. Claim the settle in the store (owner + fencing token). The claim
//     seals the journal against appends; every later write carries the
//     token and is refused once a newer claim exists.
//  3. Read the sealed journal back, once, and verify its chain
//     (CHAIN.BROKEN names the first bad seq). If the read fails or the
//     chain is broken, the claim is handed back (claimed again with a
//     lease of 0, so it lapses at once) and nothing is written.
//  4. Unless the session has ever fallen back to replay (stored), net every
//     account's legs (first-touch order, zeros dropped), cut into chunks of
//     the session's stored width, and post chunk i as net_<session>_c<i>
//     balanced by platform:netting_clearing. Posting ids are idempotent, so
//     a resumed settle skips the chunks already posted.
//  5. On a ledger refusal of a chunk: durably mark the session replaying,
//     compensate every posted chunk newest first (…_c<i>_comp), and post
//     each movement alone as mv_<session>_<seq>, collecting refusals.
//  6. Release the session's reservations exactly once (a durable claim in
//     the store), mark the session settled, report. Each posting of steps
//     4–5 (PostFencedReleasing) already released its own deltas as it
//     landed (a compensation put its chunk's back), so the release returns
//     only what no posting took: the refused movements.
//
// # The provable ledger
//
// Every posting a store writes (Post, PostFenced, PostFencedReleasing) is
// chained, in the store's transaction: it takes the next position (Seq) of
// the store's one chain, PrevHash = the head's hash, Hash =
// PostingHash(PrevHash, posting, PostedAt), and the head moves to it. The
// store chains one posting at a time, so the chain's order is the commit
// order; a repeat of an id or a refusal chains nothing. VerifyLedger walks
// the chain (PostingLog, part of LedgerStore) and reports it intact — its
// head: the number of postings and the last one's hash — or the first
// break as a *LedgerChainBrokenError (LEDGER.CHAIN_BROKEN): a posting
// tampered with (its hash, legs, meta or time changed, or the head or the
// count disagreeing), missing (a gap, a truncated end), reordered, or a
// stored balance that the chained postings' legs do not give. It proves
// the store consistent with itself: a writer who can rebuild the whole
// chain and its head is caught only against a head kept elsewhere.
//
// # Caller obligations
//
//  1. Give every node of a cluster the same node list; route each scope to
//     OwnerOf(scope) and follow the owner named by a SESSION.MISROUTED error.
//  2. Treat Accepted as durable and Rejected as final for that key; retry
//     errors with the same key (a retried key never double-counts).
//  3. Call RotateDue on a timer no longer than EpochMaxAge, so idle epochs
//     settle; and SweepOrphans on a timer, on at least one node.
//  4. Configure Sweep.SettleOlderThan ≥ 2·EpochMaxAge (enforced) and keep
//     the node clocks out of it: ages come from the store's clock.
//  5. Run ReconcileReservations only on a quiesced cluster.
//  6. Use one ClusterNode per node id per process; restarting a node means
//     opening a new ClusterNode (its new nonce keeps session ids unique).
//  7. Outside a cluster (OpenLocalNode), let only that one process record
//     against the store's accounts: its reservations are its own.
//
// # Invariants
//
//   - Accepted means the journal row is committed (group commit: concurrent
//     Records share one store transaction, SharedStore.ReserveAndAppend).
//     A commit whose reply is lost is resolved by reading the journal back,
//     never guessed: rows present are accepted, rows absent failed, and a
//     journal that cannot be read closes the session.
//   - Every accepted movement ends in exactly one posting path: a netted
//     chunk, or its own replay posting, or a replay rejection.
//   - The clearing account returns to zero after every complete settle;
//     the sum of all balances is always zero.
//   - A session's reservations are added once (at accept) and released
//     once (at settle: each part as its posting lands, the rest at the
//     end); pending totals return to zero when all is settled. No posted
//     amount is also still pending.
//   - Two settlers of one session never interleave writes: the store's
//     claim and fencing token admit one at a time.
//   - A store's postings form one hash chain in commit order, from
//     GenesisHash to the head the store keeps; every balance is the sum of
//     the chained postings' legs.
package netting
