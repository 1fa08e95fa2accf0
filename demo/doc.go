// Package demo runs shardwise's demonstrations as functions the command
// ("shardwise demo") and the tests call, so the command keeps only flags
// and output.
//
// RunEconomy is the economy demo: an embedded etcd,
// economy nodes (package econ) each serving the economy service on a
// loopback gRPC address, simulated buyers paying sellers through the econ
// client (routed by scope, following misroutes, retrying unknown outcomes
// with the same key), one node halted mid-epoch, and the survivors
// re-forming, serving its scopes and sweeping its orphans. It ends with a
// report checked against the store: econ's money audit, the netting ratio,
// every orphan settled. RunWorld is the whole-cluster demo (zone nodes,
// economy nodes, bots, a region move, an economy node killed, a zone node
// killed and its failover measured), described in docs/world.md; its
// zone node kill is three switches of the node's own (zonekill.go), since
// its nodes share the process.
package demo
