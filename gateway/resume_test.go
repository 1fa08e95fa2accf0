package gateway_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/proto/clientpb"
	"github.com/shardwise/shardwise/torus"
)

// resumedOn dials n, resumes with credential and returns the client
// after Welcome, its new ResumeCredential and You.
func (f *fixture) resumedOn(n *node, a account.ID, credential string) (*client, *clientpb.Welcome) {
	f.t.Helper()
	c := dial(f.t, n.url)
	c.resume(credential)
	w := c.must().GetWelcome()
	if w == nil {
		f.t.Fatal("first message after a resume is not a Welcome")
	}
	if c.cred = c.must().GetResumeCredential(); c.cred == nil {
		f.t.Fatal("second message after a resume is not a ResumeCredential")
	}
	if you := c.must().GetYou(); you == nil || you.Master != 1000+uint64(a) {
		f.t.Fatalf("third message %v, want You with master %d", you, 1000+uint64(a))
	}
	return c, w
}

// refusedResume dials n, resumes with credential and wants the socket
// closed with status and reason.
func (f *fixture) refusedResume(n *node, credential string, status websocket.StatusCode, reason string) {
	f.t.Helper()
	c := dial(f.t, n.url)
	c.resume(credential)
	if code, got, codes := c.closed(); code != status || got != reason || !slices.Contains(codes, reason) {
		f.t.Fatalf("resume closed %d %q after %v, want %d %s", code, got, codes, status, reason)
	}
}

// A client whose socket dropped comes back on another gateway with its
// credential: a new, higher session epoch that displaces the old one (the
// World is told, to take the player over), and a fresh credential, while
// the spent one is refused everywhere.
func TestAResumeOnAnotherGatewayContinuesTheSession(t *testing.T) {
	f := newFixture(t)
	a, b := f.node("gw-a", 1, nil), f.node("gw-b", 2, nil)
	first, w1 := f.loggedIn(a, 5)
	if first.cred.WindowMs != uint32(gateway.DefaultResumeWindow.Milliseconds()) {
		t.Fatalf("window %d ms, want the default %v", first.cred.WindowMs, gateway.DefaultResumeWindow)
	}
	cred, err := gateway.ParseCredential(first.cred.Credential)
	if err != nil || cred.Account != 5 || uint64(cred.Epoch) != w1.SessionEpoch {
		t.Fatalf("credential %+v %v, want account 5 epoch %d", cred, err, w1.SessionEpoch)
	}
	// The old socket is still open (its gateway hung, say): the resume
	// displaces it.
	second, w2 := f.resumedOn(b, 5, first.cred.Credential)
	if w2.SessionEpoch <= w1.SessionEpoch || w2.Gateway != "gw-b" || w2.Account != 5 {
		t.Fatalf("resumed Welcome %v after epoch %d", w2, w1.SessionEpoch)
	}
	if second.cred.Credential == first.cred.Credential {
		t.Fatal("the resume handed back the spent credential")
	}
	s := b.world.session(5)
	if s == nil || uint64(s.Epoch()) != w2.SessionEpoch || uint64(s.Displaced().Epoch) != w1.SessionEpoch {
		t.Fatalf("the world's session %v does not name the session it displaced (%d)", s, w1.SessionEpoch)
	}
	f.clk.Advance(directory.DefaultLeaseTTL / 3) // gw-a's renewal finds it displaced
	if code, reason, _ := first.closed(); code != gateway.StatusDisplaced || reason != gateway.CodeDisplaced {
		t.Fatalf("old socket closed %d %q, want displaced", code, reason)
	}
	// Single use: the spent credential is refused on every gateway.
	f.refusedResume(a, first.cred.Credential, gateway.StatusResumeRefused, gateway.CodeResumeRefused)
	f.refusedResume(b, first.cred.Credential, gateway.StatusResumeRefused, gateway.CodeResumeRefused)
	// The chain goes on: the new credential works, once.
	second.ws.CloseNow()
	third, w3 := f.resumedOn(a, 5, second.cred.Credential)
	if w3.SessionEpoch <= w2.SessionEpoch {
		t.Fatalf("epochs %d then %d", w2.SessionEpoch, w3.SessionEpoch)
	}
	third.send(ping(9))
	for third.must().GetPong() == nil {
	}
}

