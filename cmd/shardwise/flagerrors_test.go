package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
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
		{[]string{"demo", "economy", "--duration", "0"}, "--duration = 0s: must be positive"},
		{[]string{"demo", "economy", "--epoch", "0"}, "--epoch = 0s: must be positive"},
		{[]string{"demo", "economy", "--rate", "0"}, "--rate = 0: must be at least 1"},
		{[]string{"demo", "economy", "--markets", "0"}, "--markets = 0: must be at least 1"},
		{[]string{"demo", "economy", "--nodes", ""}, `--nodes = "": must name the nodes, comma-separated (see --help)`},
		{[]string{"demo", "--trade-chance=-1"}, "--trade-chance = -1: is a chance: at least 0 (0: never)"},
		{[]string{"demo", "--shop-chance=-0.5"}, "--shop-chance = -0.5: is a chance: at least 0 (0: never)"},
		{[]string{"demo", "--zones", ""}, `--zones = "": must name the nodes, comma-separated (see --help)`},
		{[]string{"demo", "--econs", ""}, `--econs = "": must name the nodes, comma-separated (see --help)`},
		{[]string{"demo", "--json", dir}, `--json = "` + dir + `": is a directory: name the file to write`},
		{[]string{"demo", "--bots=0"}, "--bots = 0: must be at least 1"},
		{[]string{"demo", "--zones", "zone-1"}, `--zones = "zone-1": need at least two zone nodes: one world on several nodes is the point`},
		{[]string{"demo", "--econs", "econ-1,econ-1"}, `--econs = "econ-1,econ-1": lists "econ-1" twice`},
		{[]string{"demo", "--move-at=0"}, "--move-at = 0s: must be positive (see --help)"},
		{[]string{"demo", "--duration=10s", "--kill-at=12s"}, "--kill-at = 12s: must be inside --duration (negative: no economy node killed)"},
		{[]string{"demo", "--duration=10s", "--zone-kill-at=10s"}, "--zone-kill-at = 10s: must be inside --duration (negative: no zone node killed)"},
		{[]string{"demo", "--zone-kill-at=0"}, "--zone-kill-at = 0s: must be positive (see --help)"},
		{[]string{"demo", "--zone-ttl=1500ms"}, "--zone-ttl = 1.5s: must be a whole number of seconds, at least 1s"},
		{[]string{"demo", "--zone-ttl=-2s"}, "--zone-ttl = -2s: must be a whole number of seconds, at least 1s"},
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
		// The command's stable code comes first (CONFIG.INVALID: …), as
		// main prints it, for every command.
		if got, want := err.Error(), errcode.ConfigInvalid+": invalid configuration: "+c.want; got != want {
			t.Errorf("%v:\n got  %s\n want %s", c.args, got, want)
		}
	}
}

