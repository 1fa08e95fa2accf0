// Package testenv starts throwaway servers (redis-server, PostgreSQL) for
// integration tests and stops them when the test ends.
//
// Servers listen on 127.0.0.1 on a free port, keep their data in a temporary
// directory that is removed afterwards, and are killed if the test binary
// dies (Pdeathsig). When a server's binary is not installed the test is
// skipped with a loud reason that says how to enable it; with
// SHARDWISE_REQUIRE_INTEGRATION=1 in the environment the same situation
// fails the test instead, so CI cannot pass by skipping.
package testenv
