package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/internal/testenv"
)

var devServingRE = regexp.MustCompile(`etcd serving at (\S+);`)

// TestDevServesEtcdForTheOtherCommands: "shardwise dev" prints an endpoint
// that "shardwise members" and "regions apply" can use, keeps --data
// across runs and says what it found there (the table applied),
// refuses a taken port by name, and stops on an interrupt.
func TestDevServesEtcdForTheOtherCommands(t *testing.T) {
	t.Parallel() // waits on processes and sockets: see main_test.go
	data := t.TempDir() + "/etcd"
	dev := startShardwise(t, "dev", "--port", "0", "--data", data)
	var ep string
	testenv.PollUntil(t, 30*time.Second, "dev's endpoint line", func() bool {
		if dev.exited() {
			t.Fatalf("dev exited: %v\n%s", dev.err, dev.out.String())
		}
		m := devServingRE.FindStringSubmatch(dev.out.String())
		if m != nil {
			ep = m[1]
		}
		return m != nil
	})
	if !strings.Contains(dev.out.String(), "(new; kept at exit)") {
		t.Errorf("a fresh --data is not reported as new:\n%s", dev.out.String())
	}
	if out := runShardwise(t, "members", "--endpoints", ep); !strings.Contains(out, "0 member(s)") {
		t.Errorf("members against dev's etcd:\n%s", out)
	}
	runShardwise(t, "regions", "apply", "--endpoints", ep, "--force", smallTableFile(t, 1, false, "zone-a", "zone-b", "zone-a", "zone-b"))
	port := ep[strings.LastIndexByte(ep, ':')+1:]
	_, err := runCmd(t, newRootCmd(), "", "dev", "--port", port)
	if err == nil || !strings.Contains(err.Error(), "client port "+port) {
		t.Errorf("dev on a taken port: %v, want an error naming the port", err)
	}
	if err := dev.stop(10 * time.Second); err != nil {
		t.Fatalf("dev did not stop on the interrupt: %v\n%s", err, dev.out.String())
	}
	again := startShardwise(t, "dev", "--port", "0", "--data", data)
	testenv.PollUntil(t, 30*time.Second, "the second run's endpoint line", func() bool {
		return devServingRE.MatchString(again.out.String()) || again.exited()
	})
	if want := "found an earlier run's data, serving it again: region table version 1 over 2 node(s) (zone-a, zone-b), no members"; !strings.Contains(again.out.String(), want) {
		t.Errorf("a reused --data is not reported as %q:\n%s", want, again.out.String())
	}
}
