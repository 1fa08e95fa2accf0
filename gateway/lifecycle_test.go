package gateway_test

import (
	"context"
	"crypto/ed25519"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
)

func TestAClientThatNeverReadsIsDropped(t *testing.T) {
	f := newFixture(t)
	const budget = 64 << 10
	n := f.node("gw-a", 1, func(c *gateway.Config) { c.Limits.SendBudget = budget })
	c, _ := f.loggedIn(n, 3) // and then never reads again
	s := n.world.session(3)
	frame := outbox.AppendComponentFrame(nil, 42, 1, make([]byte, 16<<10))
	// The kernel's socket buffers take some megabytes before the writer
	// blocks; after that the backlog reaches the budget and the client is
	// cut. Far less than this many bytes are ever held.
	const most = 1 << 14
	delivered := 0
	for delivered < most && !isDone(s.Done()) {
		delivered++
		s.Deliver(uint64(delivered), [][]byte{frame})
	}
	if !isDone(s.Done()) {
		// Deliver never blocks; the writer may not have taken stock yet.
		select {
		case <-s.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("still connected after %d batches of %d bytes", delivered, len(frame))
		}
	}
	_ = c // never read
	poll(t, "the session to leave the world", func() bool {
		_, leaves, _ := n.world.snapshot()
		return len(leaves) == 1
	})
	if n.gw.Sessions() != 0 {
		t.Fatalf("%d sessions after the drop", n.gw.Sessions())
	}
	t.Logf("dropped after %d batches (%d KiB) of a %d KiB budget", delivered, delivered*len(frame)>>10, budget>>10)
}

