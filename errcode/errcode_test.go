package errcode_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/errcode"
)

func TestOf(t *testing.T) {
	errNotFound := errcode.New("THING.NOT_FOUND", "thing not found")
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"plain", errors.New("x"), ""},
		{"sentinel", errNotFound, "THING.NOT_FOUND"},
		{"wrapped sentinel", fmt.Errorf("get: %w", errNotFound), "THING.NOT_FOUND"},
		{"detail", errNotFound.Wrap("id %d", 7), "THING.NOT_FOUND"},
		{"config", errcode.Config("Vnodes", -1, "must be at least 1"), "CONFIG.INVALID"},
		{"wrapped config", fmt.Errorf("open: %w", errcode.Config("A", 1, "r")), "CONFIG.INVALID"},
	}
	for _, c := range cases {
		if got := errcode.Of(c.err); got != c.want {
			t.Errorf("%s: Of = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestSentinelIs(t *testing.T) {
	errA := errcode.New("A", "a")
	errB := errcode.New("A", "a")
	d := errA.Wrap("more")
	if !errors.Is(d, errA) {
		t.Fatal("detailed error does not match its sentinel")
	}
	if errors.Is(d, errB) {
		t.Fatal("detailed error matches a different sentinel with the same code")
	}
	if got := d.Error(); got != "a: more" {
		t.Fatalf("message %q", got)
	}
}

func TestConfigError(t *testing.T) {
	err := fmt.Errorf("router: %w", errcode.Config("Health.Interval", "0s", "must be positive"))
	if !errors.Is(err, errcode.ErrConfigInvalid) {
		t.Fatal("config error does not match ErrConfigInvalid")
	}
	var ce *errcode.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Health.Interval" {
		t.Fatalf("errors.As: %v", ce)
	}
	for _, s := range []string{"Health.Interval", `"0s"`, "must be positive"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err.Error(), s)
		}
	}
}

type nodeName string // a string kind without a String method

type level int

func (l level) String() string { return fmt.Sprintf("level-%d", int(l)) }

type ptrStringer struct{ name string }

func (p *ptrStringer) String() string { return p.name } // panics on nil

// TestConfigErrorValueFormat checks that ConfigError prints each value the
// way a user writes it, not as Go syntax (%#v printed durations as raw
// nanoseconds: "Duration = -1000000000").
func TestConfigErrorValueFormat(t *testing.T) {
	cases := []struct {
		name  string
		value any
		want  string
	}{
		{"negative duration", -time.Second, "-1s"},
		{"fractional duration", 1500 * time.Millisecond, "1.5s"},
		{"zero duration", time.Duration(0), "0s"},
		{"string", "econ-9", `"econ-9"`},
		{"empty string", "", `""`},
		{"string with quote and space", `a "b" c`, `"a \"b\" c"`},
		{"named string kind", nodeName("zone-a"), `"zone-a"`},
		{"stringer", level(3), "level-3"},
		{"nil pointer stringer", (*ptrStringer)(nil), "<nil>"},
		{"error", errors.New("bad key"), "bad key"},
		{"int", -1, "-1"},
		{"uint64", uint64(1) << 63, "9223372036854775808"},
		{"float", 1.5, "1.5"},
		{"big float", 1e9, "1e+09"},
		{"bool", true, "true"},
		{"nil", nil, "<nil>"},
		{"strings", []string{"a", ""}, `["a", ""]`},
		{"nil strings", []string(nil), "[]"},
		{"durations", []time.Duration{time.Second, -time.Millisecond}, "[1s, -1ms]"},
		{"array of ints", [2]int{1, 2}, "[1, 2]"},
		{"bytes", []byte{1, 2}, "[1 2]"},
		{"time", time.Date(2023, 12, 31, 23, 0, 0, 0, time.UTC), "2023-12-31T23:00:00Z"},
		{"struct", struct {
			Host string
			Port int
		}{"h", 1}, "{Host:h Port:1}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := errcode.Config("F", c.value, "why")
			want := "invalid configuration: F = " + c.want + ": why"
			if got := err.Error(); got != want {
				t.Errorf("Error() = %s\nwant      %s", got, want)
			}
		})
	}
}

func ExampleConfig_duration() {
	fmt.Println(errcode.Config("--duration", -time.Second, "must be positive"))
	fmt.Println(errcode.Config("--kill", "econ-9", "is not one of --nodes"))
	// Output:
	// invalid configuration: --duration = -1s: must be positive
	// invalid configuration: --kill = "econ-9": is not one of --nodes
}

func ExampleConfig() {
	err := errcode.Config("Replicas", 0, "must be at least 1")
	fmt.Println(errcode.Of(err))
	fmt.Println(err)
	// Output:
	// CONFIG.INVALID
	// invalid configuration: Replicas = 0: must be at least 1
}

func TestWithCode(t *testing.T) {
	if errcode.WithCode(nil) != nil {
		t.Fatal("errcode.WithCode(nil) is not nil")
	}
	plain := errors.New("plain")
	if got := errcode.WithCode(plain); got != plain {
		t.Fatalf("an error with no code changed: %v", got)
	}
	err := errcode.WithCode(errcode.Config("--port", 0, "must be positive"))
	if want := `CONFIG.INVALID: invalid configuration: --port = 0: must be positive`; err.Error() != want {
		t.Fatalf("got %q, want %q", err, want)
	}
	var ce *errcode.ConfigError
	if !errors.Is(err, errcode.ErrConfigInvalid) || !errors.As(err, &ce) || ce.Field != "--port" {
		t.Fatalf("errors.Is/As do not see through: %v", err)
	}
}

func TestRenameFieldsAndIndexless(t *testing.T) {
	names := map[string]string{"Players": "--players", "Endpoints": "--endpoints"}
	for _, tc := range []struct {
		name    string
		err     error
		rename  bool
		wantErr string
	}{
		{"a named field", errcode.Config("Players", -1, "must not be negative"), true, `invalid configuration: --players = -1: must not be negative`},
		{"an unnamed field", errcode.Config("Seed", 1, "bad"), true, `invalid configuration: Seed = 1: bad`},
		{"not a config error", errors.New("plain"), true, `plain`},
		{"a list element", errcode.Config("Endpoints[2]", "x", "no port"), false, `invalid configuration: Endpoints = "x": no port`},
		{"an element, then renamed", errcode.Config("Endpoints[12]", "x", "no port"), true, `invalid configuration: --endpoints = "x": no port`},
		{"no index", errcode.Config("Endpoints", "x", "no port"), false, `invalid configuration: Endpoints = "x": no port`},
		{"not an index", errcode.Config("Endpoints[a]", "x", "no port"), false, `invalid configuration: Endpoints[a] = "x": no port`},
		{"empty brackets", errcode.Config("Endpoints[]", "x", "no port"), false, `invalid configuration: Endpoints[] = "x": no port`},
	} {
		got := errcode.Indexless(tc.err)
		if tc.rename {
			got = errcode.RenameFields(got, names)
		}
		if got.Error() != tc.wantErr {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.wantErr)
		}
	}
}
