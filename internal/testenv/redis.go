package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RedisServer is a redis-server process owned by one test.
type RedisServer struct {
	// Addr is host:port on 127.0.0.1.
	Addr string
	Port int

	bin string
	dir string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartRedis starts a redis-server with no persistence on a free port and
// stops it when tb ends.
func StartRedis(tb testing.TB) *RedisServer {
	tb.Helper()
	bin, err := lookBinary("redis-server")
	if err != nil {
		Unavailable(tb, "redis-server is not installed", "apt-get install redis-server")
	}
	dir, err := os.MkdirTemp("", "shardwise-redis-")
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	port := FreePort(tb)
	s := &RedisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, bin: bin, dir: dir}
	tb.Cleanup(func() {
		s.Kill()
		os.RemoveAll(dir)
	})
	if err := s.start(); err != nil {
		tb.Fatalf("testenv: start redis-server: %v", err)
	}
	return s
}

func (s *RedisServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("already running")
	}
	logPath := filepath.Join(s.dir, "redis.log")
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", logPath,
		"--daemonize", "no",
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	if err := waitDial(s.Addr, 15*time.Second, exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%w\n%s", err, tail(logPath, 2000))
	}
	s.cmd, s.exited = cmd, exited
	return nil
}

// Kill sends SIGKILL and waits for the process to exit. Killing a stopped
// server does nothing.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd, s.exited = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Restart starts the server again on the same port after Kill (data is
// gone: persistence is off).
func (s *RedisServer) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.start(); err != nil {
		tb.Fatalf("testenv: restart redis-server: %v", err)
	}
}
