package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/internal/testenv"
)

// gameTableFile writes a region table over the reference game's grid,
// split between names in bands of rows (cells.Uniform): with two nodes
// they meet across the Y seam, through the middle of the players' start
// square.
func gameTableFile(t *testing.T, names ...string) string {
	t.Helper()
	grid, err := cells.NewGrid(game.Config{}.RuntimeConfig().Grid)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := cells.Uniform(grid, 1, names)
	if err != nil {
		t.Fatal(err)
	}
	b, err := coord.FormatRegions(tb, true)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "regions.yaml")
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

var mostGhostsRE = regexp.MustCompile(`render ghosts \d+ \(most (\d+)\)`)

// TestZoneTwoNodes runs the cluster on one machine the way an operator
// would: certificates with "shardwise certs", the table with "shardwise
// regions apply", then two "shardwise zone" nodes at once (in-process, as
// the other command tests run the CLI), each for a bounded number of
// ticks. Both exit cleanly and report holding the other's entities as
// render ghosts.
func TestZoneTwoNodes(t *testing.T) {
	t.Parallel() // waits on processes and sockets: see main_test.go
	eps, _ := etcdForCmdTest(t)
	certs := filepath.Join(t.TempDir(), "certs")
	if _, err := runCmd(t, newRootCmd(), "", "certs", "--dir", certs, "--nodes", "zone-a,zone-b"); err != nil {
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
		wg.Go(func() {
			outs[i], errs[i] = runCmd(t, newRootCmd(), "", "zone", "--endpoints", eps, "--name", name, "--certs", certs,
				"--ticks", "120", "--tick", "20ms", "--players", "64", "--ttl", "2s")
		})
	}
	wg.Wait()
	for i, name := range names {
		t.Logf("%s:\n%s", name, outs[i])
		if errs[i] != nil {
			t.Errorf("%s: %v", name, errs[i])
			continue
		}
		if !strings.Contains(outs[i], name+": node ") || !strings.Contains(outs[i], "peers connected: "+names[1-i]+";") {
			t.Errorf("%s: no ready line naming its peer as connected", name)
		}
		if strings.Count(outs[i], name+"  tick ") < 2 {
			t.Errorf("%s: fewer than two status lines in 120 ticks at 50 a second", name)
		}
		if !strings.Contains(outs[i], name+": ran 120 ticks") {
			t.Errorf("%s: no summary of 120 ticks", name)
		}
		m := mostGhostsRE.FindStringSubmatch(outs[i])
		if m == nil {
			t.Errorf("%s: the summary does not report render ghosts", name)
		} else if n, _ := strconv.Atoi(m[1]); n == 0 {
			t.Errorf("%s: never held a render ghost of the other node", name)
		}
	}
}

