package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardwise/shardwise/router"
)

// lineClient is a raw TCP client of the line protocol served by
// lineServer: one request line, one reply line. A mutex serialises
// requests on the one connection, so the router can hand the client to
// concurrent callers.
type lineClient struct {
	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
	// broken is the I/O error that left the stream out of step (a request
	// written without its reply read, or half a line read). The protocol
	// has no request ids, so the next reply read would be this request's:
	// every later call fails with it instead of returning another key's
	// value. The router then marks the node down and reconnects.
	broken error
}

// errBadRequest is a request the protocol cannot carry: the caller's
// mistake, not the node's.
var errBadRequest = errors.New("bad request")

// errBroken wraps the error that broke a client's stream.
var errBroken = errors.New("connection out of step after an I/O error")

// errNotFound is the server's "NOTFOUND" reply: an answer, not a failure of
// the node.
var errNotFound = errors.New("not found")

// dial opens a connection to n, bounded by ctx.
func dial(ctx context.Context, n router.Node) (*lineClient, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(n.Host, strconv.Itoa(n.Port)))
	if err != nil {
		return nil, err
	}
	return &lineClient{conn: conn, r: bufio.NewReader(conn)}, nil
}

// do sends one request and reads its reply. The context's deadline (or a
// default) becomes the socket deadline, so a dead peer cannot hang a call.
func (c *lineClient) do(ctx context.Context, request string) (string, error) {
	if strings.ContainsAny(request, "\r\n") {
		// A newline would smuggle a second request onto the wire and put
		// every later reply one step behind.
		return "", fmt.Errorf("%w: %q spans lines", errBadRequest, request)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return "", fmt.Errorf("%w: %w", errBroken, c.broken)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(2 * time.Second)
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(c.conn, "%s\n", request); err != nil {
		c.broken = err
		return "", err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.broken = err
		return "", err
	}
	line = strings.TrimSuffix(line, "\n")
	switch {
	case line == "NOTFOUND":
		return "", errNotFound
	case strings.HasPrefix(line, "ERR "):
		return "", errors.New(strings.TrimPrefix(line, "ERR "))
	}
	return line, nil
}

func (c *lineClient) Close() error { return c.conn.Close() }

// newRouter builds a router of raw TCP clients with PING health checks.
func newRouter(replicas int, probe time.Duration) (*router.Router[*lineClient], error) {
	return router.New(router.Options[*lineClient]{
		Connect: func(ctx context.Context, n router.Node) (*lineClient, error) {
			c, err := dial(ctx, n)
			if err != nil {
				return nil, err
			}
			if _, err := c.do(ctx, "PING"); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
		Disconnect: func(c *lineClient, _ router.Node) error { return c.Close() },
		Replicas:   replicas,
		ShouldMarkDown: func(err error, _ router.Node) bool {
			return !errors.Is(err, errNotFound) && !errors.Is(err, errBadRequest)
		},
		Health: &router.Health[*lineClient]{
			Check: func(ctx context.Context, c *lineClient, _ router.Node) error {
				reply, err := c.do(ctx, "PING")
				if err == nil && reply != "PONG" {
					err = fmt.Errorf("PING answered %q", reply)
				}
				return err
			},
			Interval: probe,
		},
		AttemptTimeout: time.Second,
	})
}
