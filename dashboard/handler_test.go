package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/dashboard"
)

func get(t *testing.T, url string) *http.Response {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// TestHandlerServesThePageTheStateAndPlay: the page and its modules with
// fixed content types, the snapshot as JSON, the stream's first event at
// once, and /play as a redirect to the URL Play returns (not found
// without Play, unavailable when Play fails).
func TestHandlerServesThePageTheStateAndPlay(t *testing.T) {
	r := startRig(t, dashboard.CollectorConfig{})
	r.step(10)
	r.col.Event("hello")
	fail := false
	srv := httptest.NewServer(dashboard.Handler(r.col, dashboard.HandlerConfig{Play: func(context.Context) (string, error) {
		if fail {
			return "", errors.New("no gateway")
		}
		return dashboard.PlayURL("127.0.0.1:9000", "tok.en"), nil
	}}))
	t.Cleanup(srv.Close)
	for path, ct := range map[string]string{
		"/": "text/html", "/dashboard.js": "text/javascript",
		"/map.js": "text/javascript", "/dashboard.css": "text/css",
	} {
		resp := get(t, srv.URL+path)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) {
			t.Errorf("GET %s: %d %q, want 200 %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), ct)
		}
	}
	if resp := get(t, srv.URL+"/nope.txt"); resp.StatusCode != 404 {
		t.Errorf("GET /nope.txt: %d, want 404", resp.StatusCode)
	}
	var snap struct {
		dashboard.Snapshot
		Play bool `json:"play"`
	}
	resp := get(t, srv.URL+"/snapshot.json")
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	if !snap.Play || len(snap.Regions) != 16 || len(snap.Nodes) != 2 || len(snap.Events) != 1 {
		t.Fatalf("snapshot: play %v, %d regions, %d nodes, %d events", snap.Play, len(snap.Regions), len(snap.Nodes), len(snap.Events))
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/events", nil)
	sresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer sresp.Body.Close()
	if ct := sresp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("/events content type %q", ct)
	}
	sc := bufio.NewScanner(sresp.Body)
	sc.Buffer(nil, 1<<24)
	var event string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			if event != "snapshot" {
				t.Fatalf("data of event %q", event)
			}
			var s dashboard.Snapshot
			if err := json.Unmarshal([]byte(v), &s); err != nil || len(s.Regions) != 16 {
				t.Fatalf("the stream's snapshot: %v (%d regions)", err, len(s.Regions))
			}
			break
		}
	}
	cancel()

	presp := get(t, srv.URL+"/play")
	if loc := presp.Header.Get("Location"); presp.StatusCode != http.StatusFound || loc != "http://127.0.0.1:9000/#token=tok.en" {
		t.Fatalf("/play: %d to %q", presp.StatusCode, loc)
	}
	fail = true
	if presp = get(t, srv.URL+"/play"); presp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/play when Play fails: %d", presp.StatusCode)
	}
	bare := httptest.NewServer(dashboard.Handler(r.col, dashboard.HandlerConfig{}))
	t.Cleanup(bare.Close)
	if presp = get(t, bare.URL+"/play"); presp.StatusCode != 404 {
		t.Fatalf("/play without Play: %d, want 404", presp.StatusCode)
	}
}

func TestPlayURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8080":         "http://127.0.0.1:8080/#token=abc.def",
		"localhost:8080":         "http://localhost:8080/#token=abc.def",
		"http://gw.example:81":   "http://gw.example:81/#token=abc.def",
		"https://gw.example/app": "https://gw.example/app#token=abc.def",
	} {
		if got := dashboard.PlayURL(in, "abc.def"); got != want {
			t.Errorf("PlayURL(%q) = %q, want %q", in, got, want)
		}
	}
}
