package webclient_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
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
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// chromiumPath finds Debian's chromium, or skips the test (fails it under
// SHARDWISE_REQUIRE_INTEGRATION=1).
func chromiumPath(t *testing.T) string {
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

// browser starts a headless Chromium for t and returns a context for its
// first tab. The browser is stopped, and waited for, when t ends. Console
// output and uncaught exceptions of the page go to t.Log.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root, where Chromium's sandbox will not start
		chromedp.DisableGPU,
		chromedp.WindowSize(800, 640),
		chromedp.UserDataDir(t.TempDir()),
	)
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 2*time.Minute)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	// The listener may run after the test: logging stops, under mu, before
	// the browser does.
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() {
		mu.Lock()
		ended = true
		mu.Unlock()
		cancelTab()
		cancelAlloc() // waits for the browser process to exit
		cancelTimeout()
	})
	start := time.Now()
	err := chromedp.Listen(tabCtx, func(ev any) { // starts the browser
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
			t.Logf("page exception at %s:%d: %s", d.URL, d.LineNumber, desc)
		}
	})
	if err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	t.Logf("chromium %s started in %v", path, time.Since(start).Round(time.Millisecond))
	return tabCtx
}

// evalJSON evaluates an expression that returns (a promise of) a JSON
// string, and decodes it into out.
func evalJSON(t *testing.T, ctx context.Context, expr string, out any) {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate: %v\n%s", err, expr)
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
}

// artifactDir is where screenshots go: $SHARDWISE_ARTIFACTS if set (CI
// keeps it), else the test's temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("SHARDWISE_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func saveScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	p := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s (%d bytes)", p, len(png))
}

// Payloads of the reference game's components, written as
// game/components.go writes them (its encoders are unexported; the
// conformance test TestDecodersAgreeWithGo checks the client against the
// real game's output).
func visualPayload(kind byte) []byte { return []byte{kind} }

func positionPayload(x, y, z float64) []byte { return zone.AppendPos(nil, torus.Pos{X: x, Y: y, Z: z}) }

func pathPayload(active bool, x, y float64) []byte {
	if !active {
		return []byte{0}
	}
	return zone.AppendPos([]byte{1}, torus.Pos{X: x, Y: y})
}

func speedPayload(mps float32) []byte {
	return binary.LittleEndian.AppendUint32(nil, math.Float32bits(mps))
}

func healthPayload(hp, mx uint64) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(nil, hp), mx)
}

func expPayload(points int64) []byte { return binary.AppendVarint(nil, points) }

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func fmtID(id uint64) string { return fmt.Sprint(id) }
