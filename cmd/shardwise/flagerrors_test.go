package main

import (
	"testing"

	"github.com/shardwise/shardwise/errcode"
)

// TestFlagErrorsNameTheFlag checks the message a user reads when a flag's
// value is refused: it names the flag as typed and prints the value as
// typed (a duration as a duration, a string quoted), never a Go field name
// or raw nanoseconds. Every case fails in validation, before any work.
func TestFlagErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"demo", "economy", "--duration=-1s"}, "--duration = -1s: must be positive"},
		{[]string{"demo", "economy", "--epoch=-1500ms"}, "--epoch = -1.5s: must be positive"},
		{[]string{"demo", "economy", "--nodes", "a"}, `--nodes = ["a"]: need at least two nodes: one is killed`},
		{[]string{"demo", "economy", "--nodes", "a,,b"}, `--nodes = ["a", "", "b"]: contains an empty node id`},
		{[]string{"demo", "economy", "--nodes", "a,b,a"}, `--nodes = ["a", "b", "a"]: lists "a" twice`},
		{[]string{"demo", "economy", "--kill", "econ-9"}, `--kill = "econ-9": is not one of --nodes`},
		{[]string{"demo", "economy", "--markets=-1"}, "--markets = -1: must be at least 1"},
		{[]string{"demo", "economy", "--rate=-5"}, "--rate = -5: must be at least 1"},
		{[]string{"demo", "--bots=0"}, "--bots = 0: must be at least 1"},
		{[]string{"demo", "--zones", "zone-1"}, `--zones = "zone-1": need at least two zone nodes: one world on several nodes is the point`},
		{[]string{"demo", "--econs", "econ-1,econ-1"}, `--econs = "econ-1,econ-1": lists "econ-1" twice`},
		{[]string{"demo", "--move-at=0"}, "--move-at = 0s: must be positive (see --help)"},
		{[]string{"demo", "--duration=10s", "--kill-at=12s"}, "--kill-at = 12s: must be inside --duration (negative: no economy node killed)"},
		{[]string{"demo", "--shop-chance=1.5"}, "--shop-chance = 1.5: is a chance: at most 1 (0: never)"},
		{[]string{"demo", "--data", "/tmp/x", "--postgres", "postgres://h/db"}, "--data = \"/tmp/x\": cannot be combined with --postgres"},
		{[]string{"world", "--ticks=0"}, "--ticks = 0: must be at least 1"},
		{[]string{"world", "--players=-1"}, "--players = -1: must not be negative"},
		{[]string{"world", "--den-chance=2"}, "--den-chance = 2: must be within [0, 1]"},
		{[]string{"world", "--node=300"}, "--node = 300: must be within [0, 255]"},
		{[]string{"world", "--area=1e9"}, "--area = 1e+09: must be positive and fit the torus"},
		{[]string{"certs", "--dir", dir, "--nodes", "a", "--validity=-1h"}, "--validity = -1h0m0s: must be positive"},
	}
	for _, c := range cases {
		_, err := runCmd(t, newRootCmd(), "", c.args...)
		if errcode.Of(err) != errcode.ConfigInvalid {
			t.Errorf("%v: error %v, want %s", c.args, err, errcode.ConfigInvalid)
			continue
		}
		if got, want := err.Error(), "invalid configuration: "+c.want; got != want {
			t.Errorf("%v:\n got  %s\n want %s", c.args, got, want)
		}
	}
}
