package sqlworld

import (
	"context"
	"database/sql"
)

// MigrateOnly applies to db the migrations up to version, as an older
// release of the package left a database, so that a test can open it
// with this one and watch the rest applied. dialect is "sqlite" or
// "postgres".
func MigrateOnly(ctx context.Context, db *sql.DB, dialect string, version int) error {
	d := sqliteDialect
	if dialect == postgresDialect.name {
		d = postgresDialect
	}
	s := &Store{db: db, rdb: db, d: d}
	for _, m := range migrations {
		if m.version > version {
			break
		}
		if err := s.applyMigration(ctx, m); err != nil {
			return err
		}
	}
	return nil
}
