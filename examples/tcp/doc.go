// Command tcp routes keys over raw TCP servers with shardwise's router: the
// client is a plain net.Conn speaking a one-line protocol, showing that the
// router needs nothing from the driver but Connect and Disconnect.
//
// With no -nodes it starts three toy servers in process:
//
//	go run ./examples/tcp
//	go run ./examples/tcp -nodes 10.0.0.1:7000,10.0.0.2:7000
package main
