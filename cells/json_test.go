package cells_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

func TestTableJSONRoundTrip(t *testing.T) {
	small := mustGrid(t, cells.GridConfig{World: torus.Config{Width: 320, Height: 224, ChunkEdge: 32, SlabHeight: 64}, RegionEdge: 32})
	tables := []*cells.Table{
		quadrants(t),
		mustTable(t, small, 1<<63, repeat(small.Regions(), "eu-west.zone_3")),
	}
	u, err := cells.Uniform(cells.DefaultGrid(), 42, []string{"zone-1", "zone-2", "zone-3"})
	if err != nil {
		t.Fatal(err)
	}
	tables = append(tables, u)
	for _, tab := range tables {
		data, err := json.Marshal(tab)
		if err != nil {
			t.Fatal(err)
		}
		back, err := cells.ParseTable(data)
		if err != nil {
			t.Fatalf("ParseTable(%s): %v", data, err)
		}
		if !back.Equal(tab) || back.Grid() != tab.Grid() {
			t.Fatalf("round trip changed the table: %s", data)
		}
		// Embedded in another document, through UnmarshalJSON.
		doc, _ := json.Marshal(map[string]any{"table": tab})
		var holder struct{ Table *cells.Table }
		if err := json.Unmarshal(doc, &holder); err != nil || !holder.Table.Equal(tab) {
			t.Fatalf("embedded round trip: %v", err)
		}
	}
	// The wire form is explicit about the grid.
	data, _ := json.Marshal(u)
	for _, s := range []string{`"version":42`, `"regionEdge":8000`, `"width":128000`, `"chunkEdge":32`, `"slabHeight":256`, `"zone-3"`} {
		if !bytes.Contains(data, []byte(s)) {
			t.Errorf("encoding %s lacks %s", data, s)
		}
	}
	if _, err := json.Marshal(&cells.Table{}); err == nil {
		t.Error("zero Table marshalled")
	}
}