// TestZoneFlagErrorsNameTheFlag: a refused flag is named as typed, and
// every case fails before any etcd or network work (the endpoint given
// does not exist).
func TestZoneFlagErrorsNameTheFlag(t *testing.T) {
	const ep = "http://127.0.0.1:1"
	base := []string{"zone", "--endpoints", ep, "--name", "zone-a", "--certs", t.TempDir()}
	key, pub := keygen(t)
	gw := append(append([]string{}, base...), "--gateway", "127.0.0.1:0", "--login-pub", pub)
	base = base[:len(base):len(base)] // appends below copy
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"zone"}, "--endpoints = []: at least one etcd endpoint is required (for example http://127.0.0.1:2379)"},
		{[]string{"zone", "--endpoints", ep + ",ftp://x"}, `--endpoints = "ftp://x": `},
		{[]string{"zone", "--endpoints", ep, "--prefix", "nope"}, `--prefix = "nope": must start and end with "/"`},
		{[]string{"zone", "--endpoints", ep}, `--name = "": `},
		{[]string{"zone", "--endpoints", ep, "--name", "zone-a"}, `--certs = "": required`},
		{append(base, "--listen", "7100"), `--listen = "7100": must be host:port`},
		{append(base, "--advertise", "10.0.0.5"), `--advertise = "10.0.0.5": must be host:port`},
		{append(base, "--ttl", "1500ms"), "--ttl = 1.5s: must be 0 (coord's default) or a whole number of seconds, at least 1s"},
		{append(base, "--ticks", "-1"), "--ticks = -1: must not be negative"},
		{append(base, "--tick", "-1s"), "--tick = -1s: must be positive"},
		{append(base, "--players", "-1"), "--players = -1: must not be negative"},
		{append(base, "--area", "1e9"), "--area = 1e+09: must be positive and fit the torus"},
		{append(base, "--metrics", "9100"), `--metrics = "9100": must be host:port`},
		{append(base, "--dashboard", "9100"), `--dashboard = "9100": must be host:port`},
		{append(base, "--module", "chess"), `--module = "chess": must be game or wander`},
		{append(base, "--entities", "5"), "--entities = 5: is for --module wander"},
		{append(base, "--module", "wander", "--players", "5"), "--players = 5: is for --module game"},
		{append(base, "--module", "wander", "--entities", "-1"), "--entities = -1: must be positive"},
		{append(base, "--module", "wander", "--area", "1e9"), "--area = 1e+09: must be positive and fit the torus"},
		{append(base, "--module", "wander", "--no-bots"), "--no-bots = true: is for --module game"},
		{append(base, "--module", "wander", "--economy", "plaintext"), `--economy = "plaintext": is for --module game`},
		{append(base, "--economy", "yes"), `--economy = "yes": must be "tls" or "plaintext"`},
		{append(base, "--gateway", "8080"), `--login-pub = "": required with --gateway`},
		{append(base, "--gateway", "8080", "--login-pub", "/nonexistent/login.pub"), `--login-pub = "/nonexistent/login.pub": open /nonexistent/login.pub`},
		{append(base, "--login-pub", "/nonexistent/login.pub"), `--login-pub = "/nonexistent/login.pub": open`},
		{append(base, "--cluster", "c1"), `--cluster = "c1": is for the gateway`},
		{append(base, "--directory", "redis://127.0.0.1:1"), `--directory = "redis://127.0.0.1:1": is for the gateway`},
		{append(base, "--world-store", "sqlite:///x.db"), `--world-store = "sqlite:///x.db": is for the gateway`},
		{append(gw[:len(gw):len(gw)], "--cluster", ""), `--cluster = "": must be 1..64 bytes`},
		{append(gw[:len(gw):len(gw)], "--directory", "memcached://x"), `--directory = "memcached://x": must be "redis://`},
		{append(gw[:len(gw):len(gw)], "--world-store", "mysql://x"), `--world-store = "mysql://x": must start with`},
		{append(gw[:len(gw):len(gw)], "--login-pub", key), `--login-pub = "` + key + `": holds a private key`},
	}
	for _, c := range cases {
		start := time.Now()
		_, err := runCmd(t, newRootCmd(), "", c.args...)
		var ce *errcode.ConfigError
		if errcode.Of(err) != errcode.ConfigInvalid || !errors.As(err, &ce) {
			t.Errorf("%v: error %v, want %s", c.args, err, errcode.ConfigInvalid)
			continue
		}
		if want := errcode.ConfigInvalid + ": invalid configuration: " + c.want; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%v:\n got  %s\n want %s…", c.args, err, want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%v: refused after %v: it did I/O first", c.args, d)
		}
	}
}

