package main

import (
	"strings"
	"testing"

	"github.com/shardwise/shardwise/errcode"
)

// Every refused flag of "bots" is named as typed, with its value, before
// any bot starts.
func TestBotsFlagErrorsNameTheFlag(t *testing.T) {
	key, pub := keygen(t)
	gw := "--gateways=ws://127.0.0.1:1/ws"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"bots", "--key", key}, `--gateways = []: at least one gateway URL is required`},
		{[]string{"bots", "--key", key, "--gateways", "http://127.0.0.1:1/ws"}, `--gateways = "http://127.0.0.1:1/ws": must be a WebSocket URL`},
		{[]string{"bots", gw}, `--key = "": required`},
		{[]string{"bots", gw, "--key", pub}, `--key = "` + pub + `": holds a "PUBLIC KEY" PEM block`},
		{[]string{"bots", gw, "--key", key, "--count", "0"}, "--count = 0: must be at least 1"},
		{[]string{"bots", gw, "--key", key, "--legs=-1"}, "--legs = -1: must not be negative"},
		{[]string{"bots", gw, "--key", key, "--reach=-3"}, "--reach = -3: must be a positive number of metres"},
		{[]string{"bots", gw, "--key", key, "--relog-chance=2"}, "--relog-chance = 2: must be at most 1"},
		{[]string{"bots", gw, "--key", key, "--duration=-1s"}, "--duration = -1s: must not be negative"},
		{[]string{"bots", gw, "--key", key, "--first-account=0"}, "--first-account = 0: must be at least 1"},
		{[]string{"bots", gw, "--key", key, "--cluster="}, `--cluster = "": must be 1..64 bytes`},
	}
	for _, c := range cases {
		_, err := runCmd(t, newRootCmd(), "", c.args...)
		if errcode.Of(err) != errcode.ConfigInvalid {
			t.Errorf("%v: error %v, want %s", c.args, err, errcode.ConfigInvalid)
			continue
		}
		if got := strings.TrimPrefix(err.Error(), errcode.ConfigInvalid+": "); !strings.HasPrefix(got, "invalid configuration: "+c.want) {
			t.Errorf("%v:\n got  %s\n want %s…", c.args, got, c.want)
		}
	}
}
