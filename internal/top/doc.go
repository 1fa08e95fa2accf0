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
// It reads only what the nodes export (docs/metrics.md lists every
// series); it keeps no state between snapshots except what the caller
// passes back (Collect's previous snapshot, for rates). It does not talk
// to etcd itself: the caller lists the members.
package top
