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
}

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
	c.mu.Lock()
	defer c.mu.Unlock()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(2 * time.Second)
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(c.conn, "%s\n", request); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
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
			return !errors.Is(err, errNotFound)
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