// TestEveryCommandNamesTheFlag runs each command with a bad value in one
// flag and checks what the user reads: the code, the flag as typed, the
// value as typed (a duration as "1.5s", a string quoted), and that the
// command refused at once, before any etcd, store or network work (the
// endpoint given answers nothing). It covers what TestFlagErrorsNameTheFlag
// and the zone, bots and token tests do not: the economy node, members,
// regions, dev, top, and the flags whose 0 the configuration would have
// read as "the default" (refused here, since no help promises that).
func TestEveryCommandNamesTheFlag(t *testing.T) {
	const ep = "http://127.0.0.1:1"
	dir := t.TempDir()
	key, pub := keygen(t)
	gw := []string{"zone", "--endpoints", ep, "--name", "zone-a", "--certs", dir, "--gateway", "127.0.0.1:0", "--login-pub", pub}
	econ := []string{"econ", "--endpoints", ep, "--name", "econ-a", "--store", "sqlite:///" + dir + "/econ.db"}
	zone := []string{"zone", "--endpoints", ep, "--name", "zone-a", "--certs", dir}
	bots := []string{"bots", "--gateways=ws://127.0.0.1:1/ws", "--key", key}
	with := func(base []string, args ...string) []string { return append(append([]string{}, base...), args...) }
	cases := []struct {
		args []string
		want string
	}{
		// econ: every setting, refused before etcd is dialled.
		{[]string{"econ", "--endpoints", ep, "--store", "sqlite:///x.db"}, `--name = "": is required`},
		{[]string{"econ", "--endpoints", ep, "--name", "econ-a"}, `--store = "": is required`},
		{with(econ, "--store", "mysql://x"), `--store = "mysql://x": must start with`},
		{with(econ, "--ttl", "1500ms"), "--ttl = 1.5s: must be 0 (the default, 10s) or a whole number of seconds, at least 1s"},
		{with(econ, "--ttl", "500ms"), "--ttl = 500ms: must be 0 (the default, 10s) or a whole number of seconds"},
		{with(econ, "--epoch=-1s"), "--epoch = -1s: must not be negative"},
		{with(econ, "--epoch", "1s", "--sweep-bound", "1500ms"), "--sweep-bound = 1.5s: must be at least twice the epoch max age (2s)"},
		{with(econ, "--max-movements=-1"), "--max-movements = -1: must not be negative"},
		{with(econ, "--settle-lease=-1s"), "--settle-lease = -1s: must not be negative"},
		{with(econ, "--ready-wait=-2s"), "--ready-wait = -2s: must not be negative"},
		{with(econ, "--escrow-bound", "500ms"), "--escrow-bound = 500ms: must be 0 (the default, 30s) or at least 1s"},
		{with(econ, "--escrow-bound", "5s", "--escrow-every", "6s"), "--escrow-every = 6s: must be at most the escrow bound (5s), so an escrow is decided within one period of it"},
		{with(econ, "--close-timeout=-1m"), "--close-timeout = -1m0s: must not be negative"},
		{with(econ, "--listen", "7100"), `--listen = "7100": must be host:port`},
		{with(econ, "--listen", "10.0.0.1:0"), `--certs = "": is required unless the service listens on a loopback address`},
		{with(econ, "--advertise", "10.0.0.5"), `--advertise = "10.0.0.5": must be host:port`},
		{with(econ, "--metrics", "9100"), `--metrics = "9100": must be host:port`},
		{with(econ, "--prefix", "nope"), `--prefix = "nope": must start and end with "/"`},
		{with(econ, "--certs", dir+"/none"), `--certs = "` + dir + `/none": `},
		{[]string{"demo", "--json", "/nonexistent/dir/r.json"}, `--json = "/nonexistent/dir/r.json": cannot be written in /nonexistent/dir: no such file or directory`},
		{[]string{"econ", "audit"}, `--store = "": required`},
		{[]string{"econ", "reconcile", "--endpoints", ep}, `--store = "": required`},
		{[]string{"econ", "reconcile", "--store", "sqlite:///x.db"}, `--endpoints = "": required`},
		{[]string{"econ", "verify", "--store", "sqlite:///" + dir + "/missing.db"}, `--store = "sqlite:///` + dir + `/missing.db": names no SQLite database`},
		// members, regions, top: the shared etcd flags and their own.
		{[]string{"members"}, `--endpoints = "": required`},
		{[]string{"members", "--endpoints", ep, "--prefix", "nope"}, `--prefix = "nope": must start and end with "/"`},
		{[]string{"members", "--endpoints", "127.0.0.1:2379x"}, `--endpoints = "127.0.0.1:2379x": port "2379x" is not a TCP port (1 to 65535)`},
		{[]string{"members", "--endpoints", "http://127.0.0.1:2379x"}, `--endpoints = "http://127.0.0.1:2379x": not a URL: `},
		{[]string{"regions", "show", "--endpoints", "127.0.0.1"}, `--endpoints = "127.0.0.1": must be host:port or a URL such as http://host:port`},
		{[]string{"certs", "--dir", dir + "/c", "--nodes", "zone-a,zone-a"}, `--nodes = "zone-a,zone-a": names zone-a twice`},
		{[]string{"members", "--endpoints", ep, "--timeout", "0"}, "--timeout = 0s: must be positive"},
		{[]string{"members", "--endpoints", ep, "-o", "xml"}, `--output = "xml": must be table or json`},
		{[]string{"regions", "show", "--endpoints", ep, "-o", "xml"}, `--output = "xml": must be json or yaml`},
		{[]string{"regions", "show", "--endpoints", ep, "--timeout=-1s"}, "--timeout = -1s: must be positive"},
		{[]string{"regions", "new"}, `--nodes = "": required`},
		{[]string{"regions", "new", "--nodes", "a", "--version", "0"}, "--version = 0: must be at least 1"},
		{[]string{"regions", "new", "--nodes", "a", "--set", "256=a"}, `--set = "256=a": must be REGION=NODE with REGION in [0, 256)`},
		{[]string{"top"}, `--endpoints = "": required`},
		{[]string{"top", "--endpoints", ep, "--every", "0"}, "--every = 0s: must be positive"},
		{[]string{"top", "--endpoints", ep, "--every=-2s"}, "--every = -2s: must be positive"},
		{[]string{"top", "--endpoints", ep, "--scrape-timeout", "0"}, "--scrape-timeout = 0s: must be positive"},
		{[]string{"top", "--endpoints", ep, "--timeout", "0"}, "--timeout = 0s: must be positive"},
		{[]string{"top", "--endpoints", ep + ",ftp://x"}, `--endpoints = "ftp://x": `},
		{[]string{"dev", "--port=-1"}, "--port = -1: must be a TCP port, 1 to 65535 (0: any free port)"},
		{[]string{"dev", "--port", "65536"}, "--port = 65536: must be a TCP port"},
		// A 0 the configuration would silently have replaced by a default.
		{with(zone, "--tick", "0"), "--tick = 0s: must be positive"},
		{with(zone, "--area", "0"), "--area = 0: must be positive and fit the torus"},
		{with(zone, "--players", "0"), "--players = 0: must be at least 1"},
		{with(zone, "--module", "wander", "--entities", "0"), "--entities = 0: must be positive"},
		{with(gw, "--gateway-read-timeout", "0"), "--gateway-read-timeout = 0s: must be positive"},
		{with(gw, "--gateway-idle-timeout", "0"), "--gateway-idle-timeout = 0s: must be positive"},
		{with(gw, "--gateway-idle-timeout", "50ms"), "--gateway-idle-timeout = 50ms: must be at least 100ms"},
		{with(gw, "--gateway-read-timeout", "10ms"), "--gateway-read-timeout = 10ms: must be at least 100ms"},
		{with(gw, "--gateway-conns-per-addr=-1"), "--gateway-conns-per-addr = -1: must not be negative (0: no cap)"},
		{with(zone, "--gateway-idle-timeout", "5s"), "--gateway-idle-timeout = 5s: is for --gateway: set --gateway too"},
		{with(zone, "--gateway-conns-per-addr", "8"), "--gateway-conns-per-addr = 8: is for --gateway: set --gateway too"},
		{with(gw, "--gateway-resume-window", "0"), "--gateway-resume-window = 0s: must be positive"},
		{with(gw, "--gateway-resume-window", "500ms"), "--gateway-resume-window = 500ms: must be whole milliseconds, within 1s and 24h"},
		{with(zone, "--gateway-resume-window", "2m"), "--gateway-resume-window = 2m0s: is for --gateway: set --gateway too"},
		{[]string{"world", "--players", "0"}, "--players = 0: must be at least 1"},
		{[]string{"world", "--area", "0"}, "--area = 0: must be positive and fit the torus"},
		{with(bots, "--reach", "0"), "--reach = 0: must be a positive number of metres"},
		{with(bots, "--fight-radius", "0"), "--fight-radius = 0: must be a positive number of metres"},
		{with(bots, "--relog-pause", "0"), "--relog-pause = 0s: must be positive"},
		{with(bots, "--leg-timeout", "0"), "--leg-timeout = 0s: must be positive"},
		{with(bots, "--every", "0"), "--every = 0s: must be positive"},
	}
	for _, c := range cases {
		start := time.Now()
		_, err := runCmd(t, newRootCmd(), "", c.args...)
		if errcode.Of(err) != errcode.ConfigInvalid {
			t.Errorf("%v: error %v, want %s", c.args, err, errcode.ConfigInvalid)
			continue
		}
		got := strings.TrimPrefix(err.Error(), errcode.ConfigInvalid+": ")
		if want := "invalid configuration: " + c.want; !strings.HasPrefix(got, want) {
			t.Errorf("%v:\n got  %s\n want %s…", c.args, got, want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%v: refused after %v: it did I/O first", c.args, d)
		}
	}
}

// TestVerboseShowsItsEvents: --verbose logs to stderr the events each
// node's help names. Zone ("joins, peers, table versions"): two wander
// nodes in one etcd each log their join, the table they hold and the
// other as a peer. Economy ("views formed and ready"): a node logs its
// view ready with its members. Without --verbose none of them is logged.
func TestVerboseShowsItsEvents(t *testing.T) {
	t.Parallel() // waits on processes and sockets: see main_test.go
	eps, _ := etcdForCmdTest(t)
	dir := t.TempDir()
	if _, err := runCmd(t, newRootCmd(), "", "certs", "--dir", dir+"/certs", "--nodes", "zone-a,zone-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, newRootCmd(), "", "regions", "apply", gameTableFile(t, "zone-a", "zone-b"), "--force", "--endpoints", eps); err != nil {
		t.Fatal(err)
	}
	names := []string{"zone-a", "zone-b"}
	outs := make([]string, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		args := []string{"zone", "--endpoints", eps, "--name", name, "--certs", dir + "/certs", "--module", "wander",
			"--entities", "8", "--ticks", "10", "--tick", "20ms", "--ttl", "2s"}
		if name == "zone-a" {
			args = append(args, "--verbose")
		}
		wg.Go(func() { outs[i], errs[i] = runCmd(t, newRootCmd(), "", args...) })
	}
	wg.Wait()
	for i, name := range names {
		if errs[i] != nil {
			t.Fatalf("%s: %v\n%s", name, errs[i], outs[i])
		}
	}
	for _, ev := range []string{`msg="zone: joined" node=zone-a`, `msg="zone: region table held" node=zone-a`,
		`msg="zone: host: peer added" node=zone-a peer=zone-b`} {
		if !strings.Contains(outs[0], ev) {
			t.Errorf("zone --verbose does not log %s:\n%s", ev, outs[0])
		}
	}
	if strings.Contains(outs[1], "zone: joined") {
		t.Errorf("zone without --verbose logs its events:\n%s", outs[1])
	}

	econ := startShardwise(t, "econ", "--endpoints", eps, "--name", "econ-a", "--store", "sqlite:///"+dir+"/econ.db", "--ttl", "2s", "--verbose")
	testenv.PollUntil(t, 30*time.Second, "econ --verbose logging its view ready", func() bool {
		if econ.exited() {
			t.Fatalf("econ exited: %v\n%s", econ.err, econ.out.String())
		}
		return strings.Contains(econ.out.String(), `msg="econ: view ready"`) && strings.Contains(econ.out.String(), "members=[econ-a]")
	})
	if err := econ.stop(10 * time.Second); err != nil {
		t.Fatalf("econ did not stop on the interrupt: %v\n%s", err, econ.out.String())
	}
}
