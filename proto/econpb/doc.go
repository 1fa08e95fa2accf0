// Package econpb holds the messages and gRPC service of the economy service
// (shardwise.econ.v1.Economy), generated from proto/econ.proto by
// scripts/gen-proto. It owns no behaviour: package econ gives the messages
// their meaning (validation and limits, routing, misroutes, retries by
// movement key, the error codes) and docs/protocol.md documents them for
// clients in any language. Do not edit the generated files; change the
// .proto and regenerate.
package econpb
