package gateway_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/proto/clientpb"
)

func TestLoginThenOneBatchPerTickByteForByte(t *testing.T) {
	f := newFixture(t)
	n := f.node("gw-a", 1, nil)
	c, w := f.loggedIn(n, 7)
	if w.Account != 7 || w.Gateway != "gw-a" || w.SessionEpoch == 0 || w.TickHz != 20 || w.World.GetSizeX() <= 0 {
		t.Fatalf("welcome %v", w)
	}
	s := n.world.session(7)
	// Tick 5's frames (local ones and ones forwarded from another node, as
	// the world merges them), then tick 6's.
	a := outbox.AppendAppearFrame(nil, 42, 1)
	b := outbox.AppendComponentFrame(nil, 42, 1, []byte{1, 2, 3})
	v := outbox.AppendVanishFrame(nil, 43, interest.Gone)
	s.Deliver(5, [][]byte{a, b})
	s.Deliver(6, [][]byte{v})
	var got []*clientpb.Batch
	for len(got) < 2 {
		m := c.must()
		if bt := m.GetBatch(); bt != nil {
			got = append(got, bt)
		}
	}
	if got[0].Tick != 5 || !bytes.Equal(got[0].Frames, slices.Concat(a, b)) {
		t.Fatalf("batch %d: %x, want tick 5 with %x", got[0].Tick, got[0].Frames, slices.Concat(a, b))
	}
	if got[1].Tick != 6 || !bytes.Equal(got[1].Frames, v) {
		t.Fatalf("batch %d: %x, want tick 6 with %x", got[1].Tick, got[1].Frames, v)
	}
	var kinds []outbox.Kind
	if err := outbox.DecodeBatch(got[0].Frames, func(m outbox.Message) error { kinds = append(kinds, m.Kind); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kinds, []outbox.Kind{outbox.KindAppear, outbox.KindComponent}) {
		t.Fatalf("frames %v", kinds)
	}
	c.send(ping(99))
	for {
		if p := c.must().GetPong(); p != nil {
			if p.Nonce != 99 || p.Tick != 6 {
				t.Fatalf("pong %v, want nonce 99 at tick 6", p)
			}
			break
		}
	}
	sess, err := f.dir.Lookup(context.Background(), 7)
	if err != nil || sess.Gateway != 1 || uint64(sess.Epoch) != w.SessionEpoch {
		t.Fatalf("directory has %+v, %v", sess, err)
	}
	c.send(&clientpb.ClientMessage{Body: &clientpb.ClientMessage_Logout{Logout: &clientpb.Logout{}}})
	if code, _, _ := c.closed(); code != websocket.StatusNormalClosure {
		t.Fatalf("logout closed with %d, want 1000", code)
	}
	poll(t, "the directory entry released", func() bool {
		_, err := f.dir.Lookup(context.Background(), 7)
		return err != nil
	})
	if _, leaves, _ := n.world.snapshot(); len(leaves) != 1 {
		t.Fatalf("leaves %v, want one", leaves)
	}
}

func TestTokensThatAreRefused(t *testing.T) {
	f := newFixture(t)
	n := f.node("gw-a", 1, nil)
	m := f.node("gw-b", 2, nil)
	_, otherKey, _ := ed25519.GenerateKey(nil)
	stranger, _ := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: cluster, Key: otherKey, Clock: f.clk})
	otherCluster, _ := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: "another", Key: f.priv, Clock: f.clk})
	replayed := f.token(5)
	f.loggedInWith(n, 5, replayed)
	unknownKey, _, _ := stranger.Issue(6, gateway.Audience)
	forged := forge(t, f.token(6))
	wrongAudience, _, _ := f.issuer.Issue(6, "econ")
	wrongCluster, _, _ := otherCluster.Issue(6, gateway.Audience)
	expired := f.token(6)
	cases := []struct {
		name, token, code string
		at                *node
		before            func()
	}{
		{name: "forged", token: forged, code: logintoken.CodeBadSignature, at: n},
		{name: "unknown key", token: unknownKey, code: logintoken.CodeUnknownKey, at: n},
		{name: "replayed on the same node", token: replayed, code: logintoken.CodeReplayed, at: n},
		{name: "replayed on another node", token: replayed, code: logintoken.CodeReplayed, at: m},
		{name: "wrong audience", token: wrongAudience, code: logintoken.CodeWrongAudience, at: n},
		{name: "wrong cluster", token: wrongCluster, code: logintoken.CodeWrongCluster, at: n},
		{name: "non-canonical", token: f.token(6) + "=", code: logintoken.CodeMalformed, at: n},
		{name: "a line break added", token: f.token(6) + "\n", code: logintoken.CodeMalformed, at: n},
		{name: "expired", token: expired, code: logintoken.CodeExpired, at: m, before: func() { f.clk.Advance(logintoken.DefaultTTL + time.Minute) }},
	}
	for _, tc := range cases {
		if tc.before != nil {
			tc.before()
		}
		c := dial(t, tc.at.url)
		c.login(tc.token)
		code, reason, codes := c.closed()
		if code != gateway.StatusLoginFailed || reason != gateway.CodeLoginFailed || !slices.Contains(codes, tc.code) {
			t.Errorf("%s: closed %d %q after errors %v, want %d %s after %s", tc.name, code, reason, codes, gateway.StatusLoginFailed, gateway.CodeLoginFailed, tc.code)
		}
	}
	for _, nd := range []*node{n, m} {
		if joins, _, _ := nd.world.snapshot(); len(joins) > 1 {
			t.Errorf("world joined %d sessions, want only the first login's", len(joins))
		}
	}
}

