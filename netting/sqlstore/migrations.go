package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/shardwise/shardwise/netting"
)

// migration is one versioned schema step. Versions are applied in order, each
// in its own transaction together with its schema_migrations row, so a crash
// mid-migration leaves the previous version intact. A published migration is
// never edited: a change is a new version.
type migration struct {
	version int
	name    string
	stmts   []string
	// postgresStmts run after stmts on PostgreSQL only, sqliteStmts on
	// SQLite only; elsewhere the version is recorded with stmts alone.
	postgresStmts []string
	sqliteStmts   []string
	// run, if not nil, runs last, in the same transaction: a step that SQL
	// alone cannot do on both engines.
	run func(ctx context.Context, s *Store, tx *sql.Tx) error
}

// migrations is the schema history. Column types are the common subset of
// both engines: BIGINT, INTEGER and TEXT. Times are unix microseconds from
// the database's own clock ({now}), never from a node's.
var migrations = []migration{
	{
		version: 1,
		name:    "ledger and netting",
		stmts: []string{
			// One row per posting; the id is the idempotency key.
			`CREATE TABLE ledger_postings (
				id        TEXT PRIMARY KEY,
				meta      TEXT NOT NULL,
				posted_at BIGINT NOT NULL
			)`,
			// The legs of each posting, debit-positive as given.
			`CREATE TABLE ledger_entries (
				posting_id TEXT NOT NULL REFERENCES ledger_postings(id),
				idx        INTEGER NOT NULL,
				account    TEXT NOT NULL,
				amount     BIGINT NOT NULL,
				PRIMARY KEY (posting_id, idx)
			)`,
			`CREATE INDEX ledger_entries_account ON ledger_entries (account)`,
			// Credits minus debits per account, maintained in the posting's
			// own transaction: Balance is one row read, and the overdraft rule
			// is checked against it before commit.
			`CREATE TABLE ledger_balances (
				account TEXT PRIMARY KEY,
				balance BIGINT NOT NULL
			)`,
			// One row per netting session (epoch). chunk_width is fixed at
			// creation so recovery and the sweep never re-chunk differently.
			// journal_len and last_recorded_at are kept by each append so the
			// sweep reads this table, not the whole journal. The settle claim
			// lives on the row it fences: claim_token only grows, and a
			// token > 0 seals the journal. released_at is the durable
			// "reservations returned exactly once" mark.
			`CREATE TABLE netting_sessions (
				id               TEXT PRIMARY KEY,
				scope            TEXT NOT NULL,
				node_id          TEXT NOT NULL,
				chunk_width      INTEGER NOT NULL,
				opened_at        BIGINT NOT NULL,
				journal_len      BIGINT NOT NULL DEFAULT 0,
				last_recorded_at BIGINT,
				claim_owner      TEXT NOT NULL DEFAULT '',
				claim_token      BIGINT NOT NULL DEFAULT 0,
				claim_expires_at BIGINT NOT NULL DEFAULT 0,
				replaying        INTEGER NOT NULL DEFAULT 0,
				released_at      BIGINT,
				settled_at       BIGINT,
				settle_mode      TEXT NOT NULL DEFAULT ''
			)`,
			`CREATE INDEX netting_sessions_unsettled ON netting_sessions (last_recorded_at, id) WHERE settled_at IS NULL`,
			// The hash-chained journal of accepted movements; key is unique
			// across all sessions.
			`CREATE TABLE netting_journal (
				session_id  TEXT NOT NULL REFERENCES netting_sessions(id),
				seq         BIGINT NOT NULL,
				key         TEXT NOT NULL UNIQUE,
				legs        TEXT NOT NULL,
				prev_hash   TEXT NOT NULL,
				hash        TEXT NOT NULL,
				recorded_at BIGINT NOT NULL,
				PRIMARY KEY (session_id, seq)
			)`,
			// Shared reservations: the pending balance delta per account.
			`CREATE TABLE netting_reservations (
				account TEXT PRIMARY KEY,
				pending BIGINT NOT NULL
			)`,
		},
	},
	{
		version: 2,
		name:    "postgres: journal without session foreign key",
		// The foreign key ran a per-row trigger (one SELECT ... FOR KEY
		// SHARE of the session row per journal row, ~15% of a group
		// commit's statement time) that can never fail: every journal
		// insert selects FROM the session row its own statement just
		// updated (sess in setPendingAndAppendPG, the UPDATE ... RETURNING
		// before appendTx's INSERT), and sessions are never deleted.
		// SQLite keeps it (dropping a constraint there rebuilds the table)
		// until version 3, which rebuilds the table anyway and drops it.
		postgresStmts: []string{
			`ALTER TABLE netting_journal DROP CONSTRAINT netting_journal_session_id_fkey`,
		},
	},
	{
		version: 3,
		name:    "sqlite: tables clustered by key; postgres: the group commit check",
		// Every group commit reads and writes one reservation counter and
		// reads one balance per account it touches, and writes one journal
		// row per movement; every posting writes balances. As rowid tables,
		// each counter or balance access is two B-tree searches (the
		// primary key's index, then the row) and each journal row goes into
		// three B-trees (rows, primary key, key) plus a foreign-key probe of
		// the session. Clustered on their primary keys (WITHOUT ROWID),
		// it is one search per access and two B-trees per journal row. The
		// journal's foreign key goes, as on PostgreSQL in version 2: every
		// journal insert follows the update of its own session row in the
		// same transaction, and sessions are never deleted. PostgreSQL has
		// no rowid: nothing changes there.
		sqliteStmts: []string{
			`CREATE TABLE ledger_balances_v3 (
				account TEXT PRIMARY KEY,
				balance BIGINT NOT NULL
			) WITHOUT ROWID`,
			`INSERT INTO ledger_balances_v3 (account, balance) SELECT account, balance FROM ledger_balances`,
			`DROP TABLE ledger_balances`,
			`ALTER TABLE ledger_balances_v3 RENAME TO ledger_balances`,
			`CREATE TABLE netting_reservations_v3 (
				account TEXT PRIMARY KEY,
				pending BIGINT NOT NULL
			) WITHOUT ROWID`,
			`INSERT INTO netting_reservations_v3 (account, pending) SELECT account, pending FROM netting_reservations`,
			`DROP TABLE netting_reservations`,
			`ALTER TABLE netting_reservations_v3 RENAME TO netting_reservations`,
			`CREATE TABLE netting_journal_v3 (
				session_id  TEXT NOT NULL,
				seq         BIGINT NOT NULL,
				key         TEXT NOT NULL UNIQUE,
				legs        TEXT NOT NULL,
				prev_hash   TEXT NOT NULL,
				hash        TEXT NOT NULL,
				recorded_at BIGINT NOT NULL,
				PRIMARY KEY (session_id, seq)
			) WITHOUT ROWID`,
			`INSERT INTO netting_journal_v3 (session_id, seq, key, legs, prev_hash, hash, recorded_at)
				SELECT session_id, seq, key, legs, prev_hash, hash, recorded_at FROM netting_journal`,
			`DROP TABLE netting_journal`,
			`ALTER TABLE netting_journal_v3 RENAME TO netting_journal`,
		},
		// PostgreSQL's group commit is one statement in its own implicit
		// transaction (groupCommitPG): it applies the batch as if every
		// reservation were granted and calls this check last, which
		// raises — undoing the whole statement — unless every request
		// was granted, every counter was written, and the session took
		// the rows.
		postgresStmts: []string{
			`CREATE FUNCTION netting_group_commit_check(refused BIGINT, accounts BIGINT, want_accounts BIGINT,
				sessions BIGINT, journaled BIGINT, want_journaled BIGINT) RETURNS BIGINT
			LANGUAGE plpgsql AS $$
			BEGIN
				IF refused <> 0 OR accounts <> want_accounts OR sessions <> 1 OR journaled <> want_journaled THEN
					RAISE EXCEPTION 'shardwise: group commit not applied: % refused, % of % counters, % sessions, % of % rows',
						refused, accounts, want_accounts, sessions, journaled, want_journaled
						USING ERRCODE = 'SW001';
				END IF;
				RETURN journaled;
			END
			$$`,
		},
	},
	{
		version: 4,
		name:    "postgres: room on the counter pages for in-place updates",
		// Every group commit rewrites one reservation counter per account
		// it touches, and every posting one balance per leg. PostgreSQL
		// writes a new row version for each; if it fits on the row's own
		// page (and no indexed column changed, as here) it is a HOT update:
		// no new primary-key index entry, and the old versions are pruned
		// in place. Pages filled to 100% leave no room, so most updates
		// went to other pages with an index insert each: measured on a
		// 1,000-account batch, 434 of 4,998 counter updates were HOT, and
		// the counter upserts took 15 ms of a 25 ms statement. Filled to
		// 30%, every update was HOT and they took 6 ms. A batch can update
		// every row of a page at once, which needs room for a second copy
		// of each; 50% measured 99% HOT, 30% leaves a margin. The rows are
		// small (an account and a number), so the space is cheap. CLUSTER
		// rewrites the existing rows at the new fill factor; an empty table
		// has none, and is left alone, because CLUSTER also records it as
		// analyzed and empty (see version 5's ANALYZE). SQLite updates rows
		// in place: nothing changes there.
		postgresStmts: []string{
			`ALTER TABLE netting_reservations SET (fillfactor = 30)`,
			`ALTER TABLE ledger_balances SET (fillfactor = 30)`,
			`DO $$
			BEGIN
				IF EXISTS (SELECT 1 FROM netting_reservations) THEN
					CLUSTER netting_reservations USING netting_reservations_pkey;
				END IF;
				IF EXISTS (SELECT 1 FROM ledger_balances) THEN
					CLUSTER ledger_balances USING ledger_balances_pkey;
				END IF;
			END
			$$`,
		},
	},
	{
		version: 5,
		name:    "postgres: identifiers compare as bytes",
		// Accounts, keys and ids are identifiers: nothing sorts them for a
		// reader, and the database's collation (en_US.UTF-8, C.UTF-8, …)
		// only makes every index comparison a locale comparison. With
		// COLLATE "C" they compare with memcmp, as SQLite's BINARY
		// collation and Go's string order do. Measured on a group commit of
		// 769 movements, alternating runs on two databases: 18.6 against
		// 19.7 ms.
		//
		// It also makes the lock order agree: the group commit and
		// lockPending lock counters in Go's byte order of accounts, and
		// ReplacePending (ReconcileReservations' write) locks them ORDER BY
		// account, which under a locale collation can be another order
		// (uppercase before or after lowercase) and so a deadlock between
		// the two.
		//
		// Changing a column's collation rebuilds its indexes, not the
		// table, but it holds every altered table's ACCESS EXCLUSIVE lock
		// until the migration commits, reads included, for a time that
		// grows with the journal and the ledger (about 1.7 s for 300,000
		// postings and journal rows in a review's test): upgrade with the
		// cluster quiesced. The type change drops the columns' planner
		// statistics; ANALYZE puts them back where there were any. Version
		// 4's CLUSTER left the counter tables marked as clustered, so that
		// a bare CLUSTER (or clusterdb) would rewrite them again: the mark
		// goes.
		postgresStmts: []string{
			`ALTER TABLE ledger_postings ALTER COLUMN id TYPE TEXT COLLATE "C"`,
			`ALTER TABLE ledger_entries ALTER COLUMN posting_id TYPE TEXT COLLATE "C", ALTER COLUMN account TYPE TEXT COLLATE "C"`,
			`ALTER TABLE ledger_balances ALTER COLUMN account TYPE TEXT COLLATE "C"`,
			`ALTER TABLE netting_sessions ALTER COLUMN id TYPE TEXT COLLATE "C"`,
			`ALTER TABLE netting_journal ALTER COLUMN session_id TYPE TEXT COLLATE "C", ALTER COLUMN key TYPE TEXT COLLATE "C"`,
			`ALTER TABLE netting_reservations ALTER COLUMN account TYPE TEXT COLLATE "C"`,
			`ALTER TABLE netting_reservations SET WITHOUT CLUSTER`,
			`ALTER TABLE ledger_balances SET WITHOUT CLUSTER`,
			// Only tables that had statistics (reltuples > 0): analyzing a
			// fresh, empty table records it as empty, and plans cached on
			// that (the foreign-key checks' among them) then scan instead
			// of probing until autovacuum analyzes it again — the per-posting
			// baseline ran 30% slower that way.
			`DO $$
			DECLARE t TEXT;
			BEGIN
				FOREACH t IN ARRAY ARRAY['ledger_postings', 'ledger_entries', 'ledger_balances',
					'netting_sessions', 'netting_journal', 'netting_reservations'] LOOP
					IF (SELECT reltuples FROM pg_class WHERE oid = t::regclass) > 0 THEN
						EXECUTE 'ANALYZE ' || quote_ident(t);
					END IF;
				END LOOP;
			END
			$$`,
		},
	},
	{
		version: 6,
		name:    "the ledger's hash chain",
		// Every posting is chained (netting.PostingHash): chain_seq is its
		// position in the store's one chain, prev_hash the hash of the
		// posting before it, hash its own. ledger_chain is the head — one
		// row, locked by every posting's transaction as its last step
		// (chainTx), so the chain's order is the commit order even with
		// many posters, and a posting removed from the end is missed
		// against it. The postings already present are chained in the
		// order they were posted (posted_at, then id) by a Go step
		// (chainExistingPostings: SQLite has no SHA-256), so an upgraded
		// database proves itself. Adding the columns rewrites nothing on
		// either engine; the step rewrites every posting row once (on
		// PostgreSQL a new row version each) and builds the unique index
		// of positions after it. The columns stay nullable (SQLite cannot
		// add NOT NULL to a column), and a posting outside the chain is
		// found by VerifyLedger against the head's count.
		stmts: []string{
			`ALTER TABLE ledger_postings ADD COLUMN chain_seq BIGINT`,
			`ALTER TABLE ledger_postings ADD COLUMN prev_hash TEXT`,
			`ALTER TABLE ledger_postings ADD COLUMN hash TEXT`,
			`CREATE TABLE ledger_chain (
				id        INTEGER PRIMARY KEY CHECK (id = 1),
				chain_len BIGINT NOT NULL,
				head_hash TEXT NOT NULL
			)`,
		},
		run: chainExistingPostings,
	},
	{
		version: 7,
		name:    "reservations in two sides",
		// The spending rule of port v3 (issue 27): a debit is checked
		// against the balance, every session's pending debits and its own
		// session's credits — never another session's pending credit. The
		// counter row keeps its net total (pending, what Pending reports)
		// and gains debits (≤ 0); the credits are their difference. Adding
		// the column rewrites nothing on either engine; the step then
		// rebuilds both from the journals of the unsettled sessions
		// (splitReservations), as ReconcileReservations would, so upgrade
		// with the cluster quiesced.
		stmts: []string{
			`ALTER TABLE netting_reservations ADD COLUMN debits BIGINT NOT NULL DEFAULT 0`,
		},
		run: splitReservations,
	},
	{
		version: 8,
		name:    "refused keys",
		// Port v4 (issue 27: a resent key answers its first outcome): a key
		// the funds check refused is remembered, in the transaction of the
		// group commit that refused it, as the key's final answer — by
		// every node, in every epoch, settled or not. One row per refused
		// key, never deleted (as journal rows are not). An append refuses
		// a key found here as it refuses a journaled one. A new, empty
		// table: nothing to rewrite, an existing database keeps working.
		stmts: []string{
			`CREATE TABLE netting_refusals (
				key        TEXT PRIMARY KEY,
				session_id TEXT NOT NULL,
				reason     TEXT NOT NULL,
				refused_at BIGINT NOT NULL
			)`,
		},
		// Identifiers compare as bytes on PostgreSQL (version 5).
		postgresStmts: []string{
			`ALTER TABLE netting_refusals ALTER COLUMN key TYPE TEXT COLLATE "C", ALTER COLUMN session_id TYPE TEXT COLLATE "C"`,
		},
	},
	{
		version: 9,
		name:    "the journal in batch form",
		// Issue 29: a group commit wrote one journal row per movement,
		// each into two B-trees (the rows by (session, seq), the unique
		// keys) with its legs as JSON and two hex hashes — the largest
		// part of a commit's serial CPU. From this version an append is
		// one netting_batches row holding its rows in one compact body
		// (batch.go), and a movement costs one small netting_keys row,
		// key → (batch, offset), which the key lookups and the conflict
		// check of every append need. A settle reads a million movements
		// as about a thousand rows. The rows inside a batch chain exactly
		// as before: the body keeps each row's hash, and decodes back into
		// the records that were appended.
		//
		// The step moves every existing journal row into batches
		// (journalToBatches), losslessly — a batch ends wherever the rows
		// stop running on, so a broken link or a gap reads back as it
		// was — and drops the old table. It rewrites the whole journal in
		// the migration's transaction: upgrade with the cluster quiesced.
		sqliteStmts: []string{
			`CREATE TABLE netting_batches (
				id          INTEGER PRIMARY KEY,
				session_id  TEXT NOT NULL,
				first_seq   BIGINT NOT NULL,
				n           BIGINT NOT NULL,
				prev_hash   TEXT NOT NULL,
				recorded_at BIGINT NOT NULL,
				body        BLOB NOT NULL,
				UNIQUE (session_id, first_seq)
			)`,
			`CREATE TABLE netting_keys (
				key   TEXT PRIMARY KEY,
				batch BIGINT NOT NULL,
				idx   INTEGER NOT NULL
			) WITHOUT ROWID`,
		},
		// Bodies are stored out of line uncompressed (STORAGE EXTERNAL):
		// a body is mostly keys and hashes, which pglz would spend a
		// group commit's CPU on for little.
		postgresStmts: []string{
			`CREATE TABLE netting_batches (
				id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
				session_id  TEXT COLLATE "C" NOT NULL,
				first_seq   BIGINT NOT NULL,
				n           BIGINT NOT NULL,
				prev_hash   TEXT NOT NULL,
				recorded_at BIGINT NOT NULL,
				body        BYTEA NOT NULL,
				UNIQUE (session_id, first_seq)
			)`,
			`ALTER TABLE netting_batches ALTER COLUMN body SET STORAGE EXTERNAL`,
			`CREATE TABLE netting_keys (
				key   TEXT COLLATE "C" PRIMARY KEY,
				batch BIGINT NOT NULL,
				idx   INTEGER NOT NULL
			)`,
		},
		run: journalToBatches,
	},
}

const createSchemaMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at BIGINT NOT NULL
)`

// migrateTo applies every migration newer than the database's version, up
// to version upTo (LatestSchemaVersion when opened for use; tests open older
// schemas to check the upgrades). On PostgreSQL an advisory lock serialises
// concurrent openers; on SQLite the writer's BEGIN IMMEDIATE does.
func (s *Store) migrateTo(ctx context.Context, upTo int) error {
	// A database already at upTo — every open but a database's first —
	// takes one transaction instead of one per migration. If the check
	// fails, the loop below meets the same error and reports it as before.
	if at, err := s.migratedTo(ctx, upTo); err == nil && at {
		return nil
	}
	for _, m := range migrations {
		if m.version > upTo {
			break
		}
		if err := s.applyMigration(ctx, m); err != nil {
			return fmt.Errorf("sqlstore: migration %d (%s): %w", m.version, m.name, err)
		}
		s.schema = m.version
	}
	return nil
}

// migratedTo reports whether every migration up to upTo is applied, and if
// so sets s.schema as migrateTo would. It runs what each migration's
// transaction runs before its own statements (lock, schema_migrations
// created if missing), once for all of them.
func (s *Store) migratedTo(ctx context.Context, upTo int) (bool, error) {
	var want []int
	for _, m := range migrations {
		if m.version > upTo {
			break
		}
		want = append(want, m.version)
	}
	if len(want) == 0 {
		return false, nil
	}
	var have []int
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		have = have[:0]
		if s.d.migrationLock != "" {
			if _, err := tx.ExecContext(ctx, s.d.migrationLock); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, createSchemaMigrations); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, s.d.q(`SELECT version FROM schema_migrations WHERE version <= ? ORDER BY version`), upTo)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				return err
			}
			have = append(have, v)
		}
		return rows.Err()
	})
	if err != nil || !slices.Equal(have, want) {
		return false, err
	}
	s.schema = want[len(want)-1]
	return true, nil
}

// chainSchema is the first schema with the ledger's chain (version 6).
const chainSchema = 6

func (s *Store) applyMigration(ctx context.Context, m migration) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if s.d.migrationLock != "" {
			if _, err := tx.ExecContext(ctx, s.d.migrationLock); err != nil {
				return err
			}
		}
		// Inside the lock: two PostgreSQL openers racing CREATE TABLE IF NOT
		// EXISTS can otherwise both try to create it.
		if _, err := tx.ExecContext(ctx, createSchemaMigrations); err != nil {
			return err
		}
		var applied int
		if err := tx.QueryRowContext(ctx, s.d.q(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), m.version).Scan(&applied); err != nil {
			return err
		}
		if applied > 0 {
			return nil
		}
		stmts := append(slices.Clip(m.stmts), s.d.ownStmts(m)...)
		for _, stmt := range stmts {
			if _, err := tx.ExecContext(ctx, s.d.q(stmt)); err != nil {
				return err
			}
		}
		if m.run != nil {
			if err := m.run(ctx, s, tx); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, {now})`), m.version, m.name)
		return err
	})
}

