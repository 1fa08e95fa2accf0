package webclient

import (
	"os"
	"testing"

	"github.com/shardwise/shardwise/internal/browsertest"
)

// TestMain stops the headless Chromium the browser tests share
// (browsertest.Start) after the last test.
func TestMain(m *testing.M) {
	code := m.Run()
	browsertest.Shutdown()
	os.Exit(code)
}
