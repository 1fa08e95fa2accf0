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
		{[]string{"demo", "--duration=-1s"}, "--duration = -1s: must be positive"},
		{[]string{"demo", "--epoch=-1500ms"}, "--epoch = -1.5s: must be positive"},
		{[]string{"demo", "--nodes", "a"}, `--nodes = ["a"]: need at least two nodes: one is killed`},
		{[]string{"demo", "--nodes", "a,,b"}, `--nodes = ["a", "", "b"]: contains an empty node id`},
		{[]string{"demo", "--nodes", "a,b,a"}, `--nodes = ["a", "b", "a"]: lists "a" twice`},
		{[]string{"demo", "--kill", "econ-9"}, `--kill = "econ-9": is not one of --nodes`},
		{[]string{"demo", "--markets=-1"}, "--markets = -1: must be at least 1"},
		{[]string{"demo", "--rate=-5"}, "--rate = -5: must be at least 1"},
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
