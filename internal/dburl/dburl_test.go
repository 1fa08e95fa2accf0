package dburl

import (
	"strings"
	"testing"

	"github.com/shardwise/shardwise/errcode"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		url    string
		kind   Kind
		target string
	}{
		{"sqlite:///var/lib/x.db", SQLite, "/var/lib/x.db"},
		{"sqlite://rel/x.db", SQLite, "rel/x.db"},
		{"sqlite://:memory:", SQLite, ":memory:"},
		{"postgres://u:p@h/db", Postgres, "postgres://u:p@h/db"},
		{"postgresql://h/db?sslmode=disable", Postgres, "postgresql://h/db?sslmode=disable"},
	} {
		kind, target, err := Parse("--store", tc.url)
		if err != nil || kind != tc.kind || target != tc.target {
			t.Errorf("Parse(%q) = %v, %q, %v; want %v, %q", tc.url, kind, target, err, tc.kind, tc.target)
		}
	}
}

func TestParseRefusesOtherSchemesWithoutLeakingThePassword(t *testing.T) {
	for _, raw := range []string{"mysql://root:hunter2@db/x", "/plain/path.db", "", "sqlite:/one-slash"} {
		_, _, err := Parse("--store", raw)
		if errcode.Of(err) != errcode.ConfigInvalid {
			t.Fatalf("Parse(%q): %v, want CONFIG.INVALID", raw, err)
		}
		if !strings.Contains(err.Error(), "--store") {
			t.Errorf("error %q does not name the flag", err)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error %q shows the password", err)
		}
	}
}
