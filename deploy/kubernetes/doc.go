// Package kubernetes holds no code: its directory holds the Kubernetes
// manifests of a shardwise cluster (docs/operators.md, "Running on
// Kubernetes") and secrets.sh, which writes the Secrets they read. It is a
// module of its own, like bench, so that the Kubernetes API types its test
// decodes the manifests into are no dependency of shardwise itself.
//
// manifests_test.go decodes every manifest strictly (an unknown field is an
// error) and checks what they promise: probes and resource requests on
// every container, node names that are the StatefulSets' pod names and
// valid shardwise node names, certificates that name the host each node
// advertises, every Secret, key and ConfigMap referenced written or
// defined, ports that agree with the flags, and every flag a real flag of
// the shardwise command (read from the built binary's help; set
// SHARDWISE_BIN to use a binary already built).
package kubernetes
