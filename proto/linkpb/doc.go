// Package linkpb holds the wire messages and gRPC service of the node link,
// generated from proto/link.proto by scripts/gen-proto. It owns no
// behaviour: package link gives the messages their meaning (sequence
// numbers, correlation, deadlines) and validates them on receipt. Do not
// edit the generated files; change the .proto and regenerate.
package linkpb
