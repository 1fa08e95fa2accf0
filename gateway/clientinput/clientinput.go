// Package clientinput is what a client's input is once the gateway has
// read it: Input, and the error a game refuses one with (ErrBadInput,
// GATEWAY.BAD_INPUT).
//
// What it owns: those two names and the code string, nothing else. It
// imports only torus and errcode, so the zone runtime and a game module
// name a client's input without importing the gateway's WebSocket stack.
// Package gateway reads inputs off the socket and hands them on as this
// type (gateway.Input is Input; gateway.ErrBadInput is ErrBadInput).
package clientinput

import (
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

// Input is one validated client input.
type Input struct {
	Seq    uint32
	Entity uint64 // the player's master or pet
	Kind   uint32 // the game's input kind
	// Point is where to go, when HasPoint: finite, not normalised.
	Point    torus.Pos
	HasPoint bool
	Target   uint64
}

// CodeBadInput is the code of an input the game refuses (unknown kind,
// missing point): part of the client protocol (docs/protocol.md).
const CodeBadInput = "GATEWAY.BAD_INPUT"

// ErrBadInput is what a game's input check wraps for an input it refuses;
// the gateway sends the client its code.
var ErrBadInput = errcode.New(CodeBadInput, "gateway: input refused")
