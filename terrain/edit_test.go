package terrain

import (
	"bytes"
	"errors"
	"testing"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
)

// TestMarkerDataIsABijection checks every 2-byte Data: it decodes to a
// valid marker that encodes back to the same bytes, so marker data is
// canonical with no check beyond its length.
func TestMarkerDataIsABijection(t *testing.T) {
	for v := range 1 << 16 {
		data := []byte{byte(v), byte(v >> 8)}
		m, err := DecodeMarker(data)
		if err != nil {
			t.Fatalf("DecodeMarker(%x): %v", data, err)
		}
		if err := m.Check(); err != nil {
			t.Fatalf("DecodeMarker(%x) = %+v, which Check refuses: %v", data, m, err)
		}
		if got := m.AppendData(nil); !bytes.Equal(got, data) {
			t.Fatalf("DecodeMarker(%x) = %+v, which encodes as %x", data, m, got)
		}
	}
}

func TestDecodeMarkerRefusesLengths(t *testing.T) {
	for _, data := range [][]byte{nil, {1}, {1, 2, 3}} {
		if _, err := DecodeMarker(data); !errors.Is(err, ErrMalformed) || errcode.Of(err) != CodeMalformed {
			t.Errorf("DecodeMarker(%x) = %v, want %s", data, err, CodeMalformed)
		}
	}
}

func TestMarkerCheck(t *testing.T) {
	for _, m := range []Marker{{X: Cells}, {Y: Cells}, {X: 255, Y: 255}} {
		if _, err := m.Edit(1); !errors.Is(err, ErrInvalid) || errcode.Of(err) != CodeInvalid {
			t.Errorf("Marker%+v.Edit = %v, want %s", m, err, CodeInvalid)
		}
	}
	e, err := Marker{X: 3, Y: 15, Type: 9}.Edit(7)
	if err != nil {
		t.Fatal(err)
	}
	want := Edit{Kind: KindMarker, Data: []byte{0xF3, 9}, Account: 7}
	if e.Kind != want.Kind || !bytes.Equal(e.Data, want.Data) || e.Account != want.Account {
		t.Fatalf("Edit = %+v, want %+v", e, want)
	}
}

func mustMarker(tb testing.TB, x, y, typ uint8, by account.ID) Edit {
	tb.Helper()
	e, err := Marker{X: x, Y: y, Type: typ}.Edit(by)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func TestApply(t *testing.T) {
	var base Heights
	for k := range base {
		base[k] = int16(k)
	}
	game := Edit{Kind: FirstGameKind, Data: []byte("a game's own edit")}
	cases := []struct {
		name  string
		edits []Edit
		want  map[[2]int]uint8 // cell → type; every other cell is 0
	}{
		{"none", nil, nil},
		{"one", []Edit{mustMarker(t, 1, 2, 5, 1)}, map[[2]int]uint8{{1, 2}: 5}},
		{"corners", []Edit{mustMarker(t, 0, 0, 1, 1), mustMarker(t, 15, 15, 2, 1)},
			map[[2]int]uint8{{0, 0}: 1, {15, 15}: 2}},
		{"the last in revision order wins", []Edit{mustMarker(t, 4, 4, 1, 1), mustMarker(t, 4, 4, 2, 2)},
			map[[2]int]uint8{{4, 4}: 2}},
		{"type 0 removes", []Edit{mustMarker(t, 4, 4, 1, 1), mustMarker(t, 4, 4, 0, 2)}, nil},
		{"placed again after removal", []Edit{mustMarker(t, 4, 4, 1, 1), mustMarker(t, 4, 4, 0, 1), mustMarker(t, 4, 4, 3, 1)},
			map[[2]int]uint8{{4, 4}: 3}},
		{"game kinds are skipped", []Edit{game, mustMarker(t, 0, 1, 1, 1), game}, map[[2]int]uint8{{0, 1}: 1}},
	}
	for _, c := range cases {
		s, err := Apply(base, c.edits)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if s.Heights != base {
			t.Errorf("%s: heights changed", c.name)
		}
		for y := range Cells {
			for x := range Cells {
				if got, want := s.MarkerAt(x, y), c.want[[2]int{x, y}]; got != want {
					t.Errorf("%s: cell (%d, %d) has marker %d, want %d", c.name, x, y, got, want)
				}
			}
		}
	}
}

func TestApplyRefusesAMalformedMarker(t *testing.T) {
	edits := []Edit{mustMarker(t, 1, 1, 1, 1), {Kind: KindMarker, Data: []byte{1}}}
	_, err := Apply(Heights{}, edits)
	if !errors.Is(err, ErrMalformed) || errcode.Of(err) != CodeMalformed {
		t.Fatalf("Apply = %v, want %s", err, CodeMalformed)
	}
}
