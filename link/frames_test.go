package link

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/proto/linkpb"
)

func TestBackoffDelayDoublesCapsAndJitters(t *testing.T) {
	min, max := 100*time.Millisecond, time.Second
	cases := []struct {
		attempt int
		r       float64
		want    time.Duration
	}{
		{0, 0, 50 * time.Millisecond},
		{0, 0.999999, 100 * time.Millisecond},
		{1, 0, 100 * time.Millisecond},
		{3, 0, 400 * time.Millisecond},
		{4, 0, 500 * time.Millisecond}, // 1.6s capped to 1s
		{60, 0.5, 750 * time.Millisecond},
	}
	for _, c := range cases {
		got := backoffDelay(c.attempt, min, max, c.r)
		if d := got - c.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("backoffDelay(%d, r=%v) = %v, want %v", c.attempt, c.r, got, c.want)
		}
	}
}

func TestValidateFrames(t *testing.T) {
	ok := []*linkpb.ControlFrame{
		{Seq: 1, Type: linkpb.ControlFrame_TYPE_REQUEST, CallId: 9},
		{Seq: 2, Type: linkpb.ControlFrame_TYPE_MESSAGE, Payload: []byte("x")},
	}
	bad := []*linkpb.ControlFrame{
		{Type: linkpb.ControlFrame_TYPE_MESSAGE},                                    // no seq
		{Seq: 1, Type: linkpb.ControlFrame_TYPE_REQUEST},                            // no call id
		{Seq: 1, Type: linkpb.ControlFrame_TYPE_MESSAGE, CallId: 3},                 // message with call id
		{Seq: 1, Type: linkpb.ControlFrame_TYPE_REPLY, CallId: 3},                   // reply from the dialer
		{Seq: 1, Type: linkpb.ControlFrame_TYPE_UNSPECIFIED},                        // no type
		{Seq: 1, Type: linkpb.ControlFrame_TYPE_MESSAGE, ErrorCode: "X"},            // error on a message
		{Seq: 1, Type: linkpb.ControlFrame_TYPE_MESSAGE, Payload: make([]byte, 11)}, // too big
	}
	for _, f := range ok {
		if err := validateInbound(f, 10); err != nil {
			t.Errorf("%v refused: %v", f, err)
		}
	}
	for _, f := range bad {
		if err := validateInbound(f, 10); err == nil {
			t.Errorf("%v accepted", f)
		}
	}
	if validateReply(&linkpb.ControlFrame{Type: linkpb.ControlFrame_TYPE_REPLY}, 10) == nil {
		t.Error("reply without call id accepted")
	}
	if validateBatch(&linkpb.ReplicationBatch{}) == nil {
		t.Error("batch without seq accepted")
	}
}

// FuzzControlFrame feeds arbitrary bytes through what a server does with a
// frame from a peer: decode, validate. It must never panic, and a frame it
// accepts must survive a re-encode unchanged in meaning.
func FuzzControlFrame(f *testing.F) {
	seeds := []*linkpb.ControlFrame{
		{Seq: 1, Type: linkpb.ControlFrame_TYPE_REQUEST, CallId: 1, Kind: 2, Payload: []byte("hi"), DeadlineUnixNano: 1},
		{Seq: 7, Type: linkpb.ControlFrame_TYPE_MESSAGE},
		{Seq: 1, Type: linkpb.ControlFrame_TYPE_REPLY, CallId: 3, ErrorCode: "X.Y"},
	}
	for _, s := range seeds {
		b, _ := proto.Marshal(s)
		f.Add(b)
	}
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var fr linkpb.ControlFrame
		if err := proto.Unmarshal(data, &fr); err != nil {
			return
		}
		inErr := validateInbound(&fr, 1<<10)
		replyErr := validateReply(&fr, 1<<10)
		if inErr == nil && replyErr == nil {
			t.Fatalf("frame valid both as inbound and as reply: %v", &fr)
		}
		if inErr != nil {
			return
		}
		b, err := proto.Marshal(&fr)
		if err != nil {
			t.Fatal(err)
		}
		var again linkpb.ControlFrame
		if err := proto.Unmarshal(b, &again); err != nil {
			t.Fatal(err)
		}
		if validateInbound(&again, 1<<10) != nil || !proto.Equal(&fr, &again) {
			t.Fatalf("re-encoded frame changed: %v → %v", &fr, &again)
		}
	})
}

func FuzzReplicationBatch(f *testing.F) {
	b, _ := proto.Marshal(&linkpb.ReplicationBatch{Seq: 3, Entries: []*linkpb.ReplicationEntry{{Entity: 1, Epoch: 2, Sequence: 3, Kind: 4, Payload: []byte("p")}}})
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var rb linkpb.ReplicationBatch
		if err := proto.Unmarshal(data, &rb); err != nil {
			return
		}
		if err := validateBatch(&rb); (err == nil) != (rb.Seq != 0) {
			t.Fatalf("seq %d validated as %v", rb.Seq, err)
		}
	})
}

// FuzzParseUintMD: the stream-opening metadata is outside input too.
func FuzzParseUintMD(f *testing.F) {
	for _, s := range []string{"", "0", "1", "18446744073709551615", "18446744073709551616", "-1", "+1", " 1", "0x10", "007"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, twice bool) {
		vals := []string{s}
		if twice {
			vals = append(vals, s)
		}
		v, err := parseUintMD(vals)
		if twice {
			if err == nil {
				t.Fatal("repeated value accepted")
			}
			return
		}
		if err != nil {
			return
		}
		if back, _ := strconv.ParseUint(s, 10, 64); back != v {
			t.Fatalf("parsed %q as %d", s, v)
		}
	})
}
