package netting

// The Store port. Other packages implement it (netting/sqlstore on SQLite
// and PostgreSQL, MemStore here) and netting/storetest checks every
// implementation against the same contract.
//
// Change log (the port is published; note every change here):
//   - v1: first version.
//   - v1 (unchanged signatures): storetest now also checks that Reserve
//     grants an empty request (a movement between platform accounts).
//   - v1.1 (additive; Store and SharedStore unchanged): the optional
//     BatchStore extension, ReserveAndAppend — a group commit's
//     reservation and journal append in ONE transaction. The session uses
//     it when its store implements it and falls back to Reserve then Append
//     otherwise, so every existing store keeps working unchanged.
//     storetest checks it on every store that implements it.
//   - v1.2 (additive): the optional SettlePoster extension,
//     PostFencedReleasing — a settle posting and the move of its wallet
//     deltas out of the pending counters in ONE transaction, so a posted
//     credit is never counted in the balance and in pending at once. A
//     session uses it when its store implements it; its final
//     ReleaseSession then returns only what no posting moved.
//   - v1.3 (LedgerStore, so Store and SharedStore, gain two methods;
//     callers are unchanged, implementations must add them): PostingLog,
//     the ledger's hash chain. Every posting a store writes (Post,
//     PostFenced, PostFencedReleasing) is chained in commit order
//     (PostingHash) and ReadPostings and LedgerHead read the chain back,
//     so that VerifyLedger proves any store's ledger. In the port, not an
//     optional extension: every store must chain, and every wrapper keeps
//     the reads. storetest checks the chain on every store, and
//     VerifyLedger's findings on stores whose test offers a Tamperer.
//   - v2 (SharedStore gains two methods; implementations of v1.3 that had
//     both extensions are unchanged): ReserveAndAppend (was BatchStore) and
//     PostFencedReleasing (was SettlePoster) are methods of SharedStore.
//     A session has one path: every group commit is one ReserveAndAppend,
//     every settle posting one PostFencedReleasing, on every store and
//     through every wrapper; the Reserve-then-Append and PostFenced
//     fallbacks are gone from the session. BatchStore and SettlePoster
//     remain as deprecated names every SharedStore satisfies. Reserve,
//     Append, Unreserve and PostFenced stay in the port (operators and
//     tools call them, storetest checks them, and they are the parts the
//     two calls are specified by), but no session calls them.
//   - v3 (the spending rule; every implementation changes, storetest
//     checks the rule on every store): the shared counter has two sides
//     per account (Reserved: pending Debits, checked, and pending Credits,
//     never spendable by another session). A debit is granted against
//     balance + Debits + the requesting session's own pending credits,
//     which ReserveAndAppend now takes (own) and accumulates over the
//     batch; Reserve grants against balance + Debits alone. Pending and
//     PendingAll still report the net. New: ReservedAll (both sides).
//     Changed: ReplacePending takes both sides; PostFencedReleasing takes
//     ReservedChanges (a compensation puts a chunk's sides back, which a
//     signed delta cannot say); Unreserve and ReleaseSession take each
//     delta off the side its sign names. Why: a debit granted against
//     another session's pending credit was refused by the ledger when the
//     sessions settled in the other order, and the replay dropped an
//     accepted movement (issue 27; the argument is in doc.go).

import (
	"context"
	"time"

	"github.com/shardwise/shardwise/ledger"
)

// JournalRecord is one accepted movement, as journaled.
type JournalRecord struct {
	SessionID string
	// Seq numbers the session's accepted movements from 0 without gaps.
	Seq int64
	// Key is the movement's idempotency key, unique across all sessions.
	Key string
	// Legs are the movement's legs, debit-positive, in the order given.
	Legs []ledger.Leg
	// PrevHash is the previous row's Hash (GenesisHash for seq 0).
	PrevHash string
	// Hash is ChainHash(PrevHash, Key, Legs).
	Hash string
	// RecordedAt is stamped by the store from its own clock inside Append;
	// whatever the caller put here is ignored. Sweep ages are measured
	// against it, so only the store's clock may write it ("one clock").
	RecordedAt time.Time
}

