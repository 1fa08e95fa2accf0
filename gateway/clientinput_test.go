package gateway_test

import (
	"errors"
	"testing"

	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/gateway/clientinput"
)

// gateway.Input and gateway.ErrBadInput are clientinput's, not copies: a
// game that checks inputs against either name works with the other, and
// code written against the gateway's names compiles unchanged.
func TestInputIsClientInput(t *testing.T) {
	var in gateway.Input = clientinput.Input{Seq: 1, Kind: 2}
	var back clientinput.Input = in
	if back != in {
		t.Fatalf("%+v became %+v", in, back)
	}
	if !errors.Is(gateway.ErrBadInput, clientinput.ErrBadInput) || !errors.Is(clientinput.ErrBadInput, gateway.ErrBadInput) {
		t.Fatal("gateway.ErrBadInput and clientinput.ErrBadInput are different sentinels")
	}
	if gateway.CodeBadInput != clientinput.CodeBadInput {
		t.Fatalf("codes %q and %q", gateway.CodeBadInput, clientinput.CodeBadInput)
	}
}
