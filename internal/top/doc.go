// Package top is what "shardwise top" shows: the numbers every node of a
// cluster serves at /metrics, gathered into one table.
//
// It owns three steps, each usable alone:
//
//  1. Targets: the nodes to scrape, from coord's member records (a member
//     publishing Addrs["metrics"]; zone and econ nodes do when started with
//     a metrics address).
//  2. Scrape and Collect: one HTTP GET of /metrics per target, parsed with
//     prometheus/common's expfmt, into a Row per node (zone or econ
//     numbers, by the member's role). A node that does not answer is a row
//     with its error, not a failed table.
//  3. Snapshot.WriteTo: the table, one section per role, sorted by name.
//
// Take does the three at once. The package reads only what the nodes
// export (docs/metrics.md lists every series) and keeps no state between
// snapshots: the numbers are totals since each node started, not rates.
// It does not talk to etcd itself: the caller lists the members. Package
// toptest runs a zone node and an economy node for tests of it.
package top
