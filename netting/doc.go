// Package netting records economic movements into single-writer sessions
// and settles each session's net effect into the ledger in a few postings.
//
// It owns: sessions (one scope, one epoch, one writer), the hash-chained
// journal, reservations against the shared counter under the spending rule
// (reserve.go), settle (net in chunks
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
//     4–5 (PostFencedReleasing) already released its own reservations as
//     it landed (a chunk both sides of each of its accounts; a
//     compensation put its chunk's back), so the release returns only what
//     no posting took: the refused movements, and the accounts of a netted
//     settle that net to zero (no chunk carries them).
//
// Under the spending rule step 5's refusals cannot happen (below): a
// refused chunk or movement is an invariant breach, logged at error level
// and counted (ClusterNode.Breaches); a refused movement is still listed in
// the report's Rejected, and the session is marked Replaying, so an audit
// of settled journals against the ledger finds it. Only a posting made
// outside the sessions (an operator's Post spending reserved money) or a
// store that breaks the rule can cause one.
//
// # The spending rule
//
// The shared counter keeps, per wallet account, the pending debits D (the
// sum of the negative balance deltas of accepted, unsettled movements, of
// every session) and the pending credits C (the positive ones). A debit d
// < 0 of session Y on account a is granted only if, with d counted,
//
//	B + D + C_Y ≥ 0
//
// where B is a's settled balance and C_Y the credits Y itself has accepted
// on a (committed, or granted earlier in the same group commit). Other
// sessions' pending credits are never spendable; every session's pending
// debits count against everyone. Each movement's deltas are netted per
// account first (reservationDeltas), so a movement is one delta per
// account.
//
// Claim: whatever subset of the unsettled sessions settles, in whatever
// order, and whatever prefix (in seq order) of each session's movements is
// posted — netted chunks post a session's whole position per account, a
// replay posts its movements in seq order — a's balance never goes below
// zero. So no settle is refused, and nothing accepted is dropped.
//
// Proof. Write each unsettled session X's unposted movements on a as
// debits D_X ≤ 0 and credits C_X ≥ 0, and a prefix p of them as D_X^p ≥
// D_X, C_X^p ≥ 0. The invariant I is: for every choice of a prefix p_X of
// every unsettled session, B + Σ_X (C_X^p + D_X^p) ≥ 0. It holds with no
// session (B ≥ 0: wallets are never overdrawn). Each event keeps it:
//
//   - A credit granted to Y (appended to Y's journal): every sum that
//     includes it grows.
//   - A debit d granted to Y: sums whose Y-prefix excludes it are
//     unchanged. A sum that includes it takes Y's whole journal, so it is
//     B + Σ_{X≠Y}(C_X^p + D_X^p) + C_Y + D_Y + d ≥ B + Σ_{X≠Y} D_X + C_Y +
//     D_Y + d = B + D + C_Y (d included) ≥ 0, by C^p ≥ 0, D_X^p ≥ D_X and
//     the check.
//   - A posting of session X's next movements (a chunk: all of them on a;
//     a replay: the next one in seq order) moves them from X's unposted
//     part into B: every sum after it is a sum before it with X's prefix
//     extended by what was posted, which I covered.
//   - A compensation puts back a chunk that was posted: with I holding,
//     no chunk is refused, so none is ever compensated (one would be only
//     after a breach).
//
// A posting's ledger check is B_after ≥ 0 for the account, which is I for
// the prefixes just posted and empty ones elsewhere. ∎
//
// The price: a debit may not spend a credit another session has accepted
// until that session settles (at most the epoch age, or, for a dead node's
// orphan, the sweep bound), and a session's self-funded debits are refused
// while other sessions' debits hold the settled balance (the check cannot
// see whose credits cover whose debits). A dead node's orphans need not
// settle before its scopes' new owner: nothing else spent their credits.
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
//     errors with the same key (a retried key never double-counts), in
//     the same scope: a key decided anywhere answers its first answer —
//     ACCEPTED with its seq, or its first rejection — looked up before any
//     refusal is answered, whatever legs the resend carries. A rejection
//     is final for its key, as an acceptance is: mint a new key for a new
//     attempt.
//  8. Post nothing to a wallet outside the sessions while sessions hold
//     reservations on it (a ledger Post is not checked against them): an
//     outside debit can make a settle refuse an accepted movement, which
//     the node reports as a breach.
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
//     Records share one store transaction, SharedStore.ReserveAndRecord);
//     Rejected means the refusal is committed in that same transaction
//     (unless the key already had a first answer, which is then given).
//     A commit whose reply is lost is resolved by reading the journal back,
//     never guessed: rows present are accepted, rows absent failed, and a
//     journal that cannot be read closes the session.
//   - Every accepted movement ends in exactly one posting path: a netted
//     chunk or its own replay posting. Neither is ever refused under the
//     spending rule (proof above); a refusal is a breach, counted, logged
//     and listed in the report's Rejected, never silent.
//   - A debit never spends another session's pending credit: the check is
//     balance + every session's pending debits + the session's own
//     pending credits ≥ 0, in the store's transaction.
//   - A key answered ACCEPTED answers ACCEPTED with the same seq to every
//     resend, and a key answered REJECTED answers that rejection to every
//     resend, in any session, node, epoch or settle state: a refused key
//     is looked up (LookupAnswer) before the refusal is given, and an
//     append refuses a key remembered as refused (a key conflict, answered
//     from its refusal). Refusals are kept as long as journal rows: for
//     ever. One gap: two first requests of one key racing on two nodes of
//     a PostgreSQL cluster (a resend to another scope before the first
//     answer, which the caller obligations forbid) can be accepted by one
//     and refused by the other; the journal row wins every later lookup.
//   - The clearing account returns to zero after every complete settle;
//     the sum of all balances is always zero.
//   - A session's reservations are added once (at accept) and released
//     once (at settle: each part as its posting lands, the rest at the
//     end), each delta on its side (debits, credits); both sides return
//     to zero when all is settled. No posted amount is also still pending.
//   - Two settlers of one session never interleave writes: the store's
//     claim and fencing token admit one at a time.
//   - A store's postings form one hash chain in commit order, from
//     GenesisHash to the head the store keeps; every balance is the sum of
//     the chained postings' legs.
package netting