// Settle modes, as reported and as stored with a settled session.
const (
	ModeNetted   = "netted"
	ModeReplayed = "replayed"
)

// RefusedKey is a movement's key refused by a group commit (the funds
// check), remembered for ever as the key's first answer (port v4).
type RefusedKey struct {
	Key       string
	SessionID string // the session whose group commit refused it
	// Reason is the Outcome's reason (ReasonInsufficientFunds).
	Reason string
	// RefusedAt is stamped by the store's clock; the caller's is ignored.
	RefusedAt time.Time
}

// KeyAnswer is a key's first answer as the store remembers it
// (LookupAnswer): its journal row when it was accepted, its refusal when it
// was refused, neither when the key was never decided.
type KeyAnswer struct {
	Found bool
	// Refused is set when the key's first answer was a refusal (Refusal
	// holds it); otherwise, when Found, Record is its journal row.
	Refused bool
	Record  JournalRecord
	Refusal RefusedKey
}

// SessionMeta is what the store keeps about one session (one epoch of one
// scope) beside its journal.
type SessionMeta struct {
	ID     string
	Scope  string
	NodeID string // the node that opened it
	// ChunkWidth is fixed when the session is created: every settle of this
	// session, by any node, cuts chunks with it (so a resumed settle skips
	// exactly the chunks already posted).
	ChunkWidth int
	// OpenedAt is stamped by the store in CreateSession.
	OpenedAt time.Time
	// Replaying is set (durably, once, never cleared) when a settle has
	// fallen back from netting to replay: no later settle may post a netted
	// chunk again.
	Replaying bool
	// Settled, SettleMode (ModeNetted or ModeReplayed) and SettledAt are
	// written by FinishSettle.
	Settled    bool
	SettleMode string
	SettledAt  time.Time
	// Sealed is true once any settle claim has been taken: the journal is
	// closed to appends from then on.
	Sealed bool
}

// UnsettledSession is one entry of ListUnsettled.
type UnsettledSession struct {
	SessionMeta
	// Records is the journal length; LastRecordedAt its newest RecordedAt.
	Records        int64
	LastRecordedAt time.Time
	// Released reports whether ReleaseSession has already returned this
	// session's reservations (a settle that crashed before FinishSettle).
	Released bool
}

// Fence is a granted settle claim: every settle write carries it, and the
// store refuses it (ErrFenced) once a newer claim exists.
type Fence struct {
	SessionID string
	Owner     string
	// Token grows by one with every claim granted on the session.
	Token int64
}

// LedgerStore holds postings and balances under the rules of package
// ledger, and the hash chain of the postings (PostingLog).
type LedgerStore interface {
	// Post applies p atomically after ledger.Validate: on a refusal
	// (OP.MALFORMED, LEDGER.UNBALANCED, LEDGER.OVERDRAFT per
	// ledger.CheckOverdraft against the balances inside the same
	// transaction) nothing is written. An id already posted is a no-op that
	// returns nil, whatever the legs: ids are idempotency keys. A posting
	// written is chained in the same transaction (ledgerchain.go): the
	// next Seq, PostedAt from the store's clock, PrevHash the head's hash,
	// Hash = PostingHash(PrevHash, p, PostedAt), and the head moved to it,
	// one posting at a time, so the chain's order is the commit order. A
	// repeat or a refusal chains nothing.
	Post(ctx context.Context, p ledger.Posting) error
	// HasPosting reports whether a posting with id exists.
	HasPosting(ctx context.Context, id string) (bool, error)
	// Balance returns credits minus debits of account (−Σ raw legs), 0 for
	// an account never posted to.
	Balance(ctx context.Context, account string) (int64, error)
	// Balances returns the balance of every account ever posted to
	// (accounts whose balance is back at zero may be included).
	Balances(ctx context.Context) (map[string]int64, error)
	// PostingLog reads the chain back.
	PostingLog
}

