package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/shardwise/shardwise/internal/testenv"
)

// The example program runs end to end against two real redis-servers:
// per-key writes and reads, then the same in batches.
func TestRunAgainstRealRedis(t *testing.T) {
	a, b := testenv.StartRedis(t), testenv.StartRedis(t)
	spec := "127.0.0.1:" + strconv.Itoa(a.Port) + ",127.0.0.1:" + strconv.Itoa(b.Port) + "=200"
	if err := run(spec, 2, 200, time.Minute); err != nil {
		t.Fatal(err)
	}
}
