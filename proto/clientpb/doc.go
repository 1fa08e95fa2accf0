// Package clientpb holds the messages of the client protocol (a player's
// client and its gateway), generated from proto/client.proto by
// scripts/gen-proto. It owns no behaviour: package gateway gives the
// messages their meaning (the handshake, limits, the batch per tick) and
// docs/protocol.md documents them for clients in any language. Do not edit
// the generated files; change the .proto and regenerate.
package clientpb