// JournalStore holds the hash-chained journals of all sessions.
type JournalStore interface {
	// Append adds recs to one session's journal atomically: all rows or
	// none. recs is non-empty, every row names the same existing session,
	// and seqs are contiguous starting at the session's current journal
	// length. The store stamps RecordedAt on every row with its own clock
	// (one value per call is fine). It does not verify hashes.
	//
	// Errors, each writing nothing:
	//   - ErrSessionNotFound: no such session;
	//   - ErrSessionSettled: the session is sealed (a settle claim was ever
	//     granted) or settled — this is the fence that keeps a live writer
	//     from adding rows a settler has not read;
	//   - *KeyConflictError (errors.Is ErrKeyConflict) listing every key of
	//     recs already journaled in any session or remembered as refused
	//     (keys are globally unique, and a key's first answer is final);
	//     a key repeated inside recs is reported the same way;
	//   - ErrSeqConflict: the first seq is not the journal length, or seqs
	//     are not contiguous, or rows name different sessions.
	Append(ctx context.Context, recs []JournalRecord) error
	// ReadJournal returns the session's rows ordered by seq (empty, not an
	// error, for a session with no rows or no session at all).
	ReadJournal(ctx context.Context, sessionID string) ([]JournalRecord, error)
	// LookupKey returns the journal row carrying key, in any session.
	LookupKey(ctx context.Context, key string) (JournalRecord, bool, error)
	// AppendRecording is Append(recs) (when recs is non-empty, with the
	// same checks and errors) and, in the same transaction, remembers each
	// of refused (RefusedAt from the store's clock) whose key is neither
	// journaled (recs included) nor already refused — a key keeps its
	// first answer. Any error writes nothing; recs and refused both empty
	// write nothing and return nil. Refusals are never deleted (as journal rows are not).
	AppendRecording(ctx context.Context, recs []JournalRecord, refused []RefusedKey) error
	// LookupAnswer returns key's first answer, in any session: its journal
	// row, or its remembered refusal.
	LookupAnswer(ctx context.Context, key string) (KeyAnswer, error)
}

// SessionStore holds session metadata and the settle claim.
type SessionStore interface {
	// CreateSession stores meta (ID, Scope, NodeID, ChunkWidth ≥ 1; the
	// other fields are ignored) with OpenedAt from the store's clock, and
	// returns what was stored. ErrSessionExists if the id is taken.
	CreateSession(ctx context.Context, meta SessionMeta) (SessionMeta, error)
	// Session returns a session's metadata, or ErrSessionNotFound.
	Session(ctx context.Context, id string) (SessionMeta, error)
	// ListUnsettled returns sessions that have at least one journal row and
	// are not settled, oldest LastRecordedAt first (ties by id), at most
	// limit of them (limit ≤ 0: all).
	ListUnsettled(ctx context.Context, limit int) ([]UnsettledSession, error)
	// ClaimSettle grants owner the right to settle a session for lease
	// (measured on the store's clock) and returns a Fence with a token one
	// greater than any earlier claim's. It is granted when there is no claim,
	// the current claim has expired, or the current claim is owner's own; a
	// settled session's claim counts as expired. Otherwise it fails with
	// *ClaimHeldError (errors.Is ErrSettleClaimed). Granting seals the
	// session: Append refuses from then on. ErrSessionNotFound if absent.
	ClaimSettle(ctx context.Context, sessionID, owner string, lease time.Duration) (Fence, error)
	// PostFenced is Post executed only if f.Token is still the session's
	// current claim token (checked in the same transaction as the posting);
	// otherwise *FencedError (errors.Is ErrFenced) and nothing is written
	// or chained.
	// An expired claim that nobody replaced still fences nothing.
	PostFenced(ctx context.Context, f Fence, p ledger.Posting) error
	// MarkReplaying durably sets SessionMeta.Replaying, fenced like
	// PostFenced. Idempotent.
	MarkReplaying(ctx context.Context, f Fence) error
	// FinishSettle, fenced like PostFenced, marks the session settled with
	// mode (ModeNetted or ModeReplayed) and SettledAt from the store's
	// clock, and ends the claim (a later ClaimSettle is granted). On a
	// session already settled it changes nothing and returns nil.
	FinishSettle(ctx context.Context, f Fence, mode string) error
}

