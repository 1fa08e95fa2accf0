package gateway_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/proto/clientpb"
	"github.com/shardwise/shardwise/torus"
)

const cluster = "test-cluster"

var start = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// recWorld is the World of these tests: it names fixed entities for every
// session (master 1000+account, pet 2000+account) and records what the
// gateway asks of it. The zone runtime's World is tested in package zone;
// here the subject is the socket side.
type recWorld struct {
	mu       sync.Mutex
	sessions map[account.ID]*gateway.Session
	joins    []directory.Epoch
	leaves   []directory.Epoch
	inputs   []gateway.Input
	refuse   uint32 // an input kind the world refuses
}

func newRecWorld() *recWorld { return &recWorld{sessions: make(map[account.ID]*gateway.Session)} }

func (w *recWorld) Join(s *gateway.Session) error {
	w.mu.Lock()
	w.sessions[s.Account()] = s
	w.joins = append(w.joins, s.Epoch())
	w.mu.Unlock()
	s.SetYou(1000+uint64(s.Account()), 2000+uint64(s.Account()))
	return nil
}

func (w *recWorld) Input(s *gateway.Session, in gateway.Input) error {
	if in.Kind == w.refuse {
		return gateway.ErrBadInput
	}
	w.mu.Lock()
	w.inputs = append(w.inputs, in)
	w.mu.Unlock()
	return nil
}

func (w *recWorld) Leave(s *gateway.Session) {
	w.mu.Lock()
	w.leaves = append(w.leaves, s.Epoch())
	if w.sessions[s.Account()] == s {
		delete(w.sessions, s.Account())
	}
	w.mu.Unlock()
}

func (w *recWorld) session(a account.ID) *gateway.Session {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sessions[a]
}

func (w *recWorld) snapshot() (joins, leaves []directory.Epoch, inputs []gateway.Input) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]directory.Epoch(nil), w.joins...), append([]directory.Epoch(nil), w.leaves...), append([]gateway.Input(nil), w.inputs...)
}

// fixture is one cluster's shared parts: a directory, a fake clock, an
// issuer, and gateways on test HTTP servers.
type fixture struct {
	t      testing.TB
	clk    *clock.Fake
	dir    directory.Directory
	pub    ed25519.PublicKey
	priv   ed25519.PrivateKey
	issuer *logintoken.Issuer
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureWith(t, directory.MemoryConfig{})
}

func newFixtureWith(t testing.TB, dc directory.MemoryConfig) *fixture {
	t.Helper()
	clk := clock.NewFake(start)
	dc.Clock = clk
	dir, err := directory.NewMemory(dc)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: cluster, Key: priv, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, clk: clk, dir: dir, pub: pub, priv: priv, issuer: iss}
}

func (f *fixture) token(a account.ID) string {
	f.t.Helper()
	tok, _, err := f.issuer.Issue(a, gateway.Audience)
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}

type node struct {
	gw    *gateway.Gateway
	world *recWorld
	url   string
}

func (f *fixture) node(name string, id directory.NodeID, mod func(*gateway.Config)) *node {
	f.t.Helper()
	v, err := logintoken.NewVerifier(logintoken.VerifierConfig{
		Cluster: cluster, Audience: gateway.Audience, Keys: []ed25519.PublicKey{f.pub},
		SingleUse: f.dir, Clock: f.clk,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	w := newRecWorld()
	cfg := gateway.Config{
		Name: name, Node: id, Directory: f.dir, Verifier: v, World: w,
		Geometry: torus.Default(), Clock: f.clk,
	}
	if mod != nil {
		mod(&cfg)
	}
	gw, err := gateway.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	f.t.Cleanup(func() {
		if err := gw.Close(); err != nil {
			f.t.Error(err)
		}
		srv.Close()
	})
	return &node{gw: gw, world: w, url: "ws" + strings.TrimPrefix(srv.URL, "http")}
}

// client is a test client over a real WebSocket.
type client struct {
	t  testing.TB
	ws *websocket.Conn
	// cred is the resume credential the server handed after Welcome.
	cred *clientpb.ResumeCredential
}

func dial(t testing.TB, url string) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{gateway.Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &client{t: t, ws: ws}
}

func (c *client) send(m *clientpb.ClientMessage) {
	c.t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(b)
}

func (c *client) sendRaw(b []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageBinary, b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) resume(credential string) {
	c.t.Helper()
	c.send(&clientpb.ClientMessage{Body: &clientpb.ClientMessage_Resume{Resume: &clientpb.Resume{Credential: credential}}})
}

func (c *client) login(token string) {
	c.t.Helper()
	c.send(&clientpb.ClientMessage{Body: &clientpb.ClientMessage_Login{Login: &clientpb.Login{Token: token}}})
}

// recv returns the next server message, or the close status when the
// socket closed.
func (c *client) recv() (*clientpb.ServerMessage, websocket.StatusCode, string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return nil, ce.Code, ce.Reason
		}
		c.t.Fatalf("read: %v", err)
	}
	var m clientpb.ServerMessage
	if err := proto.Unmarshal(b, &m); err != nil {
		c.t.Fatalf("server sent %d undecodable bytes: %v", len(b), err)
	}
	return &m, -1, ""
}

func (c *client) must() *clientpb.ServerMessage {
	c.t.Helper()
	m, code, reason := c.recv()
	if m == nil {
		c.t.Fatalf("socket closed (%d %s), want a message", code, reason)
	}
	return m
}

// closed reads until the socket closes and returns the status, reason and
// the error codes received on the way.
func (c *client) closed() (websocket.StatusCode, string, []string) {
	c.t.Helper()
	var codes []string
	for {
		m, code, reason := c.recv()
		if m == nil {
			return code, reason, codes
		}
		if e := m.GetError(); e != nil {
			codes = append(codes, e.Code)
		}
	}
}

// loggedIn dials, logs in as a and returns the client after Welcome and You.
func (f *fixture) loggedIn(n *node, a account.ID) (*client, *clientpb.Welcome) {
	f.t.Helper()
	return f.loggedInWith(n, a, f.token(a))
}

func (f *fixture) loggedInWith(n *node, a account.ID, token string) (*client, *clientpb.Welcome) {
	f.t.Helper()
	c := dial(f.t, n.url)
	c.login(token)
	w := c.must().GetWelcome()
	if w == nil {
		f.t.Fatal("first message is not a Welcome")
	}
	if c.cred = c.must().GetResumeCredential(); c.cred == nil {
		f.t.Fatal("second message is not a ResumeCredential")
	}
	if you := c.must().GetYou(); you == nil || you.Master != 1000+uint64(a) {
		f.t.Fatalf("third message %v, want You with master %d", you, 1000+uint64(a))
	}
	return c, w
}

func input(seq uint32, entity uint64, kind uint32) *clientpb.ClientMessage {
	return &clientpb.ClientMessage{Body: &clientpb.ClientMessage_Input{Input: &clientpb.Input{
		Seq: seq, Entity: entity, Kind: kind, Point: &clientpb.Point{X: 10, Y: 20},
	}}}
}

func ping(n uint64) *clientpb.ClientMessage {
	return &clientpb.ClientMessage{Body: &clientpb.ClientMessage_Ping{Ping: &clientpb.Ping{Nonce: n}}}
}

// poll waits for cond, failing after a deadline.
func poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.PollUntil(t, 20*time.Second, what, cond)
}