// SchemaVersion returns the newest applied migration version.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("sqlstore: schema version: %w", err)
	}
	return int(v.Int64), nil
}

// LatestSchemaVersion is the version a freshly opened store is at.
var LatestSchemaVersion = migrations[len(migrations)-1].version

// splitReservations is version 7's Go step: the counters get their debits
// (a new column) and, with it, their net pending totals, both rebuilt from
// the journals of the unsettled sessions (netting.UnsettledReservations,
// read inside the migration's transaction) — the old net counter cannot
// say how much of it was debits. It is ReconcileReservations run once, so,
// like it, it wants the cluster quiesced for the upgrade.
func splitReservations(ctx context.Context, s *Store, tx *sql.Tx) error {
	want, err := netting.UnsettledReservations(ctx, migrationReader{s: s, tx: tx})
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM netting_reservations`); err != nil {
		return err
	}
	return s.setPending(ctx, tx, want)
}

// migrationReader is the netting.ReservationSource of a migration: the
// store's reads, inside its transaction.
type migrationReader struct {
	s  *Store
	tx *sql.Tx
}

func (m migrationReader) ListUnsettled(ctx context.Context, _ int) ([]netting.UnsettledSession, error) {
	rs, err := m.tx.QueryContext(ctx, `SELECT id, chunk_width, replaying, released_at FROM netting_sessions
		WHERE settled_at IS NULL AND journal_len > 0 ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []netting.UnsettledSession
	for rs.Next() {
		var u netting.UnsettledSession
		var replaying int
		var released sql.NullInt64
		if err := rs.Scan(&u.ID, &u.ChunkWidth, &replaying, &released); err != nil {
			return nil, err
		}
		u.Replaying, u.Released = replaying != 0, released.Valid
		out = append(out, u)
	}
	return out, rs.Err()
}

func (m migrationReader) ReadJournal(ctx context.Context, sessionID string) ([]netting.JournalRecord, error) {
	rs, err := m.tx.QueryContext(ctx, m.s.d.q(`SELECT seq, key, legs FROM netting_journal WHERE session_id = ? ORDER BY seq`), sessionID)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []netting.JournalRecord
	for rs.Next() {
		r := netting.JournalRecord{SessionID: sessionID}
		var legs string
		if err := rs.Scan(&r.Seq, &r.Key, &legs); err != nil {
			return nil, err
		}
		if r.Legs, err = decodeLegs(legs); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

func (m migrationReader) HasPosting(ctx context.Context, id string) (bool, error) {
	var n int
	err := m.tx.QueryRowContext(ctx, m.s.d.q(`SELECT COUNT(*) FROM ledger_postings WHERE id = ?`), id).Scan(&n)
	return n > 0, err
}
