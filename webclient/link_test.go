package webclient_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/internal/browsertest"
	"github.com/shardwise/shardwise/internal/testenv"
)

// TestPageLogsInWithATokenInTheFragment: the page opened at
// /#token=… (the dashboard's play link) logs in with that token at once,
// and takes it out of the address bar (a token is single use).
func TestPageLogsInWithATokenInTheFragment(t *testing.T) {
	t.Parallel() // its own Chromium and servers: see browser
	ctx := browser(t)
	_, chunkBytes := testChunk(t)
	st := newStack(t, chunkBytes)
	const acct account.ID = 78
	if err := chromedp.Do(ctx, chromedp.Navigate(st.url+"/#token="+st.token(t, acct))); err != nil {
		t.Fatal(err)
	}
	var page pageState
	testenv.PollUntil(t, 20*time.Second, "Welcome", func() bool {
		page = pageState{}
		browsertest.EvalJSON(t, ctx, readPage, &page)
		return page.Welcome != nil
	})
	if page.Welcome.Account != "78" {
		t.Fatalf("welcome %+v, want account 78", *page.Welcome)
	}
	var hash string
	browsertest.EvalJSON(t, ctx, `JSON.stringify(location.hash)`, &hash)
	if hash != "" {
		t.Fatalf("the address still holds the token: %q", hash)
	}
}
