package webclient_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/webclient"
)

func TestHandlerServesEveryFileWithItsType(t *testing.T) {
	srv := httptest.NewServer(webclient.Handler())
	defer srv.Close()
	cases := []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script type="module" src="play.js">`},
		{"/index.html", "text/html; charset=utf-8", "<canvas"},
		{"/play.js", "text/javascript; charset=utf-8", `from "./client.js"`},
		{"/client.js", "text/javascript; charset=utf-8", "export class Client"},
		{"/proto.js", "text/javascript; charset=utf-8", "export function decodeServerMessage"},
		{"/frames.js", "text/javascript; charset=utf-8", "export function decodeBatch"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + c.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Type"); got != c.contentType {
				t.Errorf("Content-Type %q, want %q", got, c.contentType)
			}
			if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", got)
			}
			if !strings.Contains(string(body), c.contains) {
				t.Errorf("body does not contain %q", c.contains)
			}
		})
	}
}

func TestHandlerServesNothingElse(t *testing.T) {
	srv := httptest.NewServer(webclient.Handler())
	defer srv.Close()
	for _, p := range []string{"/missing.js", "/webclient.go", "/static/client.js", "/../go.mod", "/x.txt"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", p, resp.StatusCode)
		}
	}
}

// Every embedded file is one Handler gives a type: a new kind of file
// must be added to its table, or it would be unreachable.
func TestEveryEmbeddedFileHasAType(t *testing.T) {
	srv := httptest.NewServer(webclient.Handler())
	defer srv.Close()
	err := fs.WalkDir(webclient.Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		resp, err := http.Get(srv.URL + "/" + p)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d, want 200", p, resp.StatusCode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
