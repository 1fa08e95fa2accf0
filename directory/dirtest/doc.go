// Package dirtest is the contract suite every directory.Directory
// implementation passes: the in-process one (package directory) and the
// Valkey/Redis one (directory/redisdir) run the same tests, so they cannot
// drift apart unnoticed.
//
// It owns the suite only; implementations own their own specific tests
// (a Redis restart, exact TTL arithmetic under a fake clock).
//
// Invariants it checks are those of package directory's doc comment, one
// subtest per claim (epoch bumps, stale writes refused, route versions,
// lease expiry, atomic concurrent connects, single-use token claims).
package dirtest
