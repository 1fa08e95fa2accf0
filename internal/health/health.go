// Package health serves a node's liveness and readiness probes, /healthz
// and /readyz, on the node's HTTP address (beside its /metrics), in the
// form Kubernetes probes and load balancers read: the status code is the
// answer, the one-line text body the reason.
//
// It owns only the HTTP side. What makes a node ready is the node's: the
// caller passes a Check (zonehost.Host and econ.Host each have theirs).
//
// Invariants:
//  1. /healthz answers 200 whenever the process serves HTTP at all: it
//     says the process is alive, nothing about its work, so a probe of it
//     never restarts a node that is merely joining or fenced (a fenced
//     node stops by itself).
//  2. /readyz answers 200 only when Check returns nil, and 503 with
//     "not ready: <reason>" otherwise; a Check that has not returned by
//     Timeout counts as not ready.
//
// Layer: imports only the standard library.
package health

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Paths of the probes.
const (
	LivePath  = "/healthz"
	ReadyPath = "/readyz"
)

// Timeout bounds one readiness check.
const Timeout = 2 * time.Second

// Check reports whether the node is ready: nil, with a short description
// of what it serves, or an error saying why not ("joining: …",
// "fenced: …", "stopping").
type Check func(ctx context.Context) (string, error)

// Handle registers /healthz and /readyz on mux.
func Handle(mux *http.ServeMux, check Check) {
	mux.HandleFunc("GET "+LivePath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintln(w, "alive")
	})
	mux.HandleFunc("GET "+ReadyPath, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), Timeout)
		defer cancel()
		what, err := check(ctx)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", err)
			return
		}
		fmt.Fprintln(w, "ready:", what)
	})
}
