// Command shardwise runs the demo, the nodes of a cluster, and the operator
// tools around them. Run "shardwise help" for the list.
//
//	shardwise demo                  the whole cluster in one process: zone and
//	                                economy nodes, bots, a region move, an
//	                                economy node and a zone node killed
//	shardwise demo economy          three economy nodes in one process on SQLite:
//	                                netting, a killed node, the orphan sweep
//	shardwise world --ticks N       the reference game headless on one node
//	shardwise zone --endpoints E --name N --certs D [--module game|wander] [--metrics ADDR]
//	                                one zone node of the reference game (or of
//	                                examples/wander), sharing the world with the
//	                                other zone nodes in etcd; a region the table
//	                                moves away is handed over, entities and all;
//	                                --metrics serves Prometheus metrics (entities
//	                                per region, handoffs) at http://ADDR/metrics
//	shardwise regions new --nodes a,b [--set REGION=NODE]
//	                                print a region table over the zone grid
//	shardwise regions show|apply    the region table in etcd (compare-and-set)
//	shardwise members               the live members registered in etcd
//	shardwise top --endpoints E [--once]
//	                                every member's /metrics in one table (zone:
//	                                ticks, entities, handoffs; economy: movements,
//	                                netting ratio), refreshed every --every
//	shardwise dev [--data D]        an embedded etcd on 127.0.0.1:2379 for trying
//	                                the commands above (docs/operators.md)
//	shardwise certs --dir D --nodes a,b,c [--ca-key F] [--san a=HOST] [--rotate]
//	                                a cluster CA and node certificates for the link;
//	                                with the CA key kept, nodes added and rotated
//
// Each subcommand lives in its own file with its flags; main.go only wires
// them to the root command and to the process's signals. The zone
// command's node flags and running are package zone/zonecli's, which a
// user's own main builds with its own module; zone.go adds only the
// reference game's and wander's flags.
package main
