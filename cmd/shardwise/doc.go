// Command shardwise runs the demo, the nodes of a cluster, and the operator
// tools around them. Run "shardwise help" for the list.
//
//	shardwise demo                  three economy nodes in one process on SQLite:
//	                                netting, a killed node, the orphan sweep
//	shardwise world --ticks N       the reference game headless on one node
//	shardwise zone --endpoints E --name N --certs D
//	                                one zone node of the reference game, sharing
//	                                the world with the other zone nodes in etcd
//	shardwise regions show|apply    the region table in etcd (compare-and-set)
//	shardwise members               the live members registered in etcd
//	shardwise certs --dir D --nodes a,b,c
//	                                a cluster CA and node certificates for the link
//
// Each subcommand lives in its own file with its flags; main.go only wires
// them to the root command and to the process's signals.
package main