// ReservationStore is the shared reservation counter: per account, the
// balance deltas promised by accepted but unsettled movements, kept in the
// store so that sessions on different nodes cannot promise the same money
// twice, in two sides (Reserved): Debits, the sum of the negative deltas,
// which every check counts, and Credits, the sum of the positive ones,
// which no other session may spend (the spending rule, reserve.go and
// doc.go). A Store without it cannot back a ClusterNode.
type ReservationStore interface {
	// Reserve processes reqs in order, each atomically and all within one
	// transaction, by DecideReservations with no own credits: for each
	// delta of a request in order, the delta is added to its side of the
	// account's counter; if delta < 0 and Balance(account) +
	// Debits(account) < 0 (the balance read in the same transaction, never
	// a cached one), the request's adds are undone newest first and the
	// request is refused. No request spends a pending credit. granted[i]
	// reports request i. Callers pass wallet deltas only (ledger.IsWallet);
	// the store checks every negative delta it is given. On error nothing
	// is applied (fail closed).
	Reserve(ctx context.Context, reqs [][]ledger.AccountDelta) (granted []bool, err error)
	// Unreserve takes deltas off the counters, each off the side its sign
	// names: the undo of a granted request whose journal append then
	// failed.
	Unreserve(ctx context.Context, deltas []ledger.AccountDelta) error
	// Pending returns account's net pending total, Debits + Credits (0 if
	// none). It is for display: the check reads Debits alone.
	Pending(ctx context.Context, account string) (int64, error)
	// PendingAll returns every nonzero net pending total.
	PendingAll(ctx context.Context) (map[string]int64, error)
	// ReservedAll returns both sides of every account with a nonzero side.
	ReservedAll(ctx context.Context) (map[string]Reserved, error)
	// ReleaseSession returns a session's reservations exactly once: fenced
	// like PostFenced, if the session's release has not happened it takes
	// deltas off the counters (each off the side its sign names) and
	// durably records the release, returning true; afterwards it changes
	// nothing and returns false.
	ReleaseSession(ctx context.Context, f Fence, deltas []ledger.AccountDelta) (released bool, err error)
	// ReplacePending sets the counters to want atomically (accounts absent
	// from want to zero) and returns how many accounts changed value. It is
	// the write of ReconcileReservations: an operator action on a quiesced
	// cluster.
	ReplacePending(ctx context.Context, want map[string]Reserved) (adjusted int, err error)
}

// Store is the port the netting core talks to. Every method is safe for
// concurrent use. Times come from the store's own clock (Now), never a
// node's.
type Store interface {
	LedgerStore
	JournalStore
	SessionStore
	// Now returns the store's clock: the one clock that stamps journal rows,
	// session opening and claims, and that sweep ages are measured on.
	Now(ctx context.Context) (time.Time, error)
	// Close releases the store. Idempotent.
	Close() error
}