func validTableJSON(t testing.TB) string {
	u, err := cells.Uniform(mustGrid(t, cells.GridConfig{RegionEdge: 64_000}), 5, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestParseTableRejects(t *testing.T) {
	valid := validTableJSON(t)
	if _, err := cells.ParseTable([]byte(valid)); err != nil {
		t.Fatalf("valid table refused: %v", err)
	}
	if _, err := cells.ParseTable([]byte(" \n" + valid + "\n\t")); err != nil {
		t.Fatalf("surrounding whitespace refused: %v", err)
	}
	grid := `{"world":{"width":128000,"height":128000,"chunkEdge":32,"slabHeight":256},"regionEdge":64000}`
	cases := map[string]string{
		"empty":            ``,
		"not json":         `version 5`,
		"null":             `null`,
		"array":            `[]`,
		"trailing object":  valid + `{}`,
		"trailing junk":    valid + `x`,
		"unknown field":    `{"version":5,"grid":` + grid + `,"owners":["a","a","b","b"],"extra":1}`,
		"unknown in grid":  `{"version":5,"grid":{"world":{"width":128000,"height":128000,"chunkEdge":32,"slabHeight":256,"depth":1},"regionEdge":64000},"owners":["a","a","b","b"]}`,
		"version 0":        `{"version":0,"grid":` + grid + `,"owners":["a","a","b","b"]}`,
		"negative":         `{"version":-1,"grid":` + grid + `,"owners":["a","a","b","b"]}`,
		"missing version":  `{"grid":` + grid + `,"owners":["a","a","b","b"]}`,
		"missing grid":     `{"version":5,"owners":["a","a","b","b"]}`,
		"implicit edge":    `{"version":5,"grid":{"world":{"width":128000,"height":128000,"chunkEdge":32,"slabHeight":256}},"owners":["a","a","b","b"]}`,
		"bad grid":         `{"version":5,"grid":{"world":{"width":128000,"height":128000,"chunkEdge":32,"slabHeight":256},"regionEdge":64001},"owners":["a","a","b","b"]}`,
		"too few owners":   `{"version":5,"grid":` + grid + `,"owners":["a","a","b"]}`,
		"null owners":      `{"version":5,"grid":` + grid + `,"owners":null}`,
		"empty owner":      `{"version":5,"grid":` + grid + `,"owners":["a","","b","b"]}`,
		"owner not text":   `{"version":5,"grid":` + grid + `,"owners":["a",1,"b","b"]}`,
		"key case":         `{"Version":5,"grid":` + grid + `,"owners":["a","a","b","b"]}`,
		"key case nested":  `{"version":5,"grid":{"world":{"WIDTH":128000,"height":128000,"chunkEdge":32,"slabHeight":256},"regionEdge":64000},"owners":["a","a","b","b"]}`,
		"repeated key":     `{"version":5,"version":6,"grid":` + grid + `,"owners":["a","a","b","b"]}`,
		"repeated nested":  `{"version":5,"grid":{"world":{"width":128000,"height":128000,"chunkEdge":32,"slabHeight":256},"regionEdge":64000,"regionEdge":64000},"owners":["a","a","b","b"]}`,
		"object in owners": `{"version":5,"grid":` + grid + `,"owners":["a",{"x":1},"b","b"]}`,
		"unclosed":         `{"version":5,"grid":` + grid,
	}
	for name, in := range cases {
		tab, err := cells.ParseTable([]byte(in))
		if tab != nil || !errors.Is(err, cells.ErrInvalidTable) || errcode.Of(err) != "CELLS.TABLE_INVALID" {
			t.Errorf("%s: ParseTable = %v, %v; want ErrInvalidTable", name, tab, err)
		}
	}
	// A bad grid or a bad owner is also recognisable as a configuration
	// error, and names the keys the file's author wrote, not the Go fields,
	// with the value they wrote.
	for in, want := range map[string]struct {
		field string
		value any
	}{
		cases["bad grid"]: {"grid.regionEdge", 64001.0},
		`{"version":5,"grid":{"world":{"width":1000,"height":128000,"chunkEdge":32,"slabHeight":256},"regionEdge":64000},"owners":["a"]}`: {"grid.world.width", 1000.0},
		cases["empty owner"]: {"owners[1]", ""},
		`{"version":5,"grid":` + grid + `,"owners":["a","a","a","Zone-B"]}`: {"owners[3]", "Zone-B"},
		`{"version":5,"grid":` + grid + `,"owners":["a","..","b","b"]}`:     {"owners[1]", ".."},
		`{"version":5,"grid":` + grid + `,"owners":["zone a","a","b","b"]}`: {"owners[0]", "zone a"},
		`{"version":5,"grid":` + grid + `,"owners":["a","a","b","ünï"]}`:    {"owners[3]", "ünï"},
	} {
		_, err := cells.ParseTable([]byte(in))
		var ce *errcode.ConfigError
		if !errors.Is(err, cells.ErrInvalidTable) || errcode.Of(err) != "CELLS.TABLE_INVALID" ||
			!errors.Is(err, errcode.ErrConfigInvalid) || !errors.As(err, &ce) || ce.Field != want.field ||
			!strings.Contains(err.Error(), want.field+" = ") {
			t.Errorf("error %v does not name %s", err, want.field)
			continue
		}
		if s, ok := want.value.(string); ok && ce.Value != s {
			t.Errorf("error %v: value %#v, want %q", err, ce.Value, s)
		}
	}
}

// Deeply nested input is refused after a bounded amount of work. The claim
// is checked as bytes allocated, not as time: the unbounded walk built one
// path string per level, about 400 MB for these 20 000 levels.
func TestParseTableRefusesDeepNesting(t *testing.T) {
	for _, data := range []string{
		`{"owners":` + strings.Repeat("[", 20_000),
		`{"owners":` + strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000) + `}`,
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := cells.ParseTable([]byte(data))
		runtime.ReadMemStats(&after)
		if !errors.Is(err, cells.ErrInvalidTable) {
			t.Fatalf("ParseTable of deep nesting = %v, want ErrInvalidTable", err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
			t.Fatalf("refusing %d bytes of nesting allocated %d MB", len(data), alloc>>20)
		}
	}
}

// FuzzParseTable feeds arbitrary bytes to the decoder: it must never panic,
// and whatever it accepts must be a valid table that encodes back to bytes
// that decode to the same table and encode identically.
func FuzzParseTable(f *testing.F) {
	f.Add([]byte(validTableJSON(f)))
	u, _ := cells.Uniform(cells.DefaultGrid(), 9, []string{"x", "y", "z"})
	data, _ := json.Marshal(u)
	f.Add(data)
	f.Add([]byte(`{"version":1,"grid":{"world":{"width":32,"height":32,"chunkEdge":32,"slabHeight":1},"regionEdge":32},"owners":["n"]}`))
	f.Add([]byte(`{"version":1,"grid":{"world":{"width":4294967296,"height":4294967296,"chunkEdge":1048576,"slabHeight":1},"regionEdge":1048576},"owners":[]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := cells.ParseTable(data)
		if err != nil {
			if tab != nil || !errors.Is(err, cells.ErrInvalidTable) {
				t.Fatalf("error %v with table %v, or without ErrInvalidTable", err, tab)
			}
			return
		}
		if err := tab.Validate(); err != nil {
			t.Fatalf("accepted an invalid table: %v", err)
		}
		enc, err := json.Marshal(tab)
		if err != nil {
			t.Fatalf("cannot encode an accepted table: %v", err)
		}
		back, err := cells.ParseTable(enc)
		if err != nil {
			t.Fatalf("cannot decode own encoding %s: %v", enc, err)
		}
		if !back.Equal(tab) {
			t.Fatalf("round trip changed the table")
		}
		enc2, _ := json.Marshal(back)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n%s\n%s", enc, enc2)
		}
		// Every lookup on an accepted table is safe.
		p := torus.Pos{X: -1, Y: 1e9}
		_ = tab.OwnerOf(p)
		_ = tab.AppendForeignOwners(nil, p, 224)
		_, _ = tab.HandoffTarget("someone", p, 32)
	})
}
