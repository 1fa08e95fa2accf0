package sqlstore

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
)

func TestLegsCodec(t *testing.T) {
	legs := []ledger.Leg{
		ledger.Debit("ünïcode:spendable", math.MaxInt64),
		ledger.Credit("platform:revenue", 1),
		{Account: `quote"and\back`, Amount: math.MinInt64},
	}
	enc, err := encodeLegs(legs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeLegs(enc)
	if err != nil {
		t.Fatalf("decode %s: %v", enc, err)
	}
	if !reflect.DeepEqual(got, legs) {
		t.Fatalf("round trip = %v, want %v", got, legs)
	}
	bad := []string{
		``, `null`, `{}`, `[`, `[["a",1]] x`, `[["a",1]] []`, `[["a"]]`, `[["a",1,2]]`,
		`[[1,1]]`, `[["",1]]`, `[["a",1.5]]`, `[["a","1"]]`, `[["a",9223372036854775808]]`,
		`[["a",1e3]]`, `["a",1]`, `[null]`,
	}
	for _, s := range bad {
		_, err := decodeLegs(s)
		if !errors.Is(err, ErrLegsMalformed) || errcode.Of(err) != CodeStoreCorrupt {
			t.Errorf("decodeLegs(%q) = %v, want ErrLegsMalformed", s, err)
		}
	}
	if got, err := decodeLegs(`[]`); err != nil || len(got) != 0 {
		t.Errorf("decodeLegs([]) = %v, %v; an empty list is shape-valid (the ledger refuses it)", got, err)
	}
}

// naiveDecodeLegs is the obvious decoder on encoding/json, kept as the
// oracle the hand-written decodeLegs is checked against.
func naiveDecodeLegs(s string) ([]ledger.Leg, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	var raw []json.RawMessage
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	legs := make([]ledger.Leg, len(raw))
	for i, r := range raw {
		var pair []json.RawMessage
		if err := json.Unmarshal(r, &pair); err != nil || len(pair) != 2 {
			return nil, false
		}
		if err := json.Unmarshal(pair[0], &legs[i].Account); err != nil || legs[i].Account == "" || pair[0][0] != '"' {
			return nil, false
		}
		if err := json.Unmarshal(pair[1], &legs[i].Amount); err != nil || pair[1][0] == 'n' {
			return nil, false
		}
	}
	return legs, true
}

// FuzzDecodeLegs feeds arbitrary column contents to the decoder: it must
// never panic, must agree with the naive encoding/json decoder on what it
// accepts and what that decodes to, and whatever it accepts must re-encode
// to something that decodes to the same legs.
// marshalLegs is the stored format by definition: encoding/json's bytes for
// the [account, amount] pairs. encodeLegs must write exactly these.
func marshalLegs(t *testing.T, legs []ledger.Leg) string {
	t.Helper()
	pairs := make([][2]any, len(legs))
	for i, l := range legs {
		pairs[i] = [2]any{l.Account, l.Amount}
	}
	b, err := json.Marshal(pairs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestEncodeLegsMatchesJSON(t *testing.T) {
	accounts := []string{"alice:spendable", "", "a<b", "x&y>z", `q"uote`, `back\slash`, "tab\there", "ünï", "\u2028line", "\xffbad", "~ok_!#$%'()*+,-./:;=?@[]^`{|}"}
	for _, a := range accounts {
		for _, amount := range []int64{0, 1, -1, math.MaxInt64, math.MinInt64} {
			legs := []ledger.Leg{{Account: a, Amount: amount}, ledger.Credit("platform:revenue", 7)}
			got, err := encodeLegs(legs)
			if err != nil {
				t.Fatal(err)
			}
			if want := marshalLegs(t, legs); got != want {
				t.Errorf("encodeLegs(%q, %d) = %s, want %s", a, amount, got, want)
			}
		}
	}
	if got, err := encodeLegs(nil); err != nil || got != "[]" {
		t.Errorf("encodeLegs(nil) = %q, %v; want []", got, err)
	}
}

func FuzzDecodeLegs(f *testing.F) {
	f.Add(`[["alice:spendable",-250],["bob:earned",250]]`)
	f.Add(`[["a",9223372036854775807],["b",-9223372036854775808]]`)
	f.Add(` [ [ "a" , 1 ] ] `)
	f.Add(`[["\u00e9",1]]`)
	f.Add(`[["a",1]]]`)
	f.Add(`[["a\"b\u00e9\/",-0],["\ud800",01]]`)
	f.Add("[[\"\xff\",1]]")
	f.Fuzz(func(t *testing.T, s string) {
		legs, err := decodeLegs(s)
		naive, ok := naiveDecodeLegs(s)
		if ok != (err == nil) {
			t.Fatalf("decodeLegs(%q) err = %v, naive ok = %v", s, err, ok)
		}
		if err != nil {
			if !errors.Is(err, ErrLegsMalformed) {
				t.Fatalf("decode error %v is not ErrLegsMalformed", err)
			}
			return
		}
		if !reflect.DeepEqual(legs, naive) {
			t.Fatalf("decodeLegs(%q) = %v, naive = %v", s, legs, naive)
		}
		enc, err := encodeLegs(legs)
		if err != nil {
			t.Fatalf("re-encode %v: %v", legs, err)
		}
		if want := marshalLegs(t, legs); enc != want {
			t.Fatalf("encodeLegs(%v) = %s, encoding/json writes %s", legs, enc, want)
		}
		again, err := decodeLegs(enc)
		if err != nil {
			t.Fatalf("decode of re-encoded %q: %v", enc, err)
		}
		if len(again) != len(legs) {
			t.Fatalf("round trip changed length: %v vs %v", again, legs)
		}
		for i := range legs {
			if again[i] != legs[i] {
				t.Fatalf("round trip changed leg %d: %v vs %v", i, again[i], legs[i])
			}
		}
	})
}

func TestDialectRewrite(t *testing.T) {
	q := `SELECT a FROM t WHERE x = ? AND y IN (?, ?) AND z < {now}{forUpdate}`
	if got, want := postgresDialect.q(q), `SELECT a FROM t WHERE x = $1 AND y IN ($2, $3) AND z < `+postgresDialect.nowMicros+` FOR UPDATE`; got != want {
		t.Errorf("postgres: %s\nwant      %s", got, want)
	}
	if got, want := sqliteDialect.q(q), `SELECT a FROM t WHERE x = ? AND y IN (?, ?) AND z < `+sqliteDialect.nowMicros; got != want {
		t.Errorf("sqlite: %s\nwant    %s", got, want)
	}
}
