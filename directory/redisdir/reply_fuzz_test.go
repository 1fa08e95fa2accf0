package redisdir

import (
	"errors"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/errcode"
)

// The script replies are bytes from outside the process (a server, a proxy,
// a script changed by hand on the server): whatever they hold, decoding
// them must not panic, and a refusal must come out as a coded error. The
// fields of one reply are joined with '|'.
func FuzzFencedReply(f *testing.F) {
	for _, seed := range []string{
		"K", "K|17|1|0|0|0|1700000000000", "N", "S|42", "S", "R|3|7|1", "R|3", "R", "",
		"K|17|1|0|0|2|1700000000000", "K|x|1|0|0|0|1", "S|-1", "R|300|7|1", "Q|1",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		fields := strings.Split(reply, "|")
		if reply == "" {
			fields = nil
		}
		s, err := fenced(directory.OpRenew, 1001, 5, directory.Route{Node: 1, Version: 2}, fields)
		if err != nil {
			if errcode.Of(err) == "" {
				t.Fatalf("reply %q: error without a code: %v", reply, err)
			}
			if s != (directory.Session{}) {
				t.Fatalf("reply %q: session %+v returned with error %v", reply, s, err)
			}
			return
		}
		if len(fields) == 0 || fields[0] != "K" {
			t.Fatalf("reply %q accepted without status K", reply)
		}
		if len(fields) > 1 && s.HasMaster != (fields[5] == "1") {
			t.Fatalf("reply %q: HasMaster %v", reply, s.HasMaster)
		}
	})
}

// FuzzResumeReply: the resume script's reply decodes to a refusal with a
// known reason, a session, or a coded error, and never panics.
func FuzzResumeReply(f *testing.F) {
	for _, seed := range []string{
		"X|superseded", "X|unknown", "X|mismatch", "X|expired", "X|other", "X", "X|expired|1", "",
		"17|1|0|0|0|1700000000000|||||||", "17|1|0|0|0|1700000000000|16|2|0|0|0|1699999999000", "17|1|0|0|0",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		fields := strings.Split(reply, "|")
		if reply == "" {
			fields = nil
		}
		s, prev, err := resumeReply(1001, 5, fields)
		if err != nil {
			if errcode.Of(err) == "" {
				t.Fatalf("reply %q: error without a code: %v", reply, err)
			}
			if s != (directory.Session{}) || prev != (directory.Session{}) {
				t.Fatalf("reply %q: sessions returned with error %v", reply, err)
			}
			var re *directory.ResumeRefusedError
			if errors.As(err, &re) && (len(fields) != 2 || fields[0] != "X" || re.Reason != fields[1]) {
				t.Fatalf("reply %q refused as %q", reply, re.Reason)
			}
			return
		}
		if len(fields) != 12 || s.Account != 1001 || s.Epoch == 0 && fields[0] != "0" {
			t.Fatalf("reply %q accepted as %+v", reply, s)
		}
	})
}
