package webclient_test

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/internal/browsertest"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/webclient"
)

// sessions returns the sessions the scripted world serves now.
func (w *scriptWorld) sessions() []*gateway.Session {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*gateway.Session
	for s := range w.stops {
		out = append(out, s)
	}
	return out
}

// The page's socket drops without a Logout (the world cannot serve it:
// 4006): the client resumes the session with its credential on its own —
// no token (the page has none left: its one was spent) — gets a newer
// epoch, and sees its master again.
func TestPageResumesAfterADrop(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := browser(t)
	_, chunkBytes := testChunk(t)
	st := newStack(t, chunkBytes)
	const acct account.ID = 78
	err := chromedp.Do(ctx,
		chromedp.Navigate(st.url+"/"),
		chromedp.WaitVisible(chromedp.ID("connect")),
		chromedp.Evaluate[chromedp.Void](`window.seen = {batches: 0, vanished: [], errors: [], resumed: 0, reconnecting: 0};
			window.addEventListener("shardwise-client", (ev) => {
				const c = ev.detail;
				c.on("reconnecting", () => seen.reconnecting++);
				c.on("resumed", () => seen.resumed++);
				c.on("reconnectfailed", (e) => seen.errors.push("reconnectfailed: " + e.message));
			}); true`),
		chromedp.SetValue(chromedp.CSS(`input[name=token]`), st.token(t, acct)),
		chromedp.Click(chromedp.ID("connect")),
	)
	if err != nil {
		t.Fatal(err)
	}
	type state struct {
		Epoch        string
		Credential   bool
		Master       bool
		Resumed      int
		Reconnecting int
		Errors       []string
	}
	const read = `JSON.stringify((() => {
		const c = window.shardwise.client;
		return {epoch: c?.welcome ? c.welcome.sessionEpoch.toString() : "", credential: !!c?.credential,
			master: !!c?.world.entities.get(c.world.master), resumed: seen.resumed, reconnecting: seen.reconnecting, errors: seen.errors};
	})())`
	var s state
	poll := func(what string, cond func() bool) {
		t.Helper()
		testenv.PollUntil(t, 20*time.Second, what, func() bool {
			s = state{}
			browsertest.EvalJSON(t, ctx, read, &s)
			return cond()
		})
	}
	poll("the login, its credential and the master", func() bool { return s.Epoch != "" && s.Credential && s.Master })
	first := s.Epoch
	for _, sess := range st.world.sessions() {
		sess.Fail("test: the world drops the socket")
	}
	poll("the resume", func() bool { return s.Resumed == 1 && s.Epoch != "" && s.Epoch != first && s.Master })
	if s.Reconnecting != 1 || len(s.Errors) != 0 {
		t.Fatalf("after the resume: %+v", s)
	}
	if len(s.Epoch) < len(first) || (len(s.Epoch) == len(first) && s.Epoch <= first) {
		t.Fatalf("resumed epoch %s not above %s", s.Epoch, first)
	}
}

// liveGateway is a scripted world's gateway over a shared directory,
// serving the client's files too.
type liveGateway struct {
	gw    *gateway.Gateway
	world *scriptWorld
	url   string // http://host:port
}

func startGateways(t *testing.T, chunk []byte, names ...string) ([]*liveGateway, *logintoken.Issuer) {
	t.Helper()
	dir, err := directory.NewMemory(directory.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	const cluster = "webclient-test"
	iss, err := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: cluster, Key: priv})
	if err != nil {
		t.Fatal(err)
	}
	var out []*liveGateway
	for i, name := range names {
		v, err := logintoken.NewVerifier(logintoken.VerifierConfig{
			Cluster: cluster, Audience: gateway.Audience, Keys: []ed25519.PublicKey{pub}, SingleUse: dir,
		})
		if err != nil {
			t.Fatal(err)
		}
		world := newScriptWorld(chunk, scriptBatch, 0)
		gw, err := gateway.New(gateway.Config{Name: name, Node: directory.NodeID(i + 1), Directory: dir, Verifier: v, World: world, Geometry: torus.Default(),
			OriginPatterns: []string{"127.0.0.1:*"}}) // the page of one gateway resumes on another: a foreign origin
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/ws", gw)
		mux.Handle("/", webclient.Handler())
		srv := httptest.NewServer(mux)
		t.Cleanup(func() {
			_ = gw.Close()
			world.Close()
			srv.Close()
		})
		out = append(out, &liveGateway{gw: gw, world: world, url: srv.URL})
	}
	return out, iss
}

func wsURL(httpURL string) string { return "ws" + strings.TrimPrefix(httpURL, "http") + "/ws" }

// A client given three gateways loses its own (the node stops: 4005):
// it resumes on the next one, which is dead, then on the one after, with
// no token.
func TestClientResumesOnTheNextLiveGateway(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := browser(t)
	_, chunk := testChunk(t)
	gws, iss := startGateways(t, chunk, "web-a", "web-b")
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	tok, _, err := iss.Issue(79, gateway.Audience)
	if err != nil {
		t.Fatal(err)
	}
	urls, _ := json.Marshal([]string{wsURL(gws[0].url), wsURL(dead.URL), wsURL(gws[1].url)})
	err = chromedp.Do(ctx,
		chromedp.Navigate(gws[0].url+"/"),
		chromedp.WaitVisible(chromedp.ID("connect")),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(async () => {
			const { Client } = await import("/client.js");
			const urls = %s;
			window.rs = {resumed: 0, failed: [], gateways: []};
			const c = new Client({gateways: urls, resumeBackoff: 20});
			window.rc = c;
			rs.tries = [];
			const open = c.open.bind(c);
			c.open = (u) => { rs.tries.push(u); return open(u).then(() => rs.tries.push("open"), (e) => { rs.tries.push("fail " + e.message); throw e; }); };
			c.on("close", (x) => rs.tries.push("close " + x.code + " " + x.reason));
			c.on("resumed", (w) => { rs.resumed++; rs.gateways.push(w.gateway); });
			c.on("reconnectfailed", (e) => rs.failed.push(String(e.message)));
			await c.connect(urls[0]);
			await c.login(%q);
		})(); true`, urls, tok)),
	)
	if err != nil {
		t.Fatal(err)
	}
	type state struct {
		Closed   any
		Cred     bool
		Tries    []string
		Gateway  string
		Master   bool
		Resumed  int
		Failed   []string
		Gateways []string
	}
	const read = `JSON.stringify({closed: window.rc?.closed, cred: !!window.rc?.credential, gateway: window.rc?.welcome?.gateway ?? "", master: !!window.rc?.world.entities.get(window.rc.world.master),
		tries: window.rs?.tries ?? [], resumed: window.rs?.resumed ?? 0, failed: window.rs?.failed ?? [], gateways: window.rs?.gateways ?? []})`
	var s state
	poll := func(what string, cond func() bool) {
		t.Helper()
		defer func() { t.Logf("state: %+v", s) }()
		testenv.PollUntil(t, 20*time.Second, what, func() bool {
			s = state{}
			browsertest.EvalJSON(t, ctx, read, &s)
			return cond()
		})
	}
	poll("the login on web-a", func() bool { return s.Gateway == "web-a" && s.Master })
	_ = gws[0].gw.Close() // web-a's node stops: 4005, and it takes no new socket
	poll("the resume on web-b", func() bool { return s.Resumed == 1 && s.Gateway == "web-b" && s.Master })
	if len(s.Failed) != 0 || len(s.Gateways) != 1 {
		t.Fatalf("after the resume: %+v", s)
	}
}