// The refusals: a credential past its window, one of another account, one
// of a session that logged out or that a newer login displaced, and bytes
// that are no credential.
func TestResumeRefusals(t *testing.T) {
	f := newFixture(t)
	n := f.node("gw-a", 1, func(c *gateway.Config) { c.ResumeWindow = 20 * time.Second; c.RenewEvery = time.Hour })

	// Expired: the socket dropped and the window passed.
	c, _ := f.loggedIn(n, 1)
	c.ws.CloseNow()
	poll(t, "the dropped session to leave", func() bool { return n.world.session(1) == nil })
	f.clk.Advance(20 * time.Second)
	f.refusedResume(n, c.cred.Credential, gateway.StatusResumeRefused, gateway.CodeResumeRefused)

	// Within the window it works (and the dropped session left the world).
	c, _ = f.loggedIn(n, 2)
	c.ws.CloseNow()
	poll(t, "the dropped session to leave", func() bool { return n.world.session(2) == nil })
	f.clk.Advance(19 * time.Second)
	f.resumedOn(n, 2, c.cred.Credential)

	// Another account's: account 3's credential with account 4 in it.
	c3, _ := f.loggedIn(n, 3)
	f.loggedIn(n, 4)
	cred, err := gateway.ParseCredential(c3.cred.Credential)
	if err != nil {
		t.Fatal(err)
	}
	forged := cred
	forged.Account = 4
	f.refusedResume(n, forged.String(), gateway.StatusResumeRefused, gateway.CodeResumeRefused)
	forged = cred
	forged.Secret[0] ^= 1
	f.refusedResume(n, forged.String(), gateway.StatusResumeRefused, gateway.CodeResumeRefused)

	// Logged out: a logout ends the session for good.
	c3.send(&clientpb.ClientMessage{Body: &clientpb.ClientMessage_Logout{Logout: &clientpb.Logout{}}})
	if code, _, _ := c3.closed(); code != websocket.StatusNormalClosure {
		t.Fatalf("logout closed %d", code)
	}
	poll(t, "the logout to leave", func() bool { return n.world.session(3) == nil })
	f.refusedResume(n, c3.cred.Credential, gateway.StatusResumeRefused, gateway.CodeResumeRefused)

	// Displaced by a newer login.
	c5, _ := f.loggedIn(n, 5)
	f.loggedIn(n, 5)
	f.refusedResume(n, c5.cred.Credential, gateway.StatusResumeRefused, gateway.CodeResumeRefused)

	// Not a credential: a protocol error.
	f.refusedResume(n, "not-a-credential", gateway.StatusProtocol, gateway.CodeMalformed)
	f.refusedResume(n, c5.cred.Credential[:len(c5.cred.Credential)-1]+"!", gateway.StatusProtocol, gateway.CodeMalformed)
}

func TestResumeWindowIsValidated(t *testing.T) {
	f := newFixture(t)
	v, err := logintoken.NewVerifier(logintoken.VerifierConfig{
		Cluster: cluster, Audience: gateway.Audience, Keys: []ed25519.PublicKey{f.pub}, SingleUse: f.dir, Clock: f.clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.Config{Name: "gw", Node: 1, Directory: f.dir, Verifier: v, World: newRecWorld(), Geometry: torus.Default()}
	for _, w := range []time.Duration{time.Second, 24 * time.Hour, 0} {
		cfg.ResumeWindow = w
		if err := cfg.Validate(); err != nil {
			t.Fatalf("ResumeWindow %v: %v", w, err)
		}
	}
	for _, w := range []time.Duration{-time.Second, time.Millisecond, 999 * time.Millisecond, 25 * time.Hour, time.Second + time.Microsecond} {
		cfg.ResumeWindow = w
		var ce *errcode.ConfigError
		if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != "Config.ResumeWindow" {
			t.Fatalf("ResumeWindow %v: %v, want a config error naming Config.ResumeWindow", w, err)
		}
	}
}

func TestCredentialRoundTrip(t *testing.T) {
	c := gateway.Credential{Account: 77, Epoch: 1 << 50, Secret: [32]byte{1, 2, 3, 31: 9}}
	s := c.String()
	if len(s) != gateway.CredentialLen {
		t.Fatalf("text of %d characters, want %d", len(s), gateway.CredentialLen)
	}
	got, err := gateway.ParseCredential(s)
	if err != nil || got != c {
		t.Fatalf("ParseCredential(%q) = %+v, %v", s, got, err)
	}
}

// downDir is a directory whose Connect and Resume cannot reach the store.
type downDir struct{ directory.Directory }

func (downDir) Connect(context.Context, account.ID, directory.NodeID) (directory.Session, directory.Session, error) {
	return directory.Session{}, directory.Session{}, &directory.UnavailableError{Op: directory.OpConnect, Err: errors.New("down")}
}

func (downDir) Resume(context.Context, account.ID, directory.Epoch, directory.ResumeHash, directory.NodeID) (directory.Session, directory.Session, error) {
	return directory.Session{}, directory.Session{}, &directory.UnavailableError{Op: directory.OpResume, Err: errors.New("down")}
}

// A directory out of reach after a good token, or for a resume, closes
// the socket with 4006 GATEWAY.UNAVAILABLE (not a refusal: the client may
// retry the same credential) and starts nothing in the world.
func TestADirectoryOutOfReachStartsNoSession(t *testing.T) {
	f := newFixture(t)
	up := f.node("gw-up", 1, nil)
	c, _ := f.loggedIn(up, 9)
	n := f.node("gw-down", 2, func(cfg *gateway.Config) { cfg.Directory = downDir{f.dir} })
	login := dial(t, n.url)
	login.login(f.token(9))
	if code, reason, codes := login.closed(); code != gateway.StatusUnavailable || reason != gateway.CodeUnavailable || !slices.Contains(codes, gateway.CodeUnavailable) {
		t.Fatalf("login closed %d %q after %v, want 4006", code, reason, codes)
	}
	f.refusedResume(n, c.cred.Credential, gateway.StatusUnavailable, gateway.CodeUnavailable)
	if joins, _, _ := n.world.snapshot(); len(joins) != 0 {
		t.Fatalf("the world was joined %d times", len(joins))
	}
	// The credential was not spent: it still works where the directory is.
	f.resumedOn(up, 9, c.cred.Credential)
}
