// Command redis routes keys over several Redis servers with shardwise's
// router: weighted nodes, PING health checks, writes to the leader and its
// replicas with ExecuteAll, reads with Execute (failing over when the
// leader is down), and the same in batches with ExecuteAllMulti (one
// pipelined write per node) and ExecuteMulti (one MGET per node).
//
//	go run ./examples/redis -nodes 127.0.0.1:6379,127.0.0.1:6380,127.0.0.1:6381=200 -keys 1000
package main
