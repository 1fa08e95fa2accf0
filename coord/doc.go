// Package coord keeps what the cluster must agree on in etcd: who the live
// members are, which node id and name each holds, and the region table that
// says which node owns which region. The lease is the fence: a node that
// cannot prove its lease is alive stops writing before anyone else can take
// its id, its name, or (through the region table) its regions.
//
// It owns:
//   - Client (Connect): the etcd connection and a key prefix, so several
//     clusters or tests can share one etcd.
//   - Registration (Client.Register): a lease kept alive by coord itself, a
//     node id in 0–255 and a node name claimed under it in one transaction,
//     and the published member record (role, addresses, metadata). Lost and
//     Context report the end of the lease at once. A node without a name is
//     named after its id ("node-<id>"); one that loses the race for an id
//     tries another, a bounded number of times, so nodes booting together
//     all get one.
//   - Members and WatchMembers: the live member list and its changes;
//     WaitNameFree, for a node restarting before its old lease expired.
//   - The region table store (Regions, ApplyRegions, WatchRegions): the
//     cells.Table in etcd, replaced only by compare-and-set on its version,
//     checked against live members unless forced, with who wrote it and
//     why (ApplyOptions.Writer, Reason; RegionsProvenance) stored in the
//     same transaction. ParseRegionsFile and FormatRegions are the
//     operator's JSON/YAML forms.
//   - Elections (Client.Campaign, Leadership, Leader): etcd's own election
//     (client/v3/concurrency), each candidate under its own lease; a write
//     made as the leader is fenced by ApplyOptions.Leader.
//   - Embedded and EmbeddedCluster: etcd members run inside this process,
//     for one-machine use and for tests (shardwise demo and shardwise dev
//     run one).
//   - Metrics: Prometheus collectors (renewals, lost leases, registrations
//     and applies by result, fence headroom) that the user registers.
//
// It does not own the region table's type, validation or geometry (cells),
// the rule for a node name (nodename, shared with cells and link),
// the session directory (directory, deliberately a different store), or what
// a node does with its regions (the planned zone runtime).
//
// Invariants:
//  1. A node id and a node name are each held by at most one live lease:
//     both are claimed by a transaction that succeeds only if the key does
//     not exist, and both keys live and die with the lease.
//  2. A registration gives up before etcd can free its claims: its local
//     deadline is the send time of the last successful renewal plus nine
//     tenths of the TTL, and etcd's expiry is the receipt time plus the
//     whole TTL, which is later by at least a tenth of the TTL (the guard
//     for late timers, pauses and clock-rate skew). A revoke frees the
//     claims at once; the registration learns of it from a watch on its
//     member key. Once Lost is closed it never reopens.
//  3. Every write made as a member is fenced by a compare on the lease
//     holding the member key (Registration.Update).
//  4. The region table's version goes up by exactly one per write: a table
//     of version V is stored only over version V−1, with a compare on the
//     key's revision, so concurrent operators cannot both win and a watcher
//     sees versions strictly in order: every version while etcd keeps the
//     history, and after a compaction the current one, never an older one.
//  5. Every goroutine coord starts is owned by a Client or Registration and
//     joined by its Close; Close is idempotent.
//
// Key layout under the prefix (default "/shardwise/"):
//
//	members/NNN         member record (JSON), under the member's lease
//	names/NAME          the holder's node id, under the same lease
//	regions/table       the region table (cells JSON)
//	regions/provenance  who wrote that table and why (JSON, with its version)
//	elections/NAME/…    the candidates of an election, each under its lease
//
// Time: lease TTLs are etcd's (whole seconds). The only local time coord
// measures is the registration's fence deadline, on the injected clock.
package coord
