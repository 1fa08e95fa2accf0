package main

import (
	"bufio"
	"net"
	"strings"
	"sync"
)

// lineServer is a toy key-value server for the example and its test:
// "SET k v" → "OK", "GET k" → the value or "NOTFOUND", "PING" → "PONG".
type lineServer struct {
	ln    net.Listener
	mu    sync.Mutex
	data  map[string]string
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startLineServer listens on addr ("127.0.0.1:0" for any free port).
func startLineServer(addr string) (*lineServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &lineServer{ln: ln, data: map[string]string{}, conns: map[net.Conn]struct{}{}}
	s.wg.Go(s.accept)
	return s, nil
}

func (s *lineServer) Addr() *net.TCPAddr { return s.ln.Addr().(*net.TCPAddr) }

func (s *lineServer) accept() {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[conn] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() { s.serve(conn) })
	}
}

func (s *lineServer) serve(conn net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
	}()
	r := bufio.NewScanner(conn)
	for r.Scan() {
		if _, err := conn.Write([]byte(s.handle(r.Text()) + "\n")); err != nil {
			return
		}
	}
}

// handle answers one request line. Replies never contain a newline, so one
// request always gets exactly one reply line.
func (s *lineServer) handle(line string) string {
	fields := strings.SplitN(line, " ", 3)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case fields[0] == "PING" && len(fields) == 1:
		return "PONG"
	case fields[0] == "SET" && len(fields) == 3:
		s.data[fields[1]] = fields[2]
		return "OK"
	case fields[0] == "GET" && len(fields) == 2:
		if v, ok := s.data[fields[1]]; ok {
			return v
		}
		return "NOTFOUND"
	}
	return "ERR unknown command"
}

// Close stops listening, drops every connection (as a crashed server
// would) and waits for its goroutines.
func (s *lineServer) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
