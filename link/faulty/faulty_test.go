package faulty_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/shardwise/shardwise/link/faulty"
)

func TestCutClosesConnectionsAndRefusesDialsUntilHeal(t *testing.T) {
	n := faulty.New(1, nil)
	lis, err := n.Listen("b", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := n.Dialer("a")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dial(ctx, lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	defer server.Close()

	n.Cut("b", "a") // either order names the same pair
	server.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := server.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("server side after cut: %v, want EOF", err)
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Fatal("write on a cut connection succeeded")
	}
	if _, err := dial(ctx, lis.Addr().String()); !errors.Is(err, faulty.ErrCut) {
		t.Fatalf("dial across cut: %v", err)
	}
	if n.Injected("refused") != 1 {
		t.Fatalf("refused %d, want 1", n.Injected("refused"))
	}
	n.Heal("a", "b")
	c2, err := dial(ctx, lis.Addr().String())
	if err != nil {
		t.Fatalf("dial after heal: %v", err)
	}
	c2.Close()
}
