package gateway

import (
	"errors"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/proto/clientpb"
)

func seedMessages() [][]byte {
	var out [][]byte
	for _, m := range []*clientpb.ClientMessage{
		{Body: &clientpb.ClientMessage_Login{Login: &clientpb.Login{Token: "AgABAgMEBQYHCAk"}}},
		{Body: &clientpb.ClientMessage_Input{Input: &clientpb.Input{Seq: 1, Entity: 1 << 60, Kind: 1, Point: &clientpb.Point{X: -5, Y: 1e9}}}},
		{Body: &clientpb.ClientMessage_Input{Input: &clientpb.Input{Seq: 2, Entity: 7, Kind: 2, Target: 9}}},
		{Body: &clientpb.ClientMessage_Input{Input: &clientpb.Input{Point: &clientpb.Point{X: math.NaN()}}}},
		{Body: &clientpb.ClientMessage_Ping{Ping: &clientpb.Ping{Nonce: 3}}},
		{Body: &clientpb.ClientMessage_Logout{Logout: &clientpb.Logout{}}},
		{Body: &clientpb.ClientMessage_Resume{Resume: &clientpb.Resume{Credential: Credential{Account: 3, Epoch: 9, Secret: [32]byte{7}}.String()}}},
		{Body: &clientpb.ClientMessage_Resume{Resume: &clientpb.Resume{Credential: "AQ"}}},
		{},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return append(out, []byte{0xff}, []byte{0x0a, 0x80, 0x80, 0x80, 0x80, 0x10})
}

// FuzzDecodeClient: no bytes make the decoder panic; it either refuses
// them with ErrMalformed or returns exactly one checked message, which
// survives a round trip.
func FuzzDecodeClient(f *testing.F) {
	for _, b := range seedMessages() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeClient(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		set := 0
		for _, ok := range []bool{m.login != nil, m.input != nil, m.ping != nil, m.logout, m.resume != nil} {
			if ok {
				set++
			}
		}
		if set != 1 {
			t.Fatalf("%d bodies set", set)
		}
		switch {
		case m.login != nil:
			if m.login.Token == "" || len(m.login.Token) > maxTokenLen {
				t.Fatalf("token of %d bytes passed", len(m.login.Token))
			}
		case m.input != nil:
			if m.input.HasPoint && !m.input.Point.Finite() {
				t.Fatalf("point %v passed", m.input.Point)
			}
		case m.resume != nil:
			if !m.resume.Account.Valid() || m.resume.Epoch == 0 {
				t.Fatalf("credential %+v passed", *m.resume)
			}
		}
	})
}

// FuzzParseCredential: no text makes ParseCredential panic; it refuses
// with ErrMalformed or returns a credential whose text is what it was
// given (one text per credential: strict base64, no padding).
func FuzzParseCredential(f *testing.F) {
	good := Credential{Account: 12, Epoch: 1 << 51, Secret: [32]byte{1, 31: 2}}.String()
	for _, s := range []string{good, "", "AQ", good[:len(good)-1] + "_", "A" + good[1:], good + "A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCredential(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		if c.String() != s {
			t.Fatalf("%q parsed to %+v, whose text is %q", s, c, c.String())
		}
	})
}

func TestBatchHeaderIsAServerMessage(t *testing.T) {
	frames := []byte{1, 2, 3, 4, 5}
	for _, tick := range []uint64{0, 1, 300, math.MaxUint64} {
		b := append(batchHeader(nil, tick, len(frames)), frames...)
		var m clientpb.ServerMessage
		if err := proto.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if bt := m.GetBatch(); bt == nil || bt.Tick != tick || string(bt.Frames) != string(frames) {
			t.Fatalf("tick %d: decoded %v", tick, &m)
		}
		want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&clientpb.ServerMessage{Body: &clientpb.ServerMessage_Batch{Batch: &clientpb.Batch{Tick: tick, Frames: frames}}})
		if string(want) != string(b) {
			t.Fatalf("tick %d: hand encoding %x, protobuf's %x", tick, b, want)
		}
	}
}
