package webclient_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/internal/browsertest"
	"github.com/shardwise/shardwise/internal/testenv"
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
