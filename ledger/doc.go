// Package ledger is double-entry bookkeeping in one currency: legs,
// postings, the balance convention and the wallet overdraft rule.
//
// It owns the rules every store of money must apply identically — what a
// well-formed posting is, which accounts may go below zero, and how a
// balance is read from raw legs — and an in-memory [Book] that applies them.
// It does not own storage, durability or concurrency control across
// processes: a store (netting.MemStore, netting/sqlstore) applies these
// rules inside its own transaction.
//
// Invariants:
//   - A leg's Amount is debit-positive: [Debit] stores +x, [Credit] stores −x.
//   - A posting's legs are non-empty, each nonzero and named (OP.MALFORMED),
//     and sum to zero (LEDGER.UNBALANCED), so the sum of every balance in a
//     book is always zero.
//   - A balance is credits minus debits: the negation of the sum of the raw
//     legs of that account ("credit-normal").
//   - A wallet account (every account not under "platform:") never ends a
//     posting below zero (LEDGER.OVERDRAFT); platform accounts may.
//   - A posting id is an idempotency key: posting an id twice posts once.
//
// This is a layer-0 package: standard library and errcode only, no I/O, no
// clock, no goroutines.
package ledger
