package webclient_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/shardwise/shardwise/internal/browsertest"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

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

// browser opens a tab for t in the test binary's headless Chromium
// (browsertest.Start; TestMain stops the browser).
//
// The tests that open one (here and conformancePage) call t.Parallel:
// each has its own tab and browser context, servers and scripted world.
// Each used to start a browser of its own, about half of each one's wall
// clock (issue 28).
func browser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.Start(t, browsertest.Options{Width: 800, Height: 640})
}