// SharedStore is a Store with the shared reservation counter, which
// OpenClusterNode requires, and the two calls a session's writes go
// through: every group commit is one ReserveAndAppend and every settle
// posting one PostFencedReleasing. They are methods of the port, not
// optional extensions found by type assertion, so that every store, wrapper
// and fake runs the one path the session takes (a decorator cannot lose a
// fast path by forgetting a method: it does not compile).
type SharedStore interface {
	Store
	ReservationStore

	// ReserveAndAppend does, atomically in one transaction: Reserve(reqs)
	// as ReservationStore.Reserve specifies, except that a debit may also
	// spend the session's own pending credits — DecideReservations with
	// own: the credits the session's committed rows hold per account
	// (given by the caller, which the store does not change), plus those of
	// the requests of this batch granted before it (every request is of the
	// one session the rows name); then recs :=
	// build(granted); then, if recs is non-empty, Append(recs) exactly as
	// JournalStore.Append specifies (same checks, same errors, RecordedAt
	// stamped by the store). It returns granted.
	//
	// Any error — an Append refusal (ErrSessionNotFound, ErrSessionSettled,
	// *KeyConflictError, ErrSeqConflict) or a store failure — means nothing
	// at all was applied: neither the reservations nor the rows (when the
	// store can know; a lost commit reply is, as for Append, the caller's to
	// resolve by reading the journal back).
	//
	// build is the caller's pure function from the grants to the rows (it
	// chains the granted movements); it does no I/O and may be called more
	// than once when the store retries its transaction, and only the last
	// call's rows are committed. The transaction is durable like Append's.
	ReserveAndAppend(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) []JournalRecord) (granted []bool, err error)

	// ReserveAndRecord is ReserveAndAppend whose build also yields the
	// keys the batch refused: after the reservations and the append, in
	// the SAME transaction, they are remembered as AppendRecording does
	// (port v4), so a refusal is durable before it is answered, as an
	// acceptance is. It is the one call a session's group commit makes;
	// ReserveAndAppend is ReserveAndRecord with no refusals.
	ReserveAndRecord(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) ([]JournalRecord, []RefusedKey)) (granted []bool, err error)

	// PostFencedReleasing is PostFenced that, in the same transaction, also
	// takes release off the pending counters (each change's Debits off
	// Debits and Credits off Credits; a compensation's negative sides put
	// its chunk's back) — only when it writes the posting
	// (not when the id is already posted) and only while the session's
	// reservations have not been released (ReleaseSession): a release
	// returns everything still reserved, so a posting after it (a later
	// settler replaying a movement the first one had to refuse) has
	// nothing left to move. A refusal, a fence error or any other error
	// writes neither.
	//
	// A settle that posted with PostFenced and released only at the end
	// would leave each posted chunk counted twice in between: in the
	// balance, and still in pending (for a credit, headroom another session
	// could promise again). Every settle posting therefore moves its own
	// wallet deltas out of pending as it lands.
	PostFencedReleasing(ctx context.Context, f Fence, p ledger.Posting, release []ReservedChange) error
}

// BatchStore was the optional group-commit extension of port v1.1.
//
// Deprecated: since port v2 ReserveAndAppend is a method of SharedStore;
// every SharedStore satisfies BatchStore. The name stays so that code
// asserting it keeps compiling.
type BatchStore interface {
	ReserveAndAppend(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func(granted []bool) []JournalRecord) (granted []bool, err error)
}

// SettlePoster was the optional settle-posting extension of port v1.2.
//
// Deprecated: since port v2 PostFencedReleasing is a method of
// SharedStore; every SharedStore satisfies SettlePoster. The name stays so
// that code asserting it keeps compiling.
type SettlePoster interface {
	PostFencedReleasing(ctx context.Context, f Fence, p ledger.Posting, release []ReservedChange) error
}

// AppendOnly is a ReserveAndAppend build as a ReserveAndRecord one (no
// refusals remembered).
func AppendOnly(build func(granted []bool) []JournalRecord) func(granted []bool) ([]JournalRecord, []RefusedKey) {
	return func(granted []bool) ([]JournalRecord, []RefusedKey) { return build(granted), nil }
}

var (
	_ BatchStore   = SharedStore(nil)
	_ SettlePoster = SharedStore(nil)
)
