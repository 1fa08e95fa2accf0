package main

import (
	"errors"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/router"
)

func TestParseNodes(t *testing.T) {
	nodes, err := parseNodes("10.0.0.1:6379, 10.0.0.2:6380=200,[::1]:7000")
	if err != nil {
		t.Fatal(err)
	}
	want := []router.Node{{Host: "10.0.0.1", Port: 6379}, {Host: "10.0.0.2", Port: 6380, Vnodes: 200}, {Host: "::1", Port: 7000}}
	if len(nodes) != len(want) {
		t.Fatalf("nodes = %v", nodes)
	}
	for i := range want {
		if nodes[i] != want[i] {
			t.Errorf("node %d = %+v, want %+v", i, nodes[i], want[i])
		}
	}
	for _, bad := range []string{"", "nohost", "a:b", "a:1=x", "a:0", "a:1=-5"} {
		if _, err := parseNodes(bad); err == nil {
			t.Errorf("parseNodes(%q) accepted", bad)
		}
	}
	if _, err := parseNodes("a:70000"); !errors.Is(err, errcode.ErrConfigInvalid) {
		t.Errorf("out-of-range port: %v", err)
	}
}

// parseNodes decodes a command-line flag: never panics, and whatever it
// accepts is a valid node list.
func FuzzParseNodes(f *testing.F) {
	for _, seed := range []string{"127.0.0.1:6379", "a:1=200,b:2", "[::1]:7000=5", ",,", "a:1=", "=:"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		nodes, err := parseNodes(spec)
		if err != nil {
			return
		}
		if len(nodes) == 0 {
			t.Fatal("accepted an empty list")
		}
		for _, n := range nodes {
			if err := n.Validate(); err != nil {
				t.Fatalf("accepted invalid node %+v: %v", n, err)
			}
		}
	})
}
