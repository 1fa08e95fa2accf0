// Package sqlstore is the netting Store (netting.SharedStore) on SQL: SQLite
// through modernc.org/sqlite (pure Go, the embedded default) and PostgreSQL
// through pgx/v5's pgxpool. One code base serves both; everything that
// differs lives in the dialect (dialect.go), and the store's logic never
// asks which engine it runs on: the SQL text's pieces (the database clock,
// row locks, placeholders, the migration lock, transient error codes) and
// an engine (sqlite.go, postgres.go) for the steps whose best form differs
// — a commit without a flush of its own, locking and writing reservation
// counters, inserting a batch of journal rows, the group commit.
//
// It owns the schema and its versioned migrations (table schema_migrations,
// applied on open, serialised across concurrent openers), the ledger tables
// (postings, entries, a balances table kept in each posting's transaction,
// and the postings' hash chain with its head, ledger_chain), the
// hash-chained journal, the session table (chunk width, settle claim and
// fencing token, release mark, settle mode) and the shared reservation
// counters. It does not own the netting rules — settle, replay, recovery,
// the sweep live in package netting — nor the ledger rules, which it takes
// from package ledger and applies inside its own transactions.
//
// Invariants:
//   - Every method is one database transaction: it commits whole or not at
//     all, and a transient conflict (deadlock, serialisation failure, busy)
//     reruns it from the start.
//   - A posting is written with its entries and its balance changes in one
//     transaction that refuses (LEDGER.OVERDRAFT) a wallet decrease ending
//     below zero, so the sum of all balances is zero after every commit.
//   - Every posting's transaction ends by chaining it (chainTx): it locks
//     the one head row, stamps the posting's time, hashes it after the head
//     (netting.PostingHash) and moves the head. Postings from any number of
//     connections and processes therefore chain one at a time, in commit
//     order. The head is the last lock a posting takes, held for two
//     statements and the commit; a transaction holding it waits for no
//     other row. ReadPostings reads a page of the chain with its entries in
//     one statement, LedgerHead the head with the posting count in
//     another. Schema version 6 chained the postings an older database
//     held, in (posted_at, id) order.
//   - Every settle write (PostFenced, MarkReplaying, ReleaseSession,
//     FinishSettle) first locks the session row and checks its fencing
//     token; ClaimSettle takes the same lock to issue a newer token, so a
//     fenced write either commits before a takeover or is refused after it.
//   - Append (and ReserveAndAppend, the group commit's reservations and
//     rows in one transaction) locks the session row too and refuses once a
//     claim has been granted, so a settler reads a journal nobody can still
//     extend.
//   - The journal is kept in batch form (schema version 9, batch.go): an
//     append is one netting_batches row whose body holds its rows (key,
//     legs, hash each; the first row's prev hash and the time on the row),
//     and one netting_keys row per movement, key → (batch, offset), whose
//     primary key makes keys unique across sessions. A refused key has a
//     marker row there too (batch 0), so an append's key insert is its
//     whole conflict check. A batch decodes back into exactly the records
//     appended, so the chain is checked as it always was. netting_journal
//     is a view of each movement's session, seq, key and time.
//   - ReadJournal reads a long journal (two parts of 50,000 rows or more) in
//     up to four seq ranges at once, one statement each on the read pool
//     (a batch belongs to the range of its first seq): not one snapshot,
//     but every row below the session's journal length, read first, was
//     committed with that length, so no range misses one; the last range
//     is open-ended, as one statement would be.
//   - Times (journal rows, session opening, claims, settles) come from the
//     database's clock, never a node's: the "one clock" of the sweep.
//   - Rows of one kind are always locked in account (or session) order, so
//     two transactions cannot deadlock on each other's rows. The order is
//     Go's byte order of the strings; on PostgreSQL the identifier columns
//     are COLLATE "C" (schema version 5) so that ORDER BY agrees with it.
//     One exception, PostgreSQL only: ReserveAndAppend takes the session
//     row after the reservation rows, ReleaseSession before them; the two
//     meet only when a settle releases a session that is still appending,
//     PostgreSQL breaks the deadlock and the rerun finds the seal (the
//     group commit's single statement, groupCommitPG, takes them in the
//     same order as the transaction it stands for). A second, PostgreSQL
//     only: the reservation lock takes existing rows first and creates
//     missing ones after, so two transactions that both create one new
//     account while overlapping on others can deadlock; the rerun takes
//     them all in order.
//
// SQLite specifics: WAL mode with synchronous=FULL (a committed journal row
// survives power loss), one writer connection per Store with BEGIN
// IMMEDIATE (writers queue in Go, not on SQLITE_BUSY), a busy timeout for
// other processes sharing the file, a separate read-only pool, the group
// commit's statements prepared once, on first use (stmtcache.go), and the hot
// tables clustered on their keys (WITHOUT ROWID, schema version 3). The
// group commit adds each account's sum to its counter in one row of a
// multi-row upsert, reading back the counter and the balance only of the
// accounts the batch debits (the rule checks no other), and corrects the
// counters by the refused requests' deltas afterwards.
//
// PostgreSQL specifics: a group commit whose requests are all granted is one
// statement, its own implicit transaction at REPEATABLE READ (a second pool
// whose connections default to that level): one round trip, commit
// included. It writes as if
// every reservation were granted and ends with a check
// (netting_group_commit_check, schema version 3) that raises, undoing the
// statement, unless the counters' values before it grant every request; a
// counter changed since its snapshot fails it too (REPEATABLE READ), so its
// balances are never older than its counters. A declined batch is then
// decided request by request in a READ COMMITTED transaction that reads
// the balances after locking the counters. The counter and balance tables
// keep 70% of each page free (fillfactor 30, schema version 4), so that
// rewriting a counter stays on its page (a HOT update, with no new index
// entry).
package sqlstore
