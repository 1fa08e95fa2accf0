// Package demo runs shardwise's demonstrations as functions the command
// ("shardwise demo") and the tests call, so the command keeps only flags
// and output.
//
// What exists today is the economy demo (RunEconomy): an embedded etcd,
// economy nodes (package econ) each serving the economy service on a
// loopback gRPC address, simulated buyers paying sellers through the econ
// client (routed by scope, following misroutes, retrying unknown outcomes
// with the same key), one node halted mid-epoch, and the survivors
// re-forming, serving its scopes and sweeping its orphans. It ends with a
// report checked against the store: econ's money audit, the netting ratio,
// every orphan settled. The whole-cluster demo (zone nodes, bots, a region
// move) is on the README's roadmap.
package demo
