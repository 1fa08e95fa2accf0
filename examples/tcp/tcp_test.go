package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/shardwise/shardwise/router"
)

func TestRunAgainstInProcessServers(t *testing.T) {
	if err := run(t.Context(), "", 200); err != nil {
		t.Fatal(err)
	}
}

// Real sockets: one server dies (listener and connections closed), reads
// keep succeeding from the replicas, and a missing key is an answer that
// marks nothing down.
func TestServerDeathFailsOverOnRawTCP(t *testing.T) {
	var servers []*lineServer
	var nodes []router.Node
	for range 3 {
		s, err := startLineServer("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		servers = append(servers, s)
		nodes = append(nodes, router.Node{Host: "127.0.0.1", Port: s.Addr().Port})
	}
	r, err := newRouter(2, time.Hour) // probes out of the way: calls detect the death
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := t.Context()
	for _, n := range nodes {
		if err := r.AddNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	set := func(ctx context.Context, k, v string) error {
		_, err := r.ExecuteAll(ctx, k, func(ctx context.Context, c *lineClient, _ router.Node) error {
			_, err := c.do(ctx, "SET "+k+" "+v)
			return err
		})
		return err
	}
	get := func(ctx context.Context, k string) (string, error) {
		var got string
		err := r.Execute(ctx, k, func(ctx context.Context, c *lineClient, _ router.Node) error {
			v, err := c.do(ctx, "GET "+k)
			got = v
			return err
		})
		return got, err
	}
	const keys = 500
	for i := range keys {
		if err := set(ctx, fmt.Sprint(i), strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := get(ctx, "absent"); !errors.Is(err, errNotFound) {
		t.Fatalf("GET absent = %v", err)
	}
	if len(r.LiveNodes()) != 3 {
		t.Fatal("a missing key marked a node down")
	}
	// A key with a newline would smuggle a second request: refused before
	// it reaches the wire, and it is the caller's fault, not the node's.
	if _, err := get(ctx, "a\nSET x y"); !errors.Is(err, errBadRequest) {
		t.Fatalf("GET of a key with a newline = %v, want errBadRequest", err)
	}
	if len(r.LiveNodes()) != 3 {
		t.Fatal("a bad request marked a node down")
	}

	servers[0].Close()
	for i := range keys {
		if v, err := get(ctx, fmt.Sprint(i)); err != nil || v != strconv.Itoa(i) {
			t.Fatalf("read %d after a server died: %q, %v", i, v, err)
		}
	}
	for _, n := range r.LiveNodes() {
		if n == nodes[0] {
			t.Fatal("the dead server is still on the ring")
		}
	}
}

// A call cut off by its deadline leaves its reply in flight. The protocol
// has no request ids, so the client must not read that reply as the answer
// to its next request: every later call on the connection fails instead.
func TestTimedOutCallBreaksTheConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	testDone := t.Context().Done()
	replyFirst := make(chan struct{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		if _, err := r.ReadString('\n'); err != nil { // GET a
			return
		}
		select { // answer only after the client gave up
		case <-replyFirst:
		case <-testDone: // the test ended early
			return
		}
		fmt.Fprintf(conn, "value-of-a\n")
		if _, err := r.ReadString('\n'); err != nil { // GET b, if sent
			return
		}
		fmt.Fprintf(conn, "value-of-b\n")
	}()
	addr := ln.Addr().(*net.TCPAddr)
	c, err := dial(t.Context(), router.Node{Host: "127.0.0.1", Port: addr.Port})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	_, err = c.do(ctx, "GET a")
	cancel()
	if err == nil {
		t.Fatal("GET a answered before the server replied")
	}
	close(replyFirst)
	got, err := c.do(t.Context(), "GET b")
	if err == nil || !errors.Is(err, errBroken) {
		t.Fatalf("GET b on a connection out of step = %q, %v; want errBroken", got, err)
	}
	c.Close()
	<-served
}
