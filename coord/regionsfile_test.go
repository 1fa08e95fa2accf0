package coord

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

func smallGrid(t testing.TB) cells.Grid {
	g, err := cells.NewGrid(cells.GridConfig{World: torus.Config{Width: 16_000, Height: 16_000}, RegionEdge: 8_000})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestFormatThenParseRoundTrips(t *testing.T) {
	tb, err := cells.NewTable(smallGrid(t), 3, []string{"zone-a", "7", "true", "zone-a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, asYAML := range []bool{false, true} {
		b, err := FormatRegions(tb, asYAML)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseRegionsFile(b)
		if err != nil {
			t.Fatalf("yaml=%v: parse own output %s: %v", asYAML, b, err)
		}
		if !got.Equal(tb) {
			t.Fatalf("yaml=%v: round trip changed the table:\n%s", asYAML, b)
		}
	}
}

func TestParseRegionsFileYAML(t *testing.T) {
	// Hand-written YAML: a comment, owners YAML would read as a number and
	// a boolean, flow and block styles mixed.
	doc := `
# two by two regions
version: 2
grid:
  world: {width: 16000, height: 16000, chunkEdge: 32, slabHeight: 256}
  regionEdge: 8000
owners:
  - zone-a
  - 7
  - yes
  - "zone-a"
`
	got, err := ParseRegionsFile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want, err := cells.NewTable(smallGrid(t), 2, []string{"zone-a", "7", "yes", "zone-a"})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(want) {
		t.Fatalf("got owners %v version %d", got.Owners(), got.Version())
	}
}

// A YAML flow mapping starts with '{' like JSON but is not JSON.
func TestParseRegionsFileYAMLFlowMapping(t *testing.T) {
	doc := `{version: 1, grid: {world: {width: 16000, height: 16000, chunkEdge: 32, slabHeight: 256}, regionEdge: 8000}, owners: [a, b, c, d]}`
	got, err := ParseRegionsFile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got.Version() != 1 || got.Owner(3) != "d" {
		t.Fatalf("got version %d owners %v", got.Version(), got.Owners())
	}
}

func TestParseRegionsFileRefuses(t *testing.T) {
	grid := `grid: {world: {width: 16000, height: 16000, chunkEdge: 32, slabHeight: 256}, regionEdge: 8000}`
	for _, tc := range []struct{ name, in string }{
		{"empty", "  \n"},
		{"not yaml", "version: [1"},
		{"two documents", "version: 1\n---\nversion: 2\n"},
		{"alias", "version: 1\n" + grid + "\nowners: &o [a, b, c, d]\nmore: *o\n"},
		{"unknown field", "version: 1\n" + grid + "\nowners: [a, b, c, d]\nextra: 1\n"},
		{"duplicate key", "version: 1\nversion: 2\n" + grid + "\nowners: [a, b, c, d]\n"},
		{"too few owners", "version: 1\n" + grid + "\nowners: [a, b]\n"},
		{"version 0", "version: 0\n" + grid + "\nowners: [a, b, c, d]\n"},
		{"json trailing", `{"version":1} {}`},
		{"custom tag", "version: !!binary aGVsbG8=\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, err := ParseRegionsFile([]byte(tc.in))
			if err == nil {
				t.Fatalf("ParseRegionsFile accepted %q as version %d", tc.in, tb.Version())
			}
			wantCode(t, err, CodeRegionsInvalid)
		})
	}
	// A table error from cells is said once, and still matches both
	// packages' sentinels.
	_, err := ParseRegionsFile([]byte("version: 1\n" + grid + "\nowners: [a, b]\n"))
	if msg := err.Error(); strings.Count(msg, "invalid region table") != 1 || !strings.HasPrefix(msg, "coord: ") {
		t.Errorf("message %q: want one \"invalid region table\", after \"coord: \"", msg)
	}
	if !errors.Is(err, ErrRegionsInvalid) || !errors.Is(err, cells.ErrInvalidTable) {
		t.Errorf("%v: want both ErrRegionsInvalid and cells.ErrInvalidTable", err)
	}
	// An owner that is not a node name is reported under its key path in
	// the file, with the value the operator wrote, in either form.
	for in, want := range map[string][2]string{
		"version: 1\n" + grid + "\nowners: [a, b, Zone-C, d]\n": {"owners[2]", "Zone-C"},
		"version: 1\n" + grid + "\nowners: [a, b, c, ..]\n":     {"owners[3]", ".."},
		"version: 1\n" + grid + "\nowners: [a, 'b c', c, d]\n":  {"owners[1]", "b c"},
		`{"version":1,"grid":{"world":{"width":16000,"height":16000,"chunkEdge":32,"slabHeight":256},"regionEdge":8000},"owners":["a","b","c","D"]}`: {"owners[3]", "D"},
	} {
		_, err := ParseRegionsFile([]byte(in))
		wantCode(t, err, CodeRegionsInvalid)
		if !errors.Is(err, cells.ErrInvalidTable) {
			t.Fatalf("%q: error %v is not cells.ErrInvalidTable", in, err)
		}
		if ce := asType[*errcode.ConfigError](t, err); ce.Field != want[0] || ce.Value != want[1] {
			t.Fatalf("%q: error %v, want %s = %q", in, err, want[0], want[1])
		}
	}
	big := bytes.Repeat([]byte(" "), MaxRegionsFile+1)
	if _, err := ParseRegionsFile(big); !errors.Is(err, ErrRegionsInvalid) {
		t.Fatalf("oversized file: %v", err)
	}
}

// FuzzParseRegionsFile: the operator's file is outside bytes. Parsing never
// panics; whatever parses is a valid table that formats and parses back to
// itself in both forms.
func FuzzParseRegionsFile(f *testing.F) {
	tb, err := cells.NewTable(smallGrid(f), 1, []string{"a", "b", "c", "d"})
	if err != nil {
		f.Fatal(err)
	}
	js, _ := FormatRegions(tb, false)
	ym, _ := FormatRegions(tb, true)
	f.Add(js)
	f.Add(ym)
	f.Add([]byte("version: 1\nowners: [1, 2]\n"))
	f.Add([]byte("a: &x [1]\nb: *x\n"))
	f.Add([]byte(strings.Repeat("[", 100)))
	f.Fuzz(func(t *testing.T, b []byte) {
		tb, err := ParseRegionsFile(b)
		if err != nil {
			if !errors.Is(err, ErrRegionsInvalid) {
				t.Fatalf("error %v does not match ErrRegionsInvalid", err)
			}
			return
		}
		if err := tb.Validate(); err != nil {
			t.Fatalf("parsed an invalid table: %v", err)
		}
		for _, asYAML := range []bool{false, true} {
			out, err := FormatRegions(tb, asYAML)
			if err != nil {
				t.Fatalf("format: %v", err)
			}
			again, err := ParseRegionsFile(out)
			if err != nil {
				t.Fatalf("yaml=%v: own output does not parse: %v\n%s", asYAML, err, out)
			}
			if !again.Equal(tb) {
				t.Fatalf("yaml=%v: round trip changed the table", asYAML)
			}
		}
	})
}
