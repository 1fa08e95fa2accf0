package main

import (
	"strings"
	"testing"
)

// The line server decodes bytes from the network: whatever line arrives,
// it answers with exactly one line; and a value stored with SET reads back
// with GET.
func FuzzLineServerHandle(f *testing.F) {
	f.Add("PING", "k", "v")
	f.Add("SET k a b c", "key:1", "a b c")
	f.Add("GET", "x", "")
	f.Add("\x00\xff SET", "é", "NOTFOUND")
	f.Fuzz(func(t *testing.T, line, key, value string) {
		s := &lineServer{data: map[string]string{}}
		if !strings.ContainsAny(line, "\r\n") {
			if reply := s.handle(line); strings.ContainsAny(reply, "\r\n") {
				t.Fatalf("reply %q to %q spans lines", reply, line)
			}
		}
		if key == "" || strings.ContainsAny(key, " \r\n") || strings.ContainsAny(value, "\r\n") {
			return
		}
		if got := s.handle("SET " + key + " " + value); got != "OK" {
			t.Fatalf("SET %q %q = %q", key, value, got)
		}
		if got := s.handle("GET " + key); got != value {
			t.Fatalf("GET %q = %q, want %q", key, got, value)
		}
	})
}
