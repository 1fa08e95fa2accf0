package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
)

// migration is one versioned schema step. Versions are applied in order, each
// in its own transaction together with its schema_migrations row, so a crash
// mid-migration leaves the previous version intact. A published migration is
// never edited: a change is a new version.
type migration struct {
	version int
	name    string
	stmts   []string
	// postgresStmts run after stmts on PostgreSQL only; on SQLite the
	// version is recorded with stmts alone.
	postgresStmts []string
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
		// SQLite keeps it (dropping a constraint there rebuilds the table).
		postgresStmts: []string{
			`ALTER TABLE netting_journal DROP CONSTRAINT netting_journal_session_id_fkey`,
		},
	},
}

const createSchemaMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at BIGINT NOT NULL
)`

// migrate applies every migration newer than the database's version. On
// PostgreSQL an advisory lock serialises concurrent openers; on SQLite the
// writer's BEGIN IMMEDIATE does.
func (s *Store) migrate(ctx context.Context) error {
	for _, m := range migrations {
		if err := s.applyMigration(ctx, m); err != nil {
			return fmt.Errorf("sqlstore: migration %d (%s): %w", m.version, m.name, err)
		}
	}
	return nil
}

func (s *Store) applyMigration(ctx context.Context, m migration) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if s.d.name == postgresDialect.name {
			// An arbitrary constant key naming "shardwise sqlstore migrations".
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7305114)`); err != nil {
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
		stmts := m.stmts
		if s.d.name == postgresDialect.name {
			stmts = append(slices.Clip(stmts), m.postgresStmts...)
		}
		for _, stmt := range stmts {
			if _, err := tx.ExecContext(ctx, s.d.q(stmt)); err != nil {
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
