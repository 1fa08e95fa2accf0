package errcode_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

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

func ExampleConfig() {
	err := errcode.Config("Replicas", 0, "must be at least 1")
	fmt.Println(errcode.Of(err))
	fmt.Println(err)
	// Output:
	// CONFIG.INVALID
	// invalid configuration: Replicas = 0: must be at least 1
}
