// Package dburl reads the database URLs shardwise's SQL stores take:
// "sqlite:///abs/path.db", "sqlite://rel/path.db", "sqlite://:memory:", and
// "postgres://…" or "postgresql://…" (anything pgx accepts). Both the world
// store (worldstore/sqlworld) and the ledger (netting/sqlstore) open by URL
// through it, so a flag takes the same forms everywhere.
package dburl

import (
	"net/url"
	"strings"

	"github.com/shardwise/shardwise/errcode"
)

// Kind is the database a URL names.
type Kind int

const (
	// SQLite: Target is the file path (or ":memory:").
	SQLite Kind = iota + 1
	// Postgres: Target is the whole URL, for pgx.
	Postgres
)

// Parse returns what rawURL names and the target to open. A URL of another
// scheme is CONFIG.INVALID naming field, with any password redacted.
func Parse(field, rawURL string) (Kind, string, error) {
	switch {
	case strings.HasPrefix(rawURL, "sqlite://"):
		return SQLite, strings.TrimPrefix(rawURL, "sqlite://"), nil
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		return Postgres, rawURL, nil
	}
	return 0, "", errcode.Config(field, Redact(rawURL), `must start with "sqlite://", "postgres://" or "postgresql://"`)
}

// Redact hides a password in a URL that is going into a message.
func Redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if i := strings.Index(raw, "://"); i >= 0 {
		return raw[:i+3] + "…"
	}
	return raw
}
