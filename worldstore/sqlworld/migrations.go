package sqlworld

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
)

// migration is one versioned schema step, applied in its own transaction
// together with its worldstore_migrations row, so a crash mid-migration
// leaves the previous version intact. A published migration is never
// edited: a change is a new version. Column types differ by engine (BLOB
// and REAL against BYTEA and DOUBLE PRECISION; WITHOUT ROWID exists only
// on SQLite), so each engine's statements are written out in full rather
// than through macros a later edit could change under a published version.
type migration struct {
	version       int
	name          string
	stmts         []string // both engines, before the engine's own
	sqliteStmts   []string
	postgresStmts []string
}

var migrations = []migration{
	{
		version: 1,
		name:    "players and chunk edits",
		// world_players: one row per account, the last record saved; the
		// epoch column is the fence of SavePlayer. world_chunks: one row
		// per chunk ever edited, its revision (= its number of edits), the
		// row AppendEdit's compare-and-set updates. world_edits: the edits,
		// keyed by chunk and revision, so Edits is one range scan.
		// Accounts are a uint64's bits as BIGINT; times unix microseconds
		// from the database's clock.
		sqliteStmts: []string{
			`CREATE TABLE world_players (
				account  BIGINT PRIMARY KEY,
				epoch    BIGINT NOT NULL,
				x        REAL NOT NULL,
				y        REAL NOT NULL,
				z        REAL NOT NULL,
				state    BLOB NOT NULL,
				saved_at BIGINT NOT NULL
			) WITHOUT ROWID`,
			`CREATE TABLE world_chunks (
				x    INTEGER NOT NULL,
				y    INTEGER NOT NULL,
				slab INTEGER NOT NULL,
				rev  BIGINT NOT NULL,
				PRIMARY KEY (x, y, slab)
			) WITHOUT ROWID`,
			`CREATE TABLE world_edits (
				x        INTEGER NOT NULL,
				y        INTEGER NOT NULL,
				slab     INTEGER NOT NULL,
				rev      BIGINT NOT NULL,
				kind     INTEGER NOT NULL,
				data     BLOB NOT NULL,
				account  BIGINT NOT NULL,
				saved_at BIGINT NOT NULL,
				PRIMARY KEY (x, y, slab, rev)
			) WITHOUT ROWID`,
		},
		postgresStmts: []string{
			`CREATE TABLE world_players (
				account  BIGINT PRIMARY KEY,
				epoch    BIGINT NOT NULL,
				x        DOUBLE PRECISION NOT NULL,
				y        DOUBLE PRECISION NOT NULL,
				z        DOUBLE PRECISION NOT NULL,
				state    BYTEA NOT NULL,
				saved_at BIGINT NOT NULL
			)`,
			`CREATE TABLE world_chunks (
				x    INTEGER NOT NULL,
				y    INTEGER NOT NULL,
				slab INTEGER NOT NULL,
				rev  BIGINT NOT NULL,
				PRIMARY KEY (x, y, slab)
			)`,
			`CREATE TABLE world_edits (
				x        INTEGER NOT NULL,
				y        INTEGER NOT NULL,
				slab     INTEGER NOT NULL,
				rev      BIGINT NOT NULL,
				kind     INTEGER NOT NULL,
				data     BYTEA NOT NULL,
				account  BIGINT NOT NULL,
				saved_at BIGINT NOT NULL,
				PRIMARY KEY (x, y, slab, rev)
			)`,
		},
	},
	{
		version: 2,
		name:    "final player records",
		// final_save: 1 on a session's last record (its logout's), which
		// no later save of the same epoch may overwrite (invariant 1 of
		// package worldstore). SMALLINT 0/1 on both engines, so one
		// statement compares it on either; rows written before it are not
		// final, as they were not.
		stmts: []string{
			`ALTER TABLE world_players ADD COLUMN final_save SMALLINT NOT NULL DEFAULT 0`,
		},
	},
}

// LatestSchemaVersion is the version a freshly opened store is at.
var LatestSchemaVersion = migrations[len(migrations)-1].version

const createMigrations = `CREATE TABLE IF NOT EXISTS worldstore_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at BIGINT NOT NULL
)`

// migrationLockKey is the PostgreSQL advisory lock that serialises openers:
// an arbitrary constant naming "shardwise worldstore migrations", other
// than netting/sqlstore's (7305114), so the two stores can open on one
// database at once.
const migrationLockKey = 7305115

// migrate applies every migration the database does not have yet.
func (s *Store) migrate(ctx context.Context) error {
	for _, m := range migrations {
		if err := s.applyMigration(ctx, m); err != nil {
			return fmt.Errorf("sqlworld: migration %d (%s): %w", m.version, m.name, err)
		}
	}
	return nil
}

func (s *Store) applyMigration(ctx context.Context, m migration) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if s.d.name == postgresDialect.name {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey); err != nil {
				return err
			}
		}
		// Inside the lock: two PostgreSQL openers racing CREATE TABLE IF
		// NOT EXISTS can otherwise both try to create it.
		if _, err := tx.ExecContext(ctx, createMigrations); err != nil {
			return err
		}
		var applied int
		if err := tx.QueryRowContext(ctx, s.d.q(`SELECT COUNT(*) FROM worldstore_migrations WHERE version = ?`), m.version).Scan(&applied); err != nil {
			return err
		}
		if applied > 0 {
			return nil
		}
		stmts := m.stmts
		switch s.d.name {
		case sqliteDialect.name:
			stmts = append(slices.Clip(stmts), m.sqliteStmts...)
		case postgresDialect.name:
			stmts = append(slices.Clip(stmts), m.postgresStmts...)
		}
		for _, stmt := range stmts {
			if _, err := tx.ExecContext(ctx, s.d.q(stmt)); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO worldstore_migrations (version, name, applied_at) VALUES (?, ?, {now})`), m.version, m.name)
		return err
	})
}

// SchemaVersion returns the newest applied migration version.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	var v sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, `SELECT MAX(version) FROM worldstore_migrations`).Scan(&v); err != nil {
		return 0, s.fail("schema version", err)
	}
	return int(v.Int64), nil
}
