package testenv_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardwise/shardwise/internal/testenv"
)

func ping(t *testing.T, addr string) error {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		t.Fatalf("PING answered %q", line)
	}
	return nil
}

func TestRedisKillRestart(t *testing.T) {
	s := testenv.StartRedis(t)
	if err := ping(t, s.Addr); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := ping(t, s.Addr); err == nil {
		t.Fatal("killed server still answers")
	}
	s.Restart(t)
	if err := ping(t, s.Addr); err != nil {
		t.Fatal(err)
	}
}

func TestPostgres(t *testing.T) {
	p := testenv.StartPostgres(t)
	ctx := context.Background()
	a, b := p.NewDatabase(t), p.NewDatabase(t)
	if a == b {
		t.Fatal("two databases share a URL")
	}
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 40 + 2").Scan(&n); err != nil || n != 42 {
		t.Fatalf("query: %v %d", err, n)
	}
}
