// Package nodehttp builds the http.Server of a node's plain HTTP
// addresses (a zone or economy node's metrics and probes, the dashboard):
// one place for the timeouts that keep a slow or idle client from holding
// a connection, and a file descriptor, for ever. The gateway's port, which
// also upgrades to WebSockets, has its own (gateway.Limits).
//
// Invariants:
//  1. Reading a request's headers is bounded (ReadHeader), and so is
//     reading the whole request (Read), from its first byte.
//  2. A keep-alive connection waiting for its next request is closed
//     after Idle: a client that fetched a page, or a probe that keeps its
//     connection, releases it.
//  3. Writing a response is not bounded here: the dashboard streams its
//     events for as long as the page is open. (A handler that streams
//     clears its own read deadline, http.ResponseController, since the
//     server cancels a request's context when its read deadline passes.)
//
// Layer: imports only the standard library.
package nodehttp

import (
	"net/http"
	"time"
)

// Defaults of Timeouts.
const (
	DefaultReadHeader = 10 * time.Second
	DefaultRead       = 10 * time.Second
	DefaultIdle       = 30 * time.Second
)

// Timeouts bound what one client may hold. Zero fields take the defaults.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers. Default
	// DefaultReadHeader.
	ReadHeader time.Duration
	// Read bounds reading a whole request, headers and body, from its
	// first byte. Default DefaultRead; negative: none, for a server whose
	// handlers stream without clearing their read deadline.
	Read time.Duration
	// Idle closes a keep-alive connection that waits this long for its
	// next request. Default DefaultIdle.
	Idle time.Duration
}

// NewServer returns a server of h bounded by t.
func NewServer(h http.Handler, t Timeouts) *http.Server {
	if t.ReadHeader == 0 {
		t.ReadHeader = DefaultReadHeader
	}
	if t.Read == 0 {
		t.Read = DefaultRead
	}
	if t.Idle == 0 {
		t.Idle = DefaultIdle
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: max(t.Read, 0), IdleTimeout: t.Idle}
}