// TestZoneStopsOnInterrupt: with --ticks 0 the node runs until its
// context ends (the process's interrupt), then exits cleanly with its
// summary. With --dashboard it serves the page's state, the node and its
// entities in it, while it runs, and stops serving when it exits.
func TestZoneStopsOnInterrupt(t *testing.T) {
	eps, _ := etcdForCmdTest(t)
	certs := filepath.Join(t.TempDir(), "certs")
	if _, err := runCmd(t, newRootCmd(), "", "certs", "--dir", certs, "--nodes", "zone-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, newRootCmd(), "", "regions", "apply", gameTableFile(t, "zone-a"), "--force", "--endpoints", eps); err != nil {
		t.Fatal(err)
	}
	var out testenv.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"zone", "--endpoints", eps, "--name", "zone-a", "--certs", certs, "--tick", "10ms", "--players", "8", "--dashboard", "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	// Interrupt once it has printed a status line: it is ticking.
	deadline := time.After(30 * time.Second)
	for !strings.Contains(out.String(), "zone-a  tick ") {
		select {
		case err := <-done:
			t.Fatalf("zone exited before ticking: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("no status line after 30s:\n%s", out.String())
		case <-time.After(5 * time.Millisecond): // poll the output another goroutine writes
		}
	}
	m := dashboardRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no dashboard address in the ready line:\n%s", out.String())
	}
	var snap struct {
		Nodes []struct {
			Name     string `json:"name"`
			Entities int    `json:"entities"`
		} `json:"nodes"`
		Entities []struct {
			Kind string `json:"kind"`
		} `json:"entities"`
	}
	testenv.PollUntil(t, 30*time.Second, "the dashboard showing zone-a's players", func() bool {
		resp, err := http.Get(m[1] + "snapshot.json")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
			t.Fatal(err)
		}
		players := 0
		for _, e := range snap.Entities {
			if e.Kind == "player" {
				players++
			}
		}
		return len(snap.Nodes) == 1 && snap.Nodes[0].Name == "zone-a" && snap.Nodes[0].Entities > 0 && players == 8
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("zone after interrupt: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("zone still running 30s after the interrupt")
	}
	if !strings.Contains(out.String(), "zone-a: ran ") {
		t.Fatalf("no summary after the interrupt:\n%s", out.String())
	}
	if resp, err := http.Get(m[1]); err == nil {
		_ = resp.Body.Close()
		t.Fatal("the dashboard still serves after the node exited")
	}
}

var dashboardRE = regexp.MustCompile(`dashboard (http://\S+/)`)

var (
	gatewayRE = regexp.MustCompile(`gateway (ws://\S+/ws)`)
	ackedRE   = regexp.MustCompile(`handoffs sent \d+, acked (\d+)`)
)

// TestZoneGatewaysServeBots runs the README's play steps in-process: two
// "shardwise zone" nodes of the reference game with gateways, one Redis
// directory and one SQLite world store, and "shardwise bots" against
// both gateways. Every bot logs in, walks across the border between the
// nodes (handed over, no blink), logs out and back in on the other node
// where it left, and the nodes exit cleanly on interrupt.
func TestZoneGatewaysServeBots(t *testing.T) {
	t.Parallel() // waits on processes and sockets: see main_test.go
	eps, _ := etcdForCmdTest(t)
	redis := testenv.StartRedis(t)
	key, pub := keygen(t)
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if _, err := runCmd(t, newRootCmd(), "", "certs", "--dir", certs, "--nodes", "zone-a,zone-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, newRootCmd(), "", "regions", "apply", gameTableFile(t, "zone-a", "zone-b"), "--force", "--endpoints", eps); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	names := []string{"zone-a", "zone-b"}
	outs := make([]*testenv.Buffer, len(names))
	dones := make([]chan error, len(names))
	for i, name := range names {
		outs[i], dones[i] = &testenv.Buffer{}, make(chan error, 1)
		cmd := newRootCmd()
		cmd.SetOut(outs[i])
		cmd.SetErr(outs[i])
		// Homes within 20 m of the origin, where the nodes' rows meet; ticks
		// at the game's rate, the README's default: --tick is the game's
		// fixed step, so the bots walk their legs in the same wall time at
		// any rate, and 20 ms ticked 2.5 times as often for nothing (about
		// 1,700 ticks and 9 s of CPU under -race instead of 680 and 4 s).
		cmd.SetArgs([]string{"zone", "--endpoints", eps, "--name", name, "--certs", certs, "--ttl", "5s", "--tick", "50ms",
			"--gateway", "127.0.0.1:0", "--login-pub", pub, "--directory", "redis://" + redis.Addr,
			"--world-store", "sqlite://" + filepath.Join(dir, "world.db"), "--no-bots", "--players", "12", "--area", "40"})
		go func() { dones[i] <- cmd.ExecuteContext(ctx) }()
	}
	urls := make([]string, len(names))
	deadline := time.After(30 * time.Second)
	for i := range names {
		for urls[i] == "" {
			if m := gatewayRE.FindStringSubmatch(outs[i].String()); m != nil {
				urls[i] = m[1]
				break
			}
			select {
			case err := <-dones[i]:
				t.Fatalf("%s exited before its ready line: %v\n%s", names[i], err, outs[i].String())
			case <-deadline:
				t.Fatalf("%s: no ready line with a gateway after 30s:\n%s", names[i], outs[i].String())
			case <-time.After(5 * time.Millisecond): // poll the output another goroutine writes
			}
		}
	}
	var bout testenv.Buffer
	bots := newRootCmd()
	bots.SetOut(&bout)
	bots.SetErr(&bout)
	bots.SetArgs([]string{"bots", "--gateways", strings.Join(urls, ","), "--key", key,
		"--count", "2", "--legs", "2", "--reach", "50", "--relog-chance", "1", "--relog-pause", "300ms",
		"--leg-timeout", "60s", "--every", "2s"})
	bctx, bcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer bcancel()
	err := bots.ExecuteContext(bctx)
	out := bout.String()
	t.Logf("bots:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"bots: 2 bots ran ", "logins 4 (failed 0), relogs 2 (resumed where they left 2, elsewhere 0), reconnects 0",
		"legs 4 (timed out 0)", "blinks 0 (edge returns ", "out of order 0, owner-only leaks 0, errors -, closed by the server -",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the bots' summary lacks %q", want)
		}
	}
	cancel()
	acked := 0
	for i, name := range names {
		select {
		case err := <-dones[i]:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still running 30s after the interrupt", name)
		}
		t.Logf("%s:\n%s", name, outs[i].String())
		if m := ackedRE.FindStringSubmatch(outs[i].String()); m != nil {
			n, _ := strconv.Atoi(m[1])
			acked += n
		}
	}
	if acked == 0 {
		t.Error("no handoff acked: the bots never crossed between the nodes")
	}
}
