package account_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testseed"
)

func TestParse(t *testing.T) {
	tests := []struct {
		text   string
		want   account.ID
		reason string // a part of the reason, when refused
	}{
		{"1", 1, ""},
		{"7", 7, ""},
		{"10", 10, ""},
		{"9007199254740993", 9007199254740993, ""},
		{"18446744073709551615", math.MaxUint64, ""},
		{"", 0, "empty"},
		{"0", 0, "None"},
		{"00", 0, "leading zero"},
		{"07", 0, "leading zero"},
		{"+7", 0, "byte 0 is '+'"},
		{"-7", 0, "byte 0 is '-'"},
		{" 7", 0, "byte 0 is ' '"},
		{"7 ", 0, "byte 1 is ' '"},
		{"7\n", 0, `byte 1 is '\n'`},
		{"1e3", 0, "byte 1 is 'e'"},
		{"0x1f", 0, "leading zero"},
		{"1_000", 0, "byte 1 is '_'"},
		{"١", 0, "byte 0 is 0xd9"}, // an Arabic-Indic digit is not a decimal digit here
		{"alice", 0, "byte 0 is 'a'"},
		{"18446744073709551616", 0, "larger than"},
		{"99999999999999999999", 0, "larger than"},
		{"100000000000000000000", 0, "longer than 20"},
	}
	for _, tc := range tests {
		got, err := account.Parse(tc.text)
		if tc.reason == "" {
			if err != nil || got != tc.want {
				t.Errorf("Parse(%q) = %d, %v; want %d", tc.text, got, err, tc.want)
			}
			continue
		}
		var ie *account.InvalidError
		if !errors.Is(err, account.ErrInvalid) || !errors.As(err, &ie) || errcode.Of(err) != account.CodeInvalid {
			t.Errorf("Parse(%q) = %d, %v; want an *account.InvalidError", tc.text, got, err)
			continue
		}
		if got != account.None || ie.Text != tc.text || !strings.Contains(ie.Reason, tc.reason) {
			t.Errorf("Parse(%q) = %d, %+v; want None, the text and a reason with %q", tc.text, got, ie, tc.reason)
		}
	}
}

// A megabyte of garbage gives a readable error.
func TestParseCutsLongText(t *testing.T) {
	_, err := account.Parse(strings.Repeat("9", 1<<20))
	var ie *account.InvalidError
	if !errors.As(err, &ie) || len(ie.Text) > account.MaxTextLen+8+len("…") {
		t.Fatalf("Parse(1 MiB) = %v, want an error with the text cut", err)
	}
}

// Every account's text parses back to it, and only that text does.
func TestTextRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	for range 10_000 {
		id := account.ID(r.Uint64() >> r.UintN(64))
		if id == account.None {
			continue
		}
		s := id.String()
		if got, err := account.Parse(s); err != nil || got != id {
			t.Fatalf("Parse(%q) = %d, %v; want %d", s, got, err, id)
		}
		b, err := id.MarshalText()
		if err != nil || string(b) != s {
			t.Fatalf("MarshalText(%d) = %q, %v; want %q", id, b, err, s)
		}
		var back account.ID
		if err := back.UnmarshalText(b); err != nil || back != id {
			t.Fatalf("UnmarshalText(%q) = %d, %v; want %d", b, back, err, id)
		}
		if _, err := account.Parse("0" + s); err == nil {
			t.Fatalf("Parse(%q) accepted a leading zero", "0"+s)
		}
	}
}

func TestNoneHasNoText(t *testing.T) {
	if account.None.Valid() || !account.ID(1).Valid() {
		t.Fatal("Valid: None must be invalid, 1 valid")
	}
	if _, err := account.None.MarshalText(); !errors.Is(err, account.ErrInvalid) {
		t.Fatalf("MarshalText(None) = %v, want ErrInvalid", err)
	}
	var id account.ID = 5
	if err := id.UnmarshalText([]byte("0")); !errors.Is(err, account.ErrInvalid) || id != 5 {
		t.Fatalf("UnmarshalText(\"0\") = %v, left %d; want ErrInvalid and the id unchanged", err, id)
	}
}

func TestParseDoesNotAllocate(t *testing.T) {
	var sink account.ID
	if n := testing.AllocsPerRun(100, func() { sink, _ = account.Parse("18446744073709551615") }); n != 0 {
		t.Fatalf("Parse allocates %v times", n)
	}
	buf := make([]byte, 0, account.MaxTextLen)
	if n := testing.AllocsPerRun(100, func() { buf, _ = account.ID(12345).AppendText(buf[:0]) }); n != 0 {
		t.Fatalf("AppendText allocates %v times", n)
	}
	_ = sink
}

// Parse reads text from outside (tokens of old formats, keys, flags, logs):
// it agrees with a naive reference, strconv plus "print it back and compare".
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "0", "01", "18446744073709551615", "18446744073709551616", "", "+1", "-0", " 1", "١"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := account.Parse(s)
		v, refErr := strconv.ParseUint(s, 10, 64)
		want := refErr == nil && v != 0 && strconv.FormatUint(v, 10) == s
		if want != (err == nil) {
			t.Fatalf("Parse(%q) = %d, %v; the reference says valid=%v", s, got, err, want)
		}
		if err != nil {
			if !errors.Is(err, account.ErrInvalid) || got != account.None {
				t.Fatalf("Parse(%q) = %d, %v; want None and ErrInvalid", s, got, err)
			}
			return
		}
		if uint64(got) != v || got.String() != s {
			t.Fatalf("Parse(%q) = %d, which prints as %q", s, got, got.String())
		}
	})
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := account.Parse("9007199254740993"); err != nil {
			b.Fatal(err)
		}
	}
}
