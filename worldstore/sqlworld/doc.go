// Package sqlworld is the world store (worldstore.Store) on SQL: SQLite
// through modernc.org/sqlite (pure Go, the embedded default) and PostgreSQL
// through pgx/v5's pgxpool. One code base serves both; what differs (the
// database clock, placeholders, column types, transient error codes) lives
// in a small dialect value, as in netting/sqlstore.
//
// Open takes a URL: "sqlite:///abs/path/world.db", "sqlite://rel/world.db",
// "sqlite://:memory:" (one connection, gone at Close), or
// "postgres://…" / "postgresql://…" (anything pgxpool accepts).
//
// It owns the schema (tables world_players, world_chunks, world_edits) and
// its versioned migrations, recorded in worldstore_migrations and applied
// on open, serialised across concurrent openers (PostgreSQL: an advisory
// transaction lock; SQLite: the writer's BEGIN IMMEDIATE). The names are
// its own, so the world store can share a database with the netting store
// (netting/sqlstore, whose history is schema_migrations). It does not own
// the rules of the port (package worldstore: the fences, the limits, the
// validation, which it calls before touching the database).
//
// Invariants, on top of those of package worldstore:
//   - Every write is one database transaction; a transient conflict
//     (deadlock, serialisation failure, SQLITE_BUSY after the busy
//     timeout) reruns it from the start, up to maxTxAttempts times.
//   - SavePlayer is one upsert whose update applies only WHERE the stored
//     epoch < the caller's, or = and the stored row's final_save is 0: the
//     fence and the write are one statement, so they cannot be split by
//     another writer on either engine (PostgreSQL re-checks the WHERE on
//     the row it locked).
//   - A chunk's revision lives in world_chunks and is advanced by a
//     compare-and-set statement (INSERT … ON CONFLICT DO NOTHING for the
//     first edit, UPDATE … WHERE rev = expected after), in the same
//     transaction as the edit's row: an edit row exists exactly for each
//     revision 1..rev.
//   - Edits reads the revision first and then the edit rows up to it, so
//     under PostgreSQL's READ COMMITTED (a new snapshot per statement) it
//     never returns a revision ahead of the edits it returns.
//   - Saved times are the database's clock in microseconds, never a node's.
//   - Accounts and epochs are stored as BIGINT: an account's 64 bits as a
//     signed integer (compared only for equality), an epoch as its value
//     (worldstore.MaxEpoch keeps it in range, so the ≤ of the fence is the
//     numeric one).
//
// SQLite specifics: WAL mode with synchronous=FULL (a returned save
// survives power loss), one writer connection per Store with BEGIN
// IMMEDIATE (writers queue in Go, not on SQLITE_BUSY), a busy timeout for
// other processes sharing the file, a separate read-only pool (except for
// ":memory:", whose one connection is the database), tables clustered on
// their keys (WITHOUT ROWID).
package sqlworld
