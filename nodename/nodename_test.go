package nodename_test

import (
	"errors"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/nodename"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		ok     bool
		reason string // a part of the reason, when refused
	}{
		{"zone-a", true, ""},
		{"a", true, ""},
		{"0", true, ""},
		{"node-17", true, ""},
		{"eu-west.zone_3", true, ""},
		{"a.", true, ""},
		{"a..b", true, ""},
		{strings.Repeat("x", nodename.MaxLen), true, ""},
		{"", false, "empty"},
		{strings.Repeat("x", nodename.MaxLen+1), false, "at most 64 bytes"},
		{".", false, "start with"},
		{"..", false, "start with"},
		{".hidden", false, "start with"},
		{"-rf", false, "start with"},
		{"_a", false, "start with"},
		{"Zone-A", false, "byte 0 is 'Z'"},
		{"zone a", false, "byte 4 is ' '"},
		{"a/b", false, "byte 1 is '/'"},
		{"a\x00", false, `byte 1 is '\x00'`},
		{"zoné", false, "byte 3 is 'é'"},
		{"a\xff", false, `byte 1 is '�'`},
	}
	for _, tc := range tests {
		err := nodename.Check("Config.Name", tc.name)
		if got := nodename.Valid(tc.name); got != tc.ok {
			t.Errorf("Valid(%q) = %v, want %v", tc.name, got, tc.ok)
		}
		if tc.ok {
			if err != nil {
				t.Errorf("Check(%q) = %v, want nil", tc.name, err)
			}
			continue
		}
		var ce *errcode.ConfigError
		if !errors.Is(err, errcode.ErrConfigInvalid) || !errors.As(err, &ce) {
			t.Errorf("Check(%q) = %v, want a *errcode.ConfigError", tc.name, err)
			continue
		}
		if ce.Field != "Config.Name" || ce.Value != tc.name || !strings.Contains(ce.Reason, tc.reason) {
			t.Errorf("Check(%q) = %+v, want field Config.Name, the value, and a reason with %q", tc.name, ce, tc.reason)
		}
	}
}

func TestCheckCutsHugeValues(t *testing.T) {
	huge := strings.Repeat("a", 1<<20)
	var ce *errcode.ConfigError
	if err := nodename.Check("name", huge); !errors.As(err, &ce) {
		t.Fatalf("Check of 1 MiB = %v", err)
	}
	if v := ce.Value.(string); len(v) > nodename.MaxLen+len("…") || !strings.HasPrefix(huge, strings.TrimSuffix(v, "…")) {
		t.Fatalf("value %q is not the name cut to %d bytes", v, nodename.MaxLen)
	}
}

func TestValidDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = nodename.Valid("eu-west.zone_3") }); n != 0 {
		t.Fatalf("Valid allocates %v times", n)
	}
}

// naive is the rule written as a regular expression, for the fuzz test to
// check the hand-written loop against.
var naive = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// FuzzCheck: names come from certificates, etcd and operators' files. The
// validator never panics, agrees with the regular expression, and every
// name it accepts survives the places a name is used without escaping or
// resolving to something else.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"zone-a", "", ".", "..", "-a", "Zone", "a/b", "a\xff", strings.Repeat("z", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := nodename.Check("f", name)
		ok := nodename.Valid(name)
		if ok != (err == nil) {
			t.Fatalf("Valid(%q) = %v but Check = %v", name, ok, err)
		}
		if want := naive.MatchString(name); ok != want {
			t.Fatalf("Valid(%q) = %v, the regular expression says %v", name, ok, want)
		}
		if !ok {
			var ce *errcode.ConfigError
			if !errors.As(err, &ce) || ce.Field != "f" || ce.Reason == "" {
				t.Fatalf("Check(%q) = %v, want a ConfigError naming field f", name, err)
			}
			return
		}
		if url.PathEscape(name) != name {
			t.Fatalf("%q changes when escaped in a URI path", name)
		}
		u, perr := url.Parse("shardwise://node/" + name)
		if perr != nil || u.Path != "/"+name || u.ResolveReference(&url.URL{}).Path != "/"+name {
			t.Fatalf("%q does not round-trip as a node URI: %v %+v", name, perr, u)
		}
		if filepath.Base(name) != name || filepath.Clean(name) != name {
			t.Fatalf("%q is not a plain file name", name)
		}
	})
}
