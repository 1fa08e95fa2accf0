package health_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shardwise/shardwise/internal/health"
)

func TestProbes(t *testing.T) {
	var why error
	mux := http.NewServeMux()
	health.Handle(mux, func(ctx context.Context) (string, error) {
		if why != nil {
			return "", why
		}
		return "table version 3", nil
	})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		b, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(b)
	}
	for _, tc := range []struct {
		why  error
		path string
		code int
		body string
	}{
		{nil, "/healthz", 200, "alive\n"},
		{nil, "/readyz", 200, "ready: table version 3\n"},
		{errors.New("fenced: lease lost"), "/readyz", 503, "not ready: fenced: lease lost\n"},
		{errors.New("fenced: lease lost"), "/healthz", 200, "alive\n"},
	} {
		why = tc.why
		if code, body := get(tc.path); code != tc.code || body != tc.body {
			t.Errorf("%s with %v: %d %q, want %d %q", tc.path, tc.why, code, body, tc.code, tc.body)
		}
	}
}
