package clientinput_test

import (
	"errors"
	"fmt"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/gateway/clientinput"
)

// A game's input check (zone.Players.CheckInput): it refuses what it does
// not know by wrapping ErrBadInput, and the gateway sends the client the
// code.
func Example() {
	const kindMove = 1
	check := func(in clientinput.Input) error {
		if in.Kind != kindMove || !in.HasPoint {
			return fmt.Errorf("%w: input %d of kind %d", clientinput.ErrBadInput, in.Seq, in.Kind)
		}
		return nil
	}
	err := check(clientinput.Input{Seq: 7, Entity: 42, Kind: 9})
	fmt.Println(errors.Is(err, clientinput.ErrBadInput), errcode.Of(err))
	fmt.Println(check(clientinput.Input{Seq: 8, Entity: 42, Kind: kindMove, HasPoint: true}))
	// Output:
	// true GATEWAY.BAD_INPUT
	// <nil>
}
