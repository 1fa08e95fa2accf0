package zonecli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/shardwise/shardwise/errcode"
)

// errStop ends a run in New, before any I/O, carrying what New saw.
type errStop struct{ saw string }

func (e errStop) Error() string { return "stopped: " + e.saw }

// twoModules are modules a and b; both register --size (each its own
// variable), only a --colour and only b --count. Their New reports what
// it was given and stops the run.
func twoModules() []Module {
	var (
		aSize, bSize int
		colour       string
		count        int
	)
	return []Module{
		{Name: "a", Usage: "the first",
			Flags: func(f *pflag.FlagSet) {
				f.IntVar(&aSize, "size", 1, "size")
				f.StringVar(&colour, "colour", "red", "colour")
			},
			New: func(_ context.Context, n Node) (Hosted, error) {
				return Hosted{}, errStop{fmt.Sprintf("a size=%d colour=%s seed=%d", aSize, colour, n.Seed)}
			},
		},
		{Name: "b",
			Flags: func(f *pflag.FlagSet) {
				f.IntVar(&bSize, "size", 1, "size")
				f.IntVar(&count, "count", 3, "count")
			},
			FlagOf: map[string]string{"Count": "--count"},
			New: func(_ context.Context, n Node) (Hosted, error) {
				if count == 0 {
					return Hosted{}, errcode.Config("Count", count, "must be positive")
				}
				return Hosted{}, errStop{fmt.Sprintf("b size=%d count=%d seed=%d", bSize, count, n.Seed)}
			},
		},
	}
}

func TestModuleFlags(t *testing.T) {
	base := []string{"--endpoints", "http://127.0.0.1:1", "--name", "zone-a", "--certs", t.TempDir(), "--seed", "9"}
	cases := []struct {
		args []string
		want string
	}{
		{nil, "stopped: a size=1 colour=red seed=9"},
		{[]string{"--size", "5", "--colour", "blue"}, "stopped: a size=5 colour=blue seed=9"},
		// --size is a's flag on the command; b gets the value typed.
		{[]string{"--module", "b", "--size", "7"}, "stopped: b size=7 count=3 seed=9"},
		{[]string{"--module", "b", "--colour", "blue"}, `CONFIG.INVALID: invalid configuration: --colour = "blue": is for --module a`},
		{[]string{"--count", "4"}, "CONFIG.INVALID: invalid configuration: --count = 4: is for --module b"},
		{[]string{"--module", "b", "--count", "0"}, "CONFIG.INVALID: invalid configuration: --count = 0: must be positive"},
		{[]string{"--module", "c"}, `CONFIG.INVALID: invalid configuration: --module = "c": must be a or b`},
	}
	for _, c := range cases {
		cmd := NewCommand(Config{Use: "zone", Modules: twoModules()})
		cmd.SetArgs(append(append([]string{}, base...), c.args...))
		cmd.SetOut(&strings.Builder{})
		cmd.SetErr(&strings.Builder{})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.ExecuteContext(t.Context())
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: error %v, want %s", c.args, err, c.want)
		}
	}
}

func TestHelpNamesTheModules(t *testing.T) {
	cmd := NewCommand(Config{Use: "zone", Modules: twoModules()})
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the zone module: a (the first) or b", "--size int", "--colour string", "--count int", "--endpoints strings"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Count(out.String(), "--size") != 1 {
		t.Errorf("--size listed more than once:\n%s", out.String())
	}
	one := NewCommand(Config{Use: "zone", Modules: twoModules()[:1]})
	if one.Flags().Lookup("module") != nil {
		t.Error("--module with one module to host")
	}
}

func TestNewCommandRefusesABadConfig(t *testing.T) {
	for _, mods := range [][]Module{
		nil,
		{{Name: "a"}},
		{{New: twoModules()[0].New}},
		{twoModules()[0], twoModules()[0]},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%d modules: no panic", len(mods))
				}
			}()
			NewCommand(Config{Modules: mods})
		}()
	}
}
