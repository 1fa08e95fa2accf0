// Package redisdir is the session directory (directory.Directory) on
// Valkey/Redis, through github.com/redis/go-redis/v9.
//
// Each account has up to three keys sharing one hash tag (so a cluster
// puts them in one slot and a script may touch them all):
//
//	<prefix>{@<account>}:s  hash: e epoch, g gateway, mn/mv/hm master node,
//	                         version, has-master, x lease expiry (Unix ms);
//	                         its TTL is the lease
//	<prefix>{@<account>}:c  hash: e last epoch, r highest route version;
//	                         kept CounterRetention after the last write, so
//	                         it outlives the session
//	<prefix>{@<account>}:r  hash: e epoch, h the resume secret's SHA-256
//	                         (hex), w window ms, x expiry (Unix ms); its TTL
//	                         is the window, restarted by a renewal of e
//
// where <account> is the account's canonical text (account.ID.String, its
// decimal digits), and each claimed login token one key
// <prefix>tok:<id hex>, set with SET NX PX until the token can no longer be
// accepted.
//
// Needs Redis 5 or later, or Valkey: the scripts read TIME before writing,
// which relies on effect replication (the default since Redis 5). Run the
// server with maxmemory-policy noeviction: every key here has a TTL, so a
// volatile-* policy could evict a live session or a token record.
//
// It owns the keys under its prefix and the Lua scripts that change them.
// It does not own the client: the caller makes it (single node, Sentinel or
// cluster) and closes it.
//
// Invariants (beyond directory's):
//  1. Every read-check-write is one Lua script, so it is atomic in Redis;
//     the scripts read the time with TIME, so epochs and lease expiries come
//     from one clock, Redis's.
//  2. Numbers cross into Lua as decimal strings and are compared as Lua
//     numbers only below 2^53 (epochs are µs since 1970, route versions are
//     capped at directory.MaxRouteVersion), so nothing is rounded.
//  3. A Redis error is returned as *directory.UnavailableError; a script
//     that ran returns a definite answer.
package redisdir
