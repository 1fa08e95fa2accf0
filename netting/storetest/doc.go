// Package storetest is the contract suite of the netting Store port. Every
// implementation runs it: netting.MemStore and netting.LocalReservations
// (the process-local registry) in package netting's tests, the SQLite and
// PostgreSQL stores in netting/sqlstore's.
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) netting.Store { return openFresh(t) })
//	}
//
// open must return a fresh, empty store each call and arrange its Close with
// t.Cleanup. The suite needs a netting.SharedStore (the shared reservation
// counter is part of the contract) and fails if the store is not one.
//
// Run holds five kinds of test:
//   - one per method semantic of the port (the hashicorp/raft lesson: an
//     in-memory store that disagrees with the real one must fail here, not
//     in production), the ledger's hash chain among them (LedgerChain/…),
//     and, when the store under test also implements Tamperer (a way to
//     rewrite its stored ledger behind its back), VerifyLedger's finding
//     for each kind of tampering (LedgerTamper/…; a loud skip without one);
//   - the behaviours of the netting specification the project was created
//     from (restated from seed 000) and its store-generic "Ours" items (the
//     gaps of the original that we close, listed in ours.go), driven
//     through real netting.ClusterNodes on the store, with a
//     fault-injecting wrapper (fail, block or tamper with a chosen call) for
//     crashes mid-commit, mid-settle and mid-replay. The wrapper intercepts
//     the session's two write calls, ReserveAndAppend and
//     PostFencedReleasing, which every store has (port v2);
//   - the spending rule of port v3 and the first answer of a resent key
//     (spending.go, issue 27): no debit spends another session's pending
//     credit, so sessions settle in any order without a refusal; a
//     session's own credits are spendable; both sides of the counter
//     leave as the postings land; a settle refusal (caused here by an
//     outside post) is a counted breach; a resent accepted key answers
//     ACCEPTED with its seq after its funds are gone;
//   - the "outcome unknown, do not guess" paths (unknown.go): every store
//     call of a group commit or a settle whose reply is lost, the write
//     having landed or not (faultStore.failReply fails the reply after or
//     before the real call), each resolved from the store — the journal
//     read back, the settle resumed with its idempotent postings and
//     once-only release — never guessed;
//   - the netting invariants as property tests over randomized schedules:
//     replayable ones (replay.go), a pure function of their seed — one
//     goroutine, the nodes on a fake clock, every outcome that depends on
//     the store's own clock waited out — that log their trace on failure,
//     with one seed run twice and the traces compared; and stress ones
//     with goroutine bursts and concurrent settles. Seeds come from
//     internal/testseed (SHARDWISE_SEED replays a run); one of each kind
//     by default, four with SHARDWISE_LONG=1, SHARDWISE_PROPERTY_SEEDS
//     sets how many.
//
// Every behaviour and property test ends with the money audit, which
// includes netting.VerifyLedger: every settle path must leave a ledger that
// proves itself.
//
// It owns no production code and imports only netting, ledger, clock (the
// fake clock of the replayable schedules), internal/testenv (for its
// polling helper, PollUntil), internal/testseed and the standard library.
package storetest