// A write that stalls (a client that stopped reading, its socket buffers
// full) is cut once it has lasted WriteTimeout on the injected clock,
// however far under the send budget the backlog is.
func TestAStalledWriteIsCutAtTheWriteTimeout(t *testing.T) {
	f := newFixtureWith(t, directory.MemoryConfig{LeaseTTL: time.Hour})
	const timeout = 4 * time.Second
	n := f.node("gw-a", 1, func(c *gateway.Config) {
		c.Limits.SendBudget = 1 << 30 // never the budget
		c.Limits.WriteTimeout = timeout
		c.Limits.IdleTimeout = time.Hour
		c.RenewEvery = time.Hour
	})
	c, _ := f.loggedIn(n, 3) // and then never reads again
	s := n.world.session(3)
	// One message far larger than loopback's socket buffers: its write
	// blocks while the client does not read.
	s.Deliver(1, [][]byte{outbox.AppendComponentFrame(nil, 42, 1, make([]byte, 32<<20))})
	t0 := f.clk.Now()
	poll(t, "the stalled write to be cut", func() bool {
		if isDone(s.Done()) {
			return true
		}
		f.clk.Advance(timeout / 16)
		return false
	})
	if waited := f.clk.Since(t0); waited < timeout {
		t.Fatalf("cut after %v of the clock, before the %v write timeout", waited, timeout)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(n.gw.Metrics().Collectors()...)
	if got := closesOf(t, reg, gateway.CodeSlowReader); got != 1 {
		t.Fatalf("%v closes counted as %s, want 1", got, gateway.CodeSlowReader)
	}
	_ = c
}

// closesOf is the gateway's count of sockets closed for code.
func closesOf(t *testing.T, reg *prometheus.Registry, code string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "shardwise_gateway_closes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == code {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestIdleAndLoginTimeoutsOnTheInjectedClock(t *testing.T) {
	f := newFixtureWith(t, directory.MemoryConfig{LeaseTTL: time.Hour})
	n := f.node("gw-a", 1, func(c *gateway.Config) {
		c.Limits.IdleTimeout, c.Limits.LoginTimeout = 30*time.Second, 10*time.Second
		c.RenewEvery = 20 * time.Minute // the lease plays no part here
	})
	idle, _ := f.loggedIn(n, 3)
	silent := dial(t, n.url) // never logs in
	poll(t, "the server to count the silent socket", func() bool { return n.gw.Connections() == 2 })
	f.clk.Advance(11 * time.Second)
	if code, reason, _ := silent.closed(); code != gateway.StatusLoginFailed || reason != gateway.CodeLoginTimeout {
		t.Fatalf("silent socket closed %d %q, want %d %s", code, reason, gateway.StatusLoginFailed, gateway.CodeLoginTimeout)
	}
	// A ping keeps a socket alive; 30 s of nothing closes it.
	idle.send(ping(1))
	for idle.must().GetPong() == nil {
	}
	f.clk.Advance(20 * time.Second)
	f.clk.Advance(11 * time.Second)
	if code, reason, _ := idle.closed(); code != gateway.StatusIdle || reason != gateway.CodeIdle {
		t.Fatalf("idle socket closed %d %q, want %d %s", code, reason, gateway.StatusIdle, gateway.CodeIdle)
	}
}

func TestASecondLoginDisplacesTheFirst(t *testing.T) {
	f := newFixture(t)
	n := f.node("gw-a", 1, nil)
	first, w1 := f.loggedIn(n, 3)
	second, w2 := f.loggedIn(n, 3)
	if w2.SessionEpoch <= w1.SessionEpoch {
		t.Fatalf("epochs %d then %d", w1.SessionEpoch, w2.SessionEpoch)
	}
	code, reason, codes := first.closed()
	if code != gateway.StatusDisplaced || reason != gateway.CodeDisplaced || !slices.Contains(codes, gateway.CodeDisplaced) {
		t.Fatalf("first socket closed %d %q after %v", code, reason, codes)
	}
	poll(t, "the displaced session to leave", func() bool {
		_, leaves, _ := n.world.snapshot()
		return len(leaves) == 1
	})
	// The displaced teardown changed nothing: the newer session lives on.
	sess, err := f.dir.Lookup(context.Background(), 3)
	if err != nil || uint64(sess.Epoch) != w2.SessionEpoch {
		t.Fatalf("directory %+v %v, want epoch %d", sess, err, w2.SessionEpoch)
	}
	if s := n.world.session(3); s == nil || uint64(s.Epoch()) != w2.SessionEpoch {
		t.Fatal("the world lost the newer session")
	}
	second.send(ping(5))
	for second.must().GetPong() == nil {
	}
}

// Two logins of one account race on two nodes: exactly one live session
// remains, the newer epoch, whether the nodes tell each other (Displace)
// or the older finds out at its lease renewal.
func TestLoginsRacingOnTwoNodesLeaveTheNewer(t *testing.T) {
	for _, told := range []bool{true, false} {
		f := newFixture(t)
		var nodes [3]*node
		hook := func(c *gateway.Config) {
			if told {
				c.Displace = func(_ context.Context, old directory.Session) {
					nodes[old.Gateway].gw.Displaced(old.Account, old.Epoch+1)
				}
			}
		}
		nodes[1], nodes[2] = f.node("gw-a", 1, hook), f.node("gw-b", 2, hook)
		for round := range 5 {
			var wg sync.WaitGroup
			var clients [3]*client
			tokens := [3]string{"", f.token(3), f.token(3)}
			for i := 1; i <= 2; i++ {
				clients[i] = dial(t, nodes[i].url)
				wg.Go(func() { clients[i].login(tokens[i]) })
			}
			wg.Wait()
			type end struct {
				code   websocket.StatusCode
				reason string
			}
			var ended [3]*end
			for i := 1; i <= 2; i++ {
				// Welcome and You (a login that lost the race in the
				// directory may be closed on the way).
				for range 2 {
					if m, code, reason := clients[i].recv(); m == nil {
						ended[i] = &end{code, reason}
						break
					}
				}
			}
			if !told {
				f.clk.Advance(directory.DefaultLeaseTTL / 3)
			}
			sess, err := f.dir.Lookup(context.Background(), 3)
			if err != nil {
				t.Fatal(err)
			}
			winner := int(sess.Gateway)
			loser := 3 - winner
			if ended[winner] != nil {
				t.Fatalf("told=%v round %d: the newer login closed %+v", told, round, *ended[winner])
			}
			if ended[loser] == nil {
				code, reason, _ := clients[loser].closed()
				ended[loser] = &end{code, reason}
			}
			if e := ended[loser]; e.code != gateway.StatusDisplaced || e.reason != gateway.CodeDisplaced {
				t.Fatalf("told=%v round %d: the older login closed %d %q", told, round, e.code, e.reason)
			}
			clients[winner].send(ping(1))
			for clients[winner].must().GetPong() == nil {
			}
			poll(t, "one session in all", func() bool { return nodes[1].gw.Sessions()+nodes[2].gw.Sessions() == 1 })
			if s := nodes[winner].world.session(3); s == nil || s.Epoch() != sess.Epoch {
				t.Fatalf("told=%v round %d: the winner's world holds %v, want epoch %d", told, round, s, sess.Epoch)
			}
			_ = clients[winner].ws.CloseNow()
			poll(t, "no session", func() bool { return nodes[1].gw.Sessions()+nodes[2].gw.Sessions() == 0 })
		}
	}
}

func TestCloseEndsEverySessionAndIsIdempotent(t *testing.T) {
	f := newFixture(t)
	n := f.node("gw-a", 1, nil)
	c1, _ := f.loggedIn(n, 1)
	c2, _ := f.loggedIn(n, 2)
	type closing struct {
		code   websocket.StatusCode
		reason string
	}
	got := make(chan closing, 2)
	for _, c := range []*client{c1, c2} {
		go func() { // a client reads all the time, so the close handshake completes
			code, reason, _ := c.closed()
			got <- closing{code, reason}
		}()
	}
	if err := n.gw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.gw.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if c := <-got; c.code != gateway.StatusShutdown || c.reason != gateway.CodeShutdown {
			t.Fatalf("closed %d %q, want %d %s", c.code, c.reason, gateway.StatusShutdown, gateway.CodeShutdown)
		}
	}
	if _, leaves, _ := n.world.snapshot(); len(leaves) != 2 {
		t.Fatalf("%d leaves after Close, want 2", len(leaves))
	}
	if n.gw.Sessions() != 0 {
		t.Fatal("sessions left after Close")
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	f := newFixture(t)
	v, err := logintoken.NewVerifier(logintoken.VerifierConfig{
		Cluster: cluster, Audience: gateway.Audience, Keys: []ed25519.PublicKey{f.pub}, SingleUse: f.dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mod   func(*gateway.Config)
		field string
	}{
		{func(c *gateway.Config) { c.Name = "Bad Name" }, "Config.Name"},
		{func(c *gateway.Config) { c.Directory = nil }, "Config.Directory"},
		{func(c *gateway.Config) { c.Limits.IdleTimeout = time.Millisecond }, "Config.Limits.IdleTimeout"},
		{func(c *gateway.Config) { c.Limits.SendBudget = 10 }, "Config.Limits.SendBudget"},
		{func(c *gateway.Config) { c.Limits.HTTPReadTimeout = -time.Second }, "Config.Limits.HTTPReadTimeout"},
		{func(c *gateway.Config) { c.Limits.HTTPIdleTimeout = time.Millisecond }, "Config.Limits.HTTPIdleTimeout"},
	} {
		cfg := gateway.Config{Name: "ok", Directory: f.dir, Verifier: v, World: newRecWorld(), Geometry: torus.Default()}
		tc.mod(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tc.field)
		}
	}
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
