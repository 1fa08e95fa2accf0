// Package browsertest runs a test's web page in a real headless Chromium
// (Debian's chromium, driven by chromedp): the packages that serve pages
// (webclient, dashboard) test them with it. Without a Chromium binary a
// test is skipped loudly, and fails under SHARDWISE_REQUIRE_INTEGRATION=1
// (internal/testenv.Unavailable).
package browsertest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/shardwise/shardwise/internal/testenv"
)

// ChromiumPath is $SHARDWISE_CHROMIUM, else the chromium on PATH or in
// /usr/bin; without one it skips t (fails it when integration suites are
// required).
func ChromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SHARDWISE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	testenv.Unavailable(t, "chromium is not installed", "apt-get install -y chromium, or set SHARDWISE_CHROMIUM to a Chrome binary")
	return ""
}

// Options shape the browser Start runs.
type Options struct {
	// Width and Height are the window's size in CSS pixels. Default
	// 800×640.
	Width, Height int
	// ExceptionsFail makes an uncaught exception of the page fail the
	// test; otherwise it is logged like the console.
	ExceptionsFail bool
}

// shared is the one Chromium of a test binary: starting one costs about a
// second of wall clock and half a second of CPU, and the web pages' tests
// start about twenty (issue 28). Each test gets a tab of its own in a
// browser context of its own (no cookie, storage or cache shared with
// another test), sized as its Options say. Shutdown, from the package's
// TestMain, stops it; were TestMain to forget, chromedp starts it with
// the parent-death signal, so it does not outlive the test binary.
var shared struct {
	mu      sync.Mutex
	browser context.Context // the first tab's context: the browser's
	cancel  func()
	dir     string // its user data directory
}

// browser returns the shared browser's context, starting it first.
func browser(t *testing.T) context.Context {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.browser != nil {
		return shared.browser
	}
	path := ChromiumPath(t)
	dir, err := os.MkdirTemp("", "browsertest-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root, where Chromium's sandbox will not start
		chromedp.DisableGPU,
		chromedp.UserDataDir(dir),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	start := time.Now()
	if err := chromedp.Do(browserCtx); err != nil { // starts the browser
		cancelBrowser()
		cancelAlloc()
		_ = os.RemoveAll(dir)
		t.Fatalf("start chromium %s: %v", path, err)
	}
	t.Logf("chromium %s started in %v (shared by this binary's tests)", path, time.Since(start).Round(time.Millisecond))
	shared.browser, shared.dir = browserCtx, dir
	shared.cancel = func() {
		cancelBrowser()
		cancelAlloc() // waits for the browser process to exit
	}
	return browserCtx
}

// Shutdown stops the shared browser, if a test started it, and waits for
// it. A package whose tests call Start calls it from TestMain after
// m.Run.
func Shutdown() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.browser == nil {
		return
	}
	shared.cancel()
	_ = os.RemoveAll(shared.dir)
	shared.browser, shared.cancel, shared.dir = nil, nil, ""
}

// Start opens a tab for t, in a browser context of its own, in the test
// binary's headless Chromium (started by the first Start), and returns
// the tab's context (two minutes at most). The tab and its browser
// context are closed when t ends. The page's console output and uncaught
// exceptions go to t.Log (exceptions to t.Error with
// Options.ExceptionsFail).
func Start(t *testing.T, o Options) context.Context {
	t.Helper()
	if o.Width == 0 || o.Height == 0 {
		o.Width, o.Height = 800, 640
	}
	b := browser(t)
	ctx, cancelTimeout := context.WithTimeout(b, 2*time.Minute)
	tabCtx, cancelTab := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	// The listener may run after the test: logging stops, under mu, before
	// the tab closes.
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() {
		mu.Lock()
		ended = true
		mu.Unlock()
		cancelTab() // closes the tab and its browser context, and waits
		cancelTimeout()
	})
	err := chromedp.Listen(tabCtx, func(ev any) { // opens the tab
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return
		}
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value))
			}
			t.Logf("console.%s: %s", ev.Type, strings.Join(args, " "))
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			desc := d.Text
			if d.Exception != nil {
				desc += " " + d.Exception.Description
			}
			if o.ExceptionsFail {
				t.Errorf("page exception at %s:%d: %s", d.URL, d.LineNumber, desc)
			} else {
				t.Logf("page exception at %s:%d: %s", d.URL, d.LineNumber, desc)
			}
		}
	})
	if err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	// The window's size: the tab's viewport, as the browser's window flag
	// set it when each test had a browser of its own.
	if err := chromedp.Do(tabCtx, chromedp.EmulateViewport(int64(o.Width), int64(o.Height))); err != nil {
		t.Fatalf("size the tab: %v", err)
	}
	return tabCtx
}

// EvalJSON evaluates in the page an expression that gives a JSON string,
// or a promise of one, and decodes it into out; any failure fails t.
func EvalJSON(t testing.TB, ctx context.Context, expr string, out any) {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate: %v\n%s", err, expr)
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
}

// ArtifactDir is where a test's screenshots go: $SHARDWISE_ARTIFACTS if
// set (CI keeps it), else the test's temporary directory.
func ArtifactDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("SHARDWISE_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// Screenshot saves a full-page screenshot as name in ArtifactDir, and at
// each of also; a failure is a test error, not fatal.
func Screenshot(t testing.TB, ctx context.Context, name string, also ...string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	for _, p := range append([]string{filepath.Join(ArtifactDir(t), name)}, also...) {
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Errorf("screenshot: %v", err)
			continue
		}
		t.Logf("screenshot: %s (%d bytes)", p, len(png))
	}
}
