package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shardwise/shardwise/gateway"
)

// A client that offers subprotocols, none of them shardwise.v1, is
// answered with an HTTP error naming the code, not upgraded: a WebSocket
// library refuses a 101 without the protocol it asked for before its
// user could read a close status. One that offers shardwise.v1 among
// others, or none at all, is upgraded.
func TestASubprotocolOtherThanOursIsRefusedBeforeTheUpgrade(t *testing.T) {
	f := newFixture(t)
	n := f.node("gw-a", 1, nil)
	for _, tc := range []struct {
		offer  []string
		status int // 101: upgraded
		chosen string
	}{
		{[]string{"other"}, http.StatusBadRequest, ""},
		{[]string{"shardwise.v2", "chat"}, http.StatusBadRequest, ""},
		{[]string{"other", gateway.Subprotocol}, http.StatusSwitchingProtocols, gateway.Subprotocol},
		{nil, http.StatusSwitchingProtocols, ""},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ws, resp, err := websocket.Dial(ctx, n.url, &websocket.DialOptions{Subprotocols: tc.offer})
		cancel()
		if resp == nil {
			t.Fatalf("offer %v: no HTTP answer: %v", tc.offer, err)
		}
		if resp.StatusCode != tc.status {
			t.Errorf("offer %v: status %d (err %v), want %d", tc.offer, resp.StatusCode, err, tc.status)
		}
		if ws != nil {
			if got := ws.Subprotocol(); got != tc.chosen {
				t.Errorf("offer %v: subprotocol %q, want %q", tc.offer, got, tc.chosen)
			}
			ws.CloseNow()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), gateway.CodeSubprotocol) {
			t.Errorf("offer %v: body %q, want it to name %s", tc.offer, body, gateway.CodeSubprotocol)
		}
	}
}
