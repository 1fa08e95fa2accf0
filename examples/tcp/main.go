package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/shardwise/shardwise/router"
)

func main() {
	nodesFlag := flag.String("nodes", "", "comma-separated host:port of line servers (empty: start three in process)")
	keys := flag.Int("keys", 100, "keys to write and read back")
	flag.Parse()
	if err := run(context.Background(), *nodesFlag, *keys); err != nil {
		fmt.Fprintln(os.Stderr, "tcp example:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, spec string, keys int) error {
	var nodes []router.Node
	if spec == "" {
		for range 3 {
			s, err := startLineServer("127.0.0.1:0")
			if err != nil {
				return err
			}
			defer s.Close()
			nodes = append(nodes, router.Node{Host: "127.0.0.1", Port: s.Addr().Port})
		}
	}
	for _, addr := range strings.Split(spec, ",") {
		if addr = strings.TrimSpace(addr); addr == "" {
			continue
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return err
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return fmt.Errorf("node %q: %w", addr, err)
		}
		nodes = append(nodes, router.Node{Host: host, Port: p})
	}

	r, err := newRouter(2, time.Second)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, n := range nodes {
		if err := r.AddNode(ctx, n); err != nil {
			return err
		}
	}
	for i := range keys {
		k := fmt.Sprintf("k%d", i)
		if _, err := r.ExecuteAll(ctx, k, func(ctx context.Context, c *lineClient, _ router.Node) error {
			_, err := c.do(ctx, "SET "+k+" "+strconv.Itoa(i))
			return err
		}); err != nil {
			return err
		}
	}
	for i := range keys {
		k := fmt.Sprintf("k%d", i)
		var got string
		if err := r.Execute(ctx, k, func(ctx context.Context, c *lineClient, _ router.Node) error {
			v, err := c.do(ctx, "GET "+k)
			got = v
			return err
		}); err != nil || got != strconv.Itoa(i) {
			return fmt.Errorf("read %s = %q, %v", k, got, err)
		}
	}
	fmt.Printf("wrote and read back %d keys over %d raw TCP nodes\n", keys, len(nodes))
	return nil
}