func TestProtocolViolationsClose(t *testing.T) {
	f := newFixture(t)
	n := f.node("gw-a", 1, nil)
	cases := []struct {
		name string
		send func(c *client)
		code string
	}{
		{"garbage first", func(c *client) { c.sendRaw([]byte{0xff, 0xff, 0xff}) }, gateway.CodeMalformed},
		{"ping first", func(c *client) { c.send(ping(1)) }, gateway.CodeLoginRequired},
		{"empty message", func(c *client) { c.sendRaw(nil) }, gateway.CodeMalformed},
		{"second login", func(c *client) {
			c.login(f.token(9))
			c.must()
			c.login(f.token(9))
		}, gateway.CodeOutOfOrder},
		{"garbage after login", func(c *client) {
			c.login(f.token(10))
			c.must()
			c.sendRaw([]byte{0x12, 0x05, 0x01})
		}, gateway.CodeMalformed},
	}
	for _, tc := range cases {
		c := dial(t, n.url)
		tc.send(c)
		code, reason, codes := c.closed()
		if code != gateway.StatusProtocol || reason != tc.code || !slices.Contains(codes, tc.code) {
			t.Errorf("%s: closed %d %q after %v, want %d %s", tc.name, code, reason, codes, gateway.StatusProtocol, tc.code)
		}
	}
	// Over the frame limit: the WebSocket layer closes with 1009.
	c := dial(t, n.url)
	c.login(f.token(11))
	c.must()
	c.sendRaw(make([]byte, gateway.DefaultMaxMessage+1))
	if code, _, _ := c.closed(); code != websocket.StatusMessageTooBig {
		t.Errorf("oversized message closed with %d, want 1009", code)
	}
}

func TestInputOnlyForTheOwnMasterAndPet(t *testing.T) {
	f := newFixture(t)
	n := f.node("gw-a", 1, nil)
	n.world.refuse = 77
	c, _ := f.loggedIn(n, 3)
	c.send(input(1, 1003, 1)) // the master
	c.send(input(2, 2003, 1)) // the pet
	c.send(input(3, 1004, 1)) // someone else's master
	c.send(input(4, 0, 1))
	c.send(input(5, 1003, 77)) // a kind the world refuses
	var errs []*clientpb.Error
	for len(errs) < 3 {
		if e := c.must().GetError(); e != nil {
			errs = append(errs, e)
		}
	}
	want := []struct {
		seq  uint32
		code string
	}{{3, gateway.CodeNotYours}, {4, gateway.CodeNotYours}, {5, gateway.CodeBadInput}}
	for i, w := range want {
		if errs[i].InputSeq != w.seq || errs[i].Code != w.code {
			t.Errorf("error %d: %v, want seq %d %s", i, errs[i], w.seq, w.code)
		}
	}
	_, _, inputs := n.world.snapshot()
	if len(inputs) != 2 || inputs[0].Entity != 1003 || inputs[1].Entity != 2003 || !inputs[0].HasPoint || inputs[0].Point.X != 10 {
		t.Fatalf("world got %+v, want the master's and the pet's inputs only", inputs)
	}
}

func TestFloodIsRateLimited(t *testing.T) {
	f := newFixture(t)
	n := f.node("gw-a", 1, func(c *gateway.Config) { c.Limits.InputRate, c.Limits.InputBurst = 10, 20 })
	c, _ := f.loggedIn(n, 3)
	const flood = 300
	for i := range flood {
		c.send(ping(uint64(i)))
	}
	c.send(&clientpb.ClientMessage{Body: &clientpb.ClientMessage_Logout{Logout: &clientpb.Logout{}}})
	pongs, limited := 0, 0
	for {
		m, code, _ := c.recv()
		if m == nil {
			if code != websocket.StatusNormalClosure && code != -1 {
				// The logout itself may be dropped by the limit; then the
				// socket stays open: close it from here.
				t.Fatalf("closed with %d", code)
			}
			break
		}
		if m.GetPong() != nil {
			pongs++
		}
		if e := m.GetError(); e != nil && e.Code == gateway.CodeRateLimited {
			limited++
		}
		if pongs+limited > flood {
			break
		}
		if pongs == 19 && limited == 1 { // the burst less the login, and one notice: the clock never moved
			break
		}
	}
	if pongs != 19 || limited != 1 {
		t.Fatalf("%d pongs and %d rate-limit notices for %d pings on a still clock, want 19 and 1", pongs, limited, flood)
	}
}

// forge flips a bit of a token's signature, keeping its text canonical.
func forge(t *testing.T, tok string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	return base64.RawURLEncoding.EncodeToString(b)
}
